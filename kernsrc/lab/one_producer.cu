// one_producer.cu: noloads with one producer at work and the other only
// passing each chunk along (fused_consumers' producer), to split what the
// producers cost the chain. Without copies the consumers alone take 0.30
// ms on q35_4kx8 and beside production's producers 0.40 (docs/perf/v49.md);
// neither the aux group's merge nor the two producers' tensor products
// are any of it. Two forms:
//   noloads_aux_only        the aux group's chunk (K K^T, L, the diagonal
//                           blocks, the merge), the converter passing;
//   noloads_converter_only  the converter's chunk (P, K and Q to fp16),
//                           the aux group passing;
// and aux_only and converter_only, the same with production's copies:
// what each producer costs the full forward as it runs.
// One near noloads' time says that producer's chunk is the bound, by its
// latency against the ring; both well under it, with their sum of costs
// near it, says the producers cost the chain by sharing the SM (issue
// slots, shared memory) rather than by being late. Outputs wrong.
// The program is fused_consumers.cu, noloads.cu, then this file.
#include "hopper_kernel.cuh"

template <class Cfg>
struct AuxOnly : HopperRoles<Cfg> {
  static_assert(Cfg::kFused && !Cfg::kNorm, "the fused kernels without the norm");
  static GDN_DEVICE void converter(unsigned char* smem, typename Cfg::Ring& ring, const GdnHopperParams& p,
                                   const Work& w) {
    PassAlong<Cfg, false>::converter(smem, ring, p, w);
  }
};

template <class Cfg>
struct ConverterOnly : HopperRoles<Cfg> {
  static_assert(Cfg::kFused && !Cfg::kNorm, "the fused kernels without the norm");
  static GDN_DEVICE void aux_fused(unsigned char* smem, typename Cfg::Ring& ring, const GdnHopperParams& p,
                                   const Work& w) {
    PassAlong<Cfg, false>::aux_fused(smem, ring, p, w);
  }
};

template <class Cfg>
struct NoLoadsAuxOnly : ConsumersWith<Cfg, AuxOnly<Cfg>, NoLoads<NoTurns>> {};
template <class Cfg>
struct NoLoadsConverterOnly : ConsumersWith<Cfg, ConverterOnly<Cfg>, NoLoads<NoTurns>> {};
