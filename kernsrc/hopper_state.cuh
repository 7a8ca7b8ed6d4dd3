// hopper_state.cuh: how a consumer group of the Hopper core forward reads
// and writes the caller's states (docs/SPEC.md, "The serving layer"): h0
// and ht, or a pool through its slot table; [K,V] or [V,K]; fp32, or a
// bf16 pool's (widened as read, rounded to nearest even once as written);
// and the checkpoints. A consumer thread holds S^T entries S[4 j + e] =
// entry (k, v), k = 8 j + 2 tq + (e & 1), v = vr + 8 (e >> 1) (vr = its
// first value row): in [V,K] the pair (k, k + 1) is adjacent (one 8-byte
// fp32 or 4-byte bf16 access), in [K,V] the two lie 128 apart.
//
// Only the kernel's states variants (HopperCfg's St, kernsrc.HopperCfg.States)
// have this code; the others keep the consumer's own fp32 [K,V] loops. In
// a states variant the format is the launch's flags, the same in every
// thread, and fp32 [K,V] h0 and ht still take those loops.
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

// Reads the thread's 64 entries of the state at base + at (elements of
// the format's dtype) in format fmt.
GDN_DEVICE void load_state(float S[64], const void* base, int64_t at, int fmt, int vr, int tq) {
  const bool vk = fmt & kStateVK, bf = fmt & kPoolBF16;
  const float* f = static_cast<const float*>(base) + at;
  const uint16_t* b = static_cast<const uint16_t*>(base) + at;
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      const int v = vr + 8 * x, k = 8 * j + 2 * tq;
      float2 y;
      if (vk && bf)
        y = unpack2_of<false>(*reinterpret_cast<const uint32_t*>(b + v * 128 + k));
      else if (vk)
        y = *reinterpret_cast<const float2*>(f + v * 128 + k);
      else if (bf)
        y = make_float2(bf16_to_float(b[k * 128 + v]), bf16_to_float(b[k * 128 + 128 + v]));
      else
        y = make_float2(f[k * 128 + v], f[k * 128 + 128 + v]);
      S[4 * j + 2 * x] = y.x;
      S[4 * j + 2 * x + 1] = y.y;
    }
}

// Writes the thread's 64 entries to the state at base + at in format fmt
// (bf16: each rounded to nearest even).
GDN_DEVICE void store_state(const float S[64], void* base, int64_t at, int fmt, int vr, int tq) {
  const bool vk = fmt & kStateVK, bf = fmt & kPoolBF16;
  float* f = static_cast<float*>(base) + at;
  uint16_t* b = static_cast<uint16_t*>(base) + at;
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      const int v = vr + 8 * x, k = 8 * j + 2 * tq;
      const float lo = S[4 * j + 2 * x], hi = S[4 * j + 2 * x + 1];
      if (vk && bf) {
        *reinterpret_cast<uint32_t*>(b + v * 128 + k) = pack_bf16x2(lo, hi);
      } else if (vk) {
        *reinterpret_cast<float2*>(f + v * 128 + k) = make_float2(lo, hi);
      } else if (bf) {
        const uint32_t r = pack_bf16x2(lo, hi);
        b[k * 128 + v] = (uint16_t)(r & 0xffffu);
        b[k * 128 + 128 + v] = (uint16_t)(r >> 16);
      } else {
        f[k * 128 + v] = lo;
        f[k * 128 + 128 + v] = hi;
      }
    }
}
