// hopper_state.cuh: how a consumer group of the Hopper core forward finds
// and writes the caller's states (docs/SPEC.md, "The serving layer"): h0
// and ht, or a pool through its slot table; [K,V] (entry (k, v) at
// k * 128 + v) or [V,K] (at v * 128 + k); fp32, or a bf16 pool's (widened
// as read, rounded to nearest even once as written); and the checkpoints,
// the state after every E tokens of each sequence. The consumer's loads
// and stores (hopper_consumer.cuh) go element by element, as its fp32
// [K,V] loops do: written with paired accesses instead, the BV 64 states
// variants had their wgmma serialised by one NVRTC or the other.
//
// Only the kernel's states variants (HopperCfg's St, kernsrc.HopperCfg.States)
// have this code; the others keep the consumer's own fp32 [K,V] loops. In
// a states variant the format is the launch's flags, the same in every
// thread, and fp32 [K,V] h0 and ht still take those loops. The fused
// states variants keep no checkpoints: with their store in the chunk loop
// the consumers spilled.
#pragma once
#include "hopper_chunk.cuh"

constexpr int kStateFormat = kStateVK | kPoolBF16 | kPoolSlots;

// The format flags of h0 and of ht: the caller's, unless the pointer holds
// the plan's own fp32 [K,V] states (kH0Own, kHtOwn). 0: today's format.
GDN_DEVICE int h0_format(const GdnHopperParams& p) {
  return (p.sc.flags & kH0Own) ? 0 : p.sc.flags & kStateFormat;
}
GDN_DEVICE int ht_format(const GdnHopperParams& p) {
  return (p.sc.flags & kHtOwn) ? 0 : p.sc.flags & kStateFormat;
}

// The element offset of grid row n's head h state among the caller's
// states of format fmt: row n, or under kPoolSlots slot slots[n]; -1 for
// a negative slot (or one past the pool, which the host refused in its
// copy of the table), which reads as zero and is never written.
GDN_DEVICE int64_t caller_state(const GdnHopperParams& p, int fmt, int n, int h) {
  int64_t row = n;
  if (fmt & kPoolSlots) {
    row = p.st.slots[n];
    if (row < 0 || row >= p.sc.pool_slots) return -1;
  }
  return (row * p.sc.Hv + h) * (128 * 128);
}

// Writes entry (k, v) of the state at base + at in format fmt (bf16:
// rounded to nearest even).
GDN_DEVICE void set_state_entry(float* base, int64_t at, int fmt, int k, int v, float x) {
  const int64_t i = at + ((fmt & kStateVK) ? v * 128 + k : k * 128 + v);
  if (fmt & kPoolBF16)
    reinterpret_cast<uint16_t*>(base)[i] = (uint16_t)(pack_bf16x2(x, 0.f) & 0xffffu);
  else
    base[i] = x;
}

// The checkpoint base of the CTA's grid row, start * ck_chunks + c0
// (HopperStatePtrs::ckpt_rows): the split passes' table, or for grid row
// n = sequence n (c0 = 0) the sum of floor(len_m / E) over the sequences
// m < n, each warp's lanes taking every 32nd. Called by whole warps.
GDN_DEVICE int ckpt_base(const GdnHopperParams& p, const Work& w) {
  const int ck = p.sc.ck_chunks, every = 64 * ck;
  if (p.st.ckpt_rows != nullptr) return p.st.ckpt_rows[w.n];
  if (p.ptr.cu_seqlens == nullptr) return w.n * (p.sc.T / every) * ck;
  int rows = 0;
  for (int m = (int)(threadIdx.x & 31); m < w.n; m += 32) {
    int64_t b, e;
    if (p.sc.flags & kSeqlensInt64) {
      b = static_cast<const int64_t*>(p.ptr.cu_seqlens)[m];
      e = static_cast<const int64_t*>(p.ptr.cu_seqlens)[m + 1];
    } else {
      b = static_cast<const int32_t*>(p.ptr.cu_seqlens)[m];
      e = static_cast<const int32_t*>(p.ptr.cu_seqlens)[m + 1];
    }
    rows += (int)(max(e - b, (int64_t)0) / every);
  }
  return __reduce_add_sync(0xffffffffu, rows) * ck;
}

// The checkpoints of a CTA's walk (docs/SPEC.md, "Checkpoints"): chunk c
// ends one where (base + c + 1) is a multiple of ck_chunks and the chunk
// is whole, in row (base + c + 1) / ck_chunks - 1. next is the next such
// chunk (past the walk: none), row its row.
struct CkptWalk {
  int next, row;
  GDN_DEVICE void start(const GdnHopperParams& p, const Work& w) {
    next = w.nch;
    row = 0;
    if (p.sc.ck_chunks <= 0 || p.st.ckpt == nullptr) return;
    const int ck = p.sc.ck_chunks, base = ckpt_base(p, w);
    next = (ck - 1) - base % ck;  // (base + next + 1) % ck == 0
    row = (base + next + 1) / ck - 1;
  }
};
