// nodecay.cu: fused_consumers' chain without the state's decay. The
// producers only pass each chunk along, as in fused_consumers, and also set
// each chunk's gamma to 1 once its gate vectors are written; the consumers
// then leave out the 64 multiplies a thread of S^T's decay
// (NoTurns::kSkipUnitDecay). Its outputs are wrong (no decay); its time
// beside fused_consumers' is what those multiplies cost the consumers'
// chain, the share a writer folding the decay into the factors would
// spare (docs/perf/many-heads-model.md, the lean consumer chunk). The
// program is fused_consumers.cu, then this file (kernsrc/lab's
// Experiment.Uses).
#include "hopper_kernel.cuh"

// Production's policy (no turns), leaving out the decay where gamma is 1.
struct SkipUnitDecay : NoTurns {
  static constexpr bool kSkipUnitDecay = true;
};

template <class Cfg>
struct NoDecayConsumersOnly : ConsumersOnly<Cfg> {
  using Ring = typename Cfg::Ring;

  // ConsumersOnly's aux group, with gamma set to 1 between the wait on
  // full (the gate warp arrives there once it has written the chunk's
  // vectors) and the arrival on ready (which orders the store before the
  // consumers' reads).
  static GDN_DEVICE void aux_fused(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w) {
    const bool first = (threadIdx.x & 127) == 0;
    if (first)
      for (int c = 0; c < min(Cfg::kStages, w.nch); ++c)
        issue_loads<Cfg>(smem + c * Cfg::kStageBytes, ring.bar(kFull, c), p, w, c);
    for (int c = 0; c < w.nch; ++c) {
      const Slot sl = ring.slot(c);
      ring.wait(kFull, sl);
      if (Cfg::kNorm) ring.wait(kNormed, sl);
      if (first) reinterpret_cast<Vec*>(smem + sl.s * Cfg::kStageBytes + Cfg::kOffVec)->gamma = 1.f;
      if (!Cfg::kNorm) ring.arrive(kQKRead, sl);
      ring.arrive(kReady, sl);
    }
  }

  static GDN_DEVICE void consumer(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w, int cw) {
    run_consumer<Cfg>(smem, ring, p, w, cw, SkipUnitDecay{});
  }
};
