// noloads.cu: the Hopper kernels whose refills copy nothing. A stage's
// copies are issued once, for the first kStages chunks (the aux group's,
// as in production); every later chunk runs on the tiles its stage already
// holds, and the refill thread only completes the stage's full. What is
// left in memory is o's stores, the gates, beta and the states. Outputs
// are wrong by design (the chunks' q, k and v are stale, and the
// converter rewrites K and Q in place again and again: NaN and Inf cost
// the products and the element-wise work what numbers do); the time beside
// the same roles with their copies is what waiting for the copies costs
// the chain. On a card whose bandwidth holds the chain back (the H100's
// consumers alone wait on ready a fifth of their time, docs/perf/v47.md),
// that is the measure of the chain the card cannot show. Four forms:
//   noloads            production's roles;
//   noloads_consumers  fused_consumers' (the producers pass each chunk along);
//   noloads_nodecay    nodecay's (and the consumers skip the decay);
//   noloads_nomerge    production's, the aux group leaving out the merge
//                      of A2's blocks below the diagonal (the fused
//                      kernels without the norm): what the merge costs the
//                      chunk. Nothing, on the H100 (docs/perf/v49.md).
// The program is fused_consumers.cu, then this file (kernsrc/lab's
// Experiment.Uses).
#include "hopper_kernel.cuh"

// A consumer policy (Base's) whose refills complete full with no copy:
// the refill thread's arrival is the one issue_loads' expect_tx makes.
template <class Base>
struct NoLoads : Base {
  template <class Cfg>
  GDN_DEVICE void load(unsigned char*, uint64_t* full, const GdnHopperParams&, const Work&, int) const {
    mbar_arrive(full);
  }
};

// Production's policy leaving out the decay where gamma is 1 (nodecay's).
struct SkipUnitDecayTurns : NoTurns {
  static constexpr bool kSkipUnitDecay = true;
};

// Producers' roles with consumers on Policy.
template <class Cfg, class Producers, class Policy>
struct ConsumersWith : Producers {
  using Ring = typename Cfg::Ring;
  static GDN_DEVICE void consumer(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w, int cw) {
    run_consumer<Cfg>(smem, ring, p, w, cw, Policy{});
  }
};

template <class Cfg>
struct NoLoadsRoles : ConsumersWith<Cfg, HopperRoles<Cfg>, NoLoads<NoTurns>> {};
template <class Cfg>
struct NoLoadsConsumersOnly : ConsumersWith<Cfg, PassAlong<Cfg, false>, NoLoads<NoTurns>> {};
template <class Cfg>
struct NoLoadsNoDecay : ConsumersWith<Cfg, PassAlong<Cfg, true>, NoLoads<SkipUnitDecayTurns>> {};

// The aux group's end of a chunk with no merge (noloads_nomerge): ready
// once its diagonal blocks are written.
struct AuxSkipsMerge {
  template <class Cfg>
  static GDN_DEVICE void end(unsigned char*, typename Cfg::Ring& ring, const Slot& sl, const NamedBarrier&, int, int) {
    fence_async_smem();
    ring.arrive(kReady, sl);
  }
};

template <class Cfg>
struct NoMerge : HopperRoles<Cfg> {
  static GDN_DEVICE void aux_fused(unsigned char* smem, typename Cfg::Ring& ring, const GdnHopperParams& p,
                                   const Work& w) {
    run_aux_fused<Cfg, AuxSkipsMerge>(smem, ring, p, w);
  }
};

template <class Cfg>
struct NoLoadsNoMerge : ConsumersWith<Cfg, NoMerge<Cfg>, NoLoads<NoTurns>> {};
