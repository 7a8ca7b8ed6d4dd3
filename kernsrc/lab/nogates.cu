// nogates.cu: the fused kernels without the gate warp's work. The first
// warp of consumer group 0 writes each stage's gate vectors once, at its
// first use, as those of a chunk with no decay (g = 0: e^g = f = gamma =
// 1), and from then on only arrives on full as production's does, after
// the same wait on the stage's release: no raw gates fetched, no scan, no
// exponentials, no stores. The producers and the other consumer warps are
// production's. Its outputs are wrong (no decay); its time beside
// production's is what the gate work costs the full forward with its
// producers in place: the most any cheaper gate computation, or one moved
// off the consumers, could give (docs/perf/many-heads-model.md: the gate
// row, the corrected model's weakest).
#include "hopper_kernel.cuh"

// Production's policy (no turns), with constant gate vectors and no raw
// gates.
struct NoGateWork : NoTurns {
  static constexpr bool kRawGates = false;
  GDN_DEVICE void write_gates(Vec& v, float, float, int lane, int, const GateParams&, int x, int) {
    if (x >= 3) return;  // the stage's vectors, from its first use (Cfg::kStages)
    v.g[lane] = 0.f;
    v.g[lane + 32] = 0.f;
    write_gate_entries(v, 0.f, 0.f, lane, 64);
    write_gate_entries(v, 0.f, 0.f, lane + 32, 64);
    if (lane == 0) v.gamma = 1.f;
  }
};

template <class Cfg>
struct NoGatesRoles : HopperRoles<Cfg> {
  static_assert(Cfg::kStages == 3, "NoGateWork writes each of three stages once");
  using Ring = typename Cfg::Ring;
  static GDN_DEVICE void consumer(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w, int cw) {
    run_consumer<Cfg>(smem, ring, p, w, cw, NoGateWork{});
  }
};
