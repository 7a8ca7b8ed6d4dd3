// pingpong.cu: the two consumer groups of a BV 128 CTA take turns at the
// tensor pipe. In production both groups start a chunk together and issue
// each round of products at once, so a round's results come back only
// after both groups' products have run; with turns the pipe runs one
// group's round at a time, in a fixed order (group 0's round r, group 1's
// round r, group 0's round r + 1, ...), and each group's element-wise work
// between its rounds runs while the other group's products do
// (docs/perf/many-heads-model.md, design (a)).
//
// The consumer is production's run_consumer with a turn policy: each group
// computes the same products, in the same order, on the same operands;
// only when it issues them changes. Its outputs are production's, bit for
// bit. The producers are production's.
#include "hopper_kernel.cuh"

// The turns. Group cw syncs on named barrier kBarTurn + cw before each of
// its rounds and arrives on the other group's once the round's products are
// committed (256 threads a phase: the 128 that sync and the 128 that
// arrive). Group 1 arrives once before its first round, so group 0 goes
// first; group 0 syncs once after its last round, taking group 1's last
// arrival. Both groups run the same rounds (three a chunk, the same chunks,
// and the transfer pass's early exit leaves both loops after the same
// chunk), so every phase of both barriers completes: no group waits
// forever and neither barrier is left part-way when the CTA ends, whatever
// the chunk count (none: neither extra call). A group never arrives twice
// in one phase: between two arrivals it syncs on its own barrier, which
// needs the other group's arrival, made only after that group's sync has
// completed the phase before. kernsrc's pipeline_consumer_model_test.go
// models the protocol with the ring, the gate warp and o's stores.
template <class Cfg>
struct PingPongTurns : NoTurns {
  static constexpr bool kOn = true;
  // Group 0's barrier, then group 1's: past the kernel's named barriers
  // (hopper_cfg.cuh: 0 the CTA, 1..kNC the consumer groups, kBarConv,
  // kBarConsumers, kBarAux + a), 16 in all.
  static constexpr int kBarTurn = 9, kThreads = 256;
  static_assert(kBarTurn > Cfg::kNC && kBarTurn > Cfg::kBarConv && kBarTurn > Cfg::kBarConsumers &&
                    kBarTurn >= Cfg::kBarAux + Cfg::kAux && kBarTurn + 1 < 16,
                "the turns' named barriers collide with the kernel's");
  bool leads;  // group 0, which goes first
  GDN_DEVICE explicit PingPongTurns(int cw) : leads(cw == 0) {}
  // Every barrier id an immediate, one under each side of the group's
  // branch (predicated BAR instructions): an id held in a register across
  // the chain made ptxas spill in the fused kernels' consumers (76 bytes).
  GDN_DEVICE void start(const Work& w) const {
    if (!leads && w.nch > 0) named_arrive(kBarTurn, kThreads);
  }
  GDN_DEVICE void take() const {
    if (leads)
      named_sync(kBarTurn, kThreads);
    else
      named_sync(kBarTurn + 1, kThreads);
  }
  GDN_DEVICE void pass() const {
    if (leads)
      named_arrive(kBarTurn + 1, kThreads);
    else
      named_arrive(kBarTurn, kThreads);
  }
  GDN_DEVICE void end(const Work& w) const {
    if (leads && w.nch > 0) named_sync(kBarTurn, kThreads);
  }
};

// Base's roles (production's, or a lab's producers) with consumers that take
// turns.
template <class Cfg, class Base>
struct TurnConsumers : Base {
  using Ring = typename Cfg::Ring;
  static GDN_DEVICE void consumer(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w, int cw) {
    run_consumer<Cfg>(smem, ring, p, w, cw, PingPongTurns<Cfg>(cw));
  }
};

template <class Cfg>
struct PingPong : TurnConsumers<Cfg, HopperRoles<Cfg>> {};
