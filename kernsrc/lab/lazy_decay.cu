// lazy_decay.cu: the fused kernels with the state's decay folded into the
// gate factors (docs/perf/many-heads-model.md, the lean consumer chunk).
// The consumers hold S / G, where G is the product of the chunks' gammas
// since the last fold, a number the gates alone give. With G' = G gamma
// after chunk x:
//   - U and O' come from S / G, so their factors e^g take G (G e^g);
//   - S / G' = S / G + Vn^T diag(f / G') K: no decay, f takes 1 / G';
//   - where G' would fall under 1/16, or on the walk's last chunk (ht
//     is stored from S), the chunk folds: S = G' (S / G) + Vn^T diag(f) K,
//     f unscaled, gamma written as G', and G starts again from 1.
// Elsewhere gamma is written as 1, and the consumers leave the decay's 64
// multiplies a thread out (NoTurns::kSkipUnitDecay). Only the gate warp's
// vectors change: the producers read the log-gates g, never e^g, f or
// gamma. The floor bounds S / G, its fp16 copy and f / G' at 16 times
// today's values; fp16's relative precision does not depend on the scale.
// Outputs differ from production's by rounding only (a dev build's soak
// with GDN_LAB=lazy_decay checks them against the float64 reference). On
// the suite's gates a chunk's gamma is about 0.04, under the floor alone,
// so nearly every chunk folds there; the piece pays on heads that decay
// slowly (scripts/manyheads_corrected.py --table folds).
#include "hopper_kernel.cuh"

struct LazyDecay : NoTurns {
  static constexpr bool kSkipUnitDecay = true;
  static constexpr float kLogFloor = -2.7725887f;  // ln(1/16): the floor of G'
  float L = 0.f;  // the gate warp's: ln G, the consumers holding S / G

  // Production's vectors with G folded into their exponents, so the writer
  // adds no multiply: e^{g + L} = G e^g, and f's e^{g_last - g} becomes
  // e^{-g - L} = f / G' (or stays, where the chunk folds).
  GDN_DEVICE void write_gates(Vec& v, float a, float b, int lane, int len, const GateParams& gp, int x, int nch) {
    const ChunkGates g = scan_chunk_gates(a, b, lane, len, gp);
    v.g[lane] = g.a;
    v.g[lane + 32] = g.b;
    const float l2 = L + g.last;                      // ln G'
    const bool fold = l2 < kLogFloor || x == nch - 1;  // the same in every lane
    const float top = fold ? g.last + L : 0.f;        // f = e^{top - (g + L)}
    write_gate_entries(v, g.a + L, top, lane, len);
    write_gate_entries(v, g.b + L, top, lane + 32, len);
    if (lane == 0) v.gamma = fold ? __expf(l2) : 1.f;
    L = fold ? 0.f : l2;
  }
};

template <class Cfg>
struct LazyDecayRoles : HopperRoles<Cfg> {
  using Ring = typename Cfg::Ring;
  static GDN_DEVICE void consumer(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w, int cw) {
    run_consumer<Cfg>(smem, ring, p, w, cw, LazyDecay{});
  }
};
