// fused_consumers.cu: the fused full forward's chunk with producers that
// only pass each chunk along: the aux group and the converter keep the
// ring's protocol (every wait and arrival) but do none of their work, so
// the consumers' chain (and the gate warp's vectors) alone bound a chunk.
// Its outputs are wrong; its time is the fused kernel's floor while the
// consumers' chain stays as it is.
#include "hopper_kernel.cuh"

// The producers of both experiments built on this one. kUnitGamma (the
// lab's nodecay): the aux group also writes each chunk's gamma as 1, between
// its wait on full (the gate warp arrives there once it has written the
// chunk's vectors) and its arrival on ready (which orders the store before
// the consumers' reads).
template <class Cfg, bool kUnitGamma>
struct PassAlong : HopperRoles<Cfg> {
  using Ring = typename Cfg::Ring;

  // The aux group: the first loads, then per chunk its waits and arrivals.
  static GDN_DEVICE void aux_fused(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w) {
    const bool first = (threadIdx.x & 127) == 0;
    if (first)
      for (int c = 0; c < min(Cfg::kStages, w.nch); ++c)
        issue_loads<Cfg>(smem + c * Cfg::kStageBytes, ring.bar(kFull, c), p, w, c);
    for (int c = 0; c < w.nch; ++c) {
      const Slot sl = ring.slot(c);
      ring.wait(kFull, sl);
      if (Cfg::kNorm) ring.wait(kNormed, sl);
      if (kUnitGamma && first) reinterpret_cast<Vec*>(smem + sl.s * Cfg::kStageBytes + Cfg::kOffVec)->gamma = 1.f;
      if (!Cfg::kNorm) ring.arrive(kQKRead, sl);
      ring.arrive(kReady, sl);
    }
  }

  // The converter: the normaliser's or the fused converter's waits and
  // arrivals.
  static GDN_DEVICE void converter(unsigned char* smem, Ring& ring, const GdnHopperParams&, const Work& w) {
    for (int c = 0; c < w.nch; ++c) {
      const Slot sl = ring.slot(c);
      ring.wait(kFull, sl);
      if (Cfg::kNorm) {
        ring.arrive(kNormed, sl);
      } else {
        ring.wait(kQKRead, sl);
      }
      ring.arrive(kReady, sl);
    }
  }
};

// fused_consumers' roles: production's consumers beside producers that
// only pass each chunk along.
template <class Cfg>
struct ConsumersOnly : PassAlong<Cfg, false> {};
