// products_only.cu: noloads_consumers with producers that do their tensor
// products and nothing else: the aux group its K K^T and the converter its
// Q K^T (m64n64k128 each, from the stage's bf16 tiles), each waited for,
// then the ring's waits and arrivals as fused_consumers' producers have
// them; the refills copy nothing (noloads'). Without copies, production's
// chunk takes 1.33x the consumers' alone (noloads against
// noloads_consumers), and the aux group's merge is none of it
// (noloads_nomerge). If the rest were the producers' share of the tensor
// pipe, which the consumers' dependent products wait behind, this lab
// would take about noloads' time; on the H100 it takes
// noloads_consumers' (docs/perf/v49.md): the products cost the chain
// nothing. Outputs wrong (the producers write nothing).
// The program is fused_consumers.cu, noloads.cu, then this file.
#include "hopper_kernel.cuh"

// The product of the stage's rows A (K or Q) with its K rows, by one
// warpgroup, waited for; the accumulator kept live to the end.
template <class Cfg>
GDN_DEVICE void stage_product(unsigned char* stage, bool q) {
  const DescBase sd(stage);
  using T = StageTiles<Cfg>;
  float X[32];
  wgmma_fence();
  if (q)
    gemm_ss<64, true, 0, 0, 8>(X, T::q_rows(sd), T::k_rows(sd));
  else
    gemm_ss<64, true, 0, 0, 8>(X, T::k_rows(sd), T::k_rows(sd));
  wgmma_commit();
  wgmma_wait<0>();
  reg_fence(X, 32);
}

template <class Cfg>
struct ProductsOnly : PassAlong<Cfg, false> {
  static_assert(Cfg::kFused && !Cfg::kNorm, "the fused kernels without the norm (bf16 K and Q as loaded)");
  using Ring = typename Cfg::Ring;

  static GDN_DEVICE void aux_fused(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w) {
    if ((threadIdx.x & 127) == 0)
      for (int c = 0; c < min(Cfg::kStages, w.nch); ++c)
        issue_loads<Cfg>(smem + c * Cfg::kStageBytes, ring.bar(kFull, c), p, w, c);
    for (int c = 0; c < w.nch; ++c) {
      const Slot sl = ring.slot(c);
      ring.wait(kFull, sl);
      stage_product<Cfg>(smem + sl.s * Cfg::kStageBytes, false);
      ring.arrive(kQKRead, sl);
      ring.arrive(kReady, sl);
    }
  }

  static GDN_DEVICE void converter(unsigned char* smem, Ring& ring, const GdnHopperParams&, const Work& w) {
    for (int c = 0; c < w.nch; ++c) {
      const Slot sl = ring.slot(c);
      ring.wait(kFull, sl);
      stage_product<Cfg>(smem + sl.s * Cfg::kStageBytes, true);
      ring.wait(kQKRead, sl);
      ring.arrive(kReady, sl);
    }
  }
};

template <class Cfg>
struct NoLoadsProductsConsumers : ConsumersWith<Cfg, ProductsOnly<Cfg>, NoLoads<NoTurns>> {};
