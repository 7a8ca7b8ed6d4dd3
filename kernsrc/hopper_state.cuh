// hopper_state.cuh: how a consumer group of the Hopper core forward finds
// and writes the caller's states (docs/SPEC.md, "The serving layer"): h0
// and ht, or a pool through its slot table; [K,V] (entry (k, v) at
// k * 128 + v) or [V,K] (at v * 128 + k); fp32, or a bf16 pool's (widened
// as read, rounded to nearest even once as written). The consumer's loads
// and stores (hopper_consumer.cuh) go element by element, as its fp32
// [K,V] loops do: written with paired accesses instead, the BV 64 states
// variants had their wgmma serialised by one NVRTC or the other.
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

// Writes entry (k, v) of the state at base + at in format fmt (bf16:
// rounded to nearest even).
GDN_DEVICE void set_state_entry(float* base, int64_t at, int fmt, int k, int v, float x) {
  const int64_t i = at + ((fmt & kStateVK) ? v * 128 + k : k * 128 + v);
  if (fmt & kPoolBF16)
    reinterpret_cast<uint16_t*>(base)[i] = (uint16_t)(pack_bf16x2(x, 0.f) & 0xffffu);
  else
    base[i] = x;
}
