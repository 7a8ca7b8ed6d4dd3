// nodecay.cu: fused_consumers' chain without the state's decay. The
// producers only pass each chunk along, as in fused_consumers, and also set
// each chunk's gamma to 1 once its gate vectors are written (PassAlong's
// kUnitGamma); the consumers then leave out the 64 multiplies a thread of
// S^T's decay (NoTurns::kSkipUnitDecay). Its outputs are wrong (no decay); its time
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
struct NoDecayConsumersOnly : PassAlong<Cfg, true> {
  using Ring = typename Cfg::Ring;
  static GDN_DEVICE void consumer(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w, int cw) {
    run_consumer<Cfg>(smem, ring, p, w, cw, SkipUnitDecay{});
  }
};
