// early_ready.cu: the fused kernels without the norm, whose producers
// mark a chunk ready when they start it rather than when they finish it,
// and then do all of production's work on it. The consumers then wait at
// ready only until both producers have begun the chunk (the converter
// after the aux group's K K^T has read K, as production's converter
// waits), not for the chunk's L, inverses, merge, P and conversion. So
// the producers' latency from full to ready leaves the chain, while their
// instructions, shared-memory traffic and products still share the SM
// with it, and they still set the pace if a chunk of theirs takes longer
// than one of the consumers'.
//
// Read beside noloads (production's producers) and noloads_consumers
// (producers that only pass the chunks along), all without copies: near
// noloads_consumers' time, the producers cost the chain by being late
// and the lever is their latency (start them earlier, shorten their
// chain); near noloads', by sharing the SM or by their own pace, and the
// lever is fewer or cheaper producer instructions. Outputs wrong (the
// consumers read A2, P, K and Q while they are written).
//
// The aux group is production's, with a chunk end that merges and marks
// nothing; the converter arrives on ready for both producers (twice a
// thread: the barrier counts both groups' 256). Neither producer can run
// two phases behind a barrier it waits on: a stage is refilled only after
// ready, which the converter gives only once the aux group has read the
// stage's K (qk_read) and the converter has seen it full, so each of
// their waits on full, and the converter's on qk_read, is for the phase
// in flight.
// The program is fused_consumers.cu, noloads.cu, then this file.
#include "hopper_kernel.cuh"

// The aux group's chunk end under early_ready: production's merge, and no
// arrival (the converter's arrivals count for it).
struct AuxMergesUnmarked {
  template <class Cfg>
  static GDN_DEVICE void end(unsigned char* a2, typename Cfg::Ring&, const Slot&, const NamedBarrier& group, int warp,
                             int lane) {
    group.sync();
    merge_blocks(a2, warp, lane, group.id);
    fence_async_smem();
  }
};

template <class Cfg>
struct EarlyReady : HopperRoles<Cfg> {
  static_assert(Cfg::kFused && !Cfg::kNorm, "the fused kernels without the norm");
  using Ring = typename Cfg::Ring;

  static GDN_DEVICE void aux_fused(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w) {
    run_aux_fused<Cfg, AuxMergesUnmarked>(smem, ring, p, w);
  }

  // run_fused_converter's chunk with its arrival on ready moved to the
  // top, after the waits its work needs to begin.
  static GDN_DEVICE void converter(unsigned char* smem, Ring& ring, const GdnHopperParams&, const Work& w) {
    const int tid = threadIdx.x & 127;
    for (int c = 0; c < w.nch; ++c) {
      const Slot sl = ring.slot(c);
      unsigned char* stage = smem + sl.s * Cfg::kStageBytes;
      ring.wait(kFull, sl);
      ring.wait(kQKRead, sl);
      ring.arrive(kReady, sl);
      ring.arrive(kReady, sl);
      build_fused_p<Cfg>(stage, *reinterpret_cast<Vec*>(stage + Cfg::kOffVec), chunk_len(w, c), tid);
      named_sync(Cfg::kBarConv, 128);
      convert_qk<2>(reinterpret_cast<uint4*>(stage + Cfg::kOffBQ), tid);
      fence_async_smem();
    }
  }
};

template <class Cfg>
struct NoLoadsEarlyReady : ConsumersWith<Cfg, EarlyReady<Cfg>, NoLoads<NoTurns>> {};
