// l2_ahead.cu: the Hopper kernels whose refills also ask L2 for the tiles
// of a chunk further ahead (cp.async.bulk.prefetch.tensor: the same boxes
// as the refill's copies, into L2 only, no shared memory and no barrier).
// The ring holds three stages, so a stage's copies have about one chunk
// to land; on the H100 the copies alone run at 3.0 TB/s, 90% of the card's
// peak, while the consumers with their copies get 2.17 (docs/perf/v49.md):
// the copies are held by how few bytes are in flight when the chain asks,
// not by their pattern. A prefetch D chunks ahead puts D more chunks'
// bytes in flight without a stage to hold them, and the refill then reads
// L2. The same copies and products: production's outputs bit for bit.
//   l2_ahead            production's roles, D = 2;
//   l2_ahead1           production's roles, D = 1;
//   l2_ahead_consumers  fused_consumers' (the producers pass each chunk
//                       along), D = 2: the chain with its copies fed ahead.
// The program is fused_consumers.cu, noloads.cu, then this file.
#include "hopper_kernel.cuh"

// Asks L2 for the 4-D box at (c0..c3) of map's tensor (no completion: a
// hint the copy engine may drop).
GDN_DEVICE void tma_prefetch_l2_4d(const TmaDesc* map, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

// The boxes issue_loads copies for chunk c, asked of L2.
template <class Cfg>
GDN_DEVICE void prefetch_chunk(const GdnHopperParams& p, const Work& w, int c) {
  const int t = w.t0 + 64 * c;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    tma_prefetch_l2_4d(&p.tm_k, 64 * h, w.hk, t, w.b);
    if (!Cfg::kXfer) tma_prefetch_l2_4d(&p.tm_q, 64 * h, w.hk, t, w.b);
  }
  if (w.zero_v) return;
#pragma unroll
  for (int x = 0; x < Cfg::kNC; ++x) tma_prefetch_l2_4d(&p.tm_v, w.v0 + 64 * x, w.h, t, w.b);
}

// A consumer policy (Base's) whose refill of chunk c also prefetches chunk
// c + D. (Chunks kStages + 1 to kStages + D - 1 are not asked for: a loop
// over them at the first refill spilled the consumers' registers.)
template <int D, class Base>
struct L2Ahead : Base {
  template <class Cfg>
  GDN_DEVICE void load(unsigned char* st, uint64_t* full, const GdnHopperParams& p, const Work& w, int c) const {
    if (c + D < w.nch) prefetch_chunk<Cfg>(p, w, c + D);
    Base::template load<Cfg>(st, full, p, w, c);
  }
};

template <class Cfg>
struct L2AheadRoles : ConsumersWith<Cfg, HopperRoles<Cfg>, L2Ahead<2, NoTurns>> {};
template <class Cfg>
struct L2Ahead1Roles : ConsumersWith<Cfg, HopperRoles<Cfg>, L2Ahead<1, NoTurns>> {};
template <class Cfg>
struct L2AheadConsumersOnly : ConsumersWith<Cfg, PassAlong<Cfg, false>, L2Ahead<2, NoTurns>> {};
