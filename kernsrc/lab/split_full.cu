// split_full.cu: the fused kernels without the norm, whose refills land a
// chunk's K and Q on the stage's full and its value tiles on a barrier of
// their own, so that the producers, which read only K and Q, start a chunk
// once 32 KB of its 48 have landed rather than all of them. The converter
// waits for the value tiles before it marks the stage ready, so the
// consumers find what they always did. The same copies and products:
// production's outputs bit for bit. On the H100 a stage's copies take
// about 2 us to land at a CTA's share of the bandwidth (docs/perf/v49.md),
// a third of it the value tiles: if the producers' latency from full to
// ready is what the consumers wait for at ready, this takes up to that
// third off it.
//
// The value tiles' barrier is the ring's normed signal, which these
// kernels do not use and the entry leaves uninitialised: the aux group's
// first thread initialises it (one arrival, the refill's, and the bytes)
// and completes its phase by hand for the first kStages chunks, whose
// copies it then issues whole on full, as production does. The converter
// first waits on it after its wait on chunk 0's full, which those copies
// complete, and the refills come after the consumers' wait on ready: both
// after the initialisation.
#include "hopper_kernel.cuh"

// The stage's value-tile barrier beside its full: the ring's barriers are
// signal-major (ring.cuh), so normed's for a stage is kNormed - kFull
// signals on.
template <class Cfg>
GDN_DEVICE uint64_t* value_bar(uint64_t* full) {
  static_assert(kNormed > kFull, "signal-major ring");
  return full + (kNormed - kFull) * Cfg::kStages;
}

// A consumer policy whose refill of chunk c issues K and Q on full and
// the value tiles on their own barrier.
struct SplitLoads : NoTurns {
  template <class Cfg>
  GDN_DEVICE void load(unsigned char* st, uint64_t* full, const GdnHopperParams& p, const Work& w, int c) const {
    constexpr int kTile = Cfg::kTile, kNC = Cfg::kNC;
    static_assert(Cfg::kFused && !Cfg::kXfer, "the fused kernels");
    const int t = w.t0 + 64 * c;
    mbar_arrive_expect_tx(full, 4 * kTile);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tma_load_4d(st + Cfg::kOffBQ + 2 * h * kTile, &p.tm_k, full, 64 * h, w.hk, t, w.b);
      tma_load_4d(st + Cfg::kOffBQ + (2 * h + 1) * kTile, &p.tm_q, full, 64 * h, w.hk, t, w.b);
    }
    uint64_t* vb = value_bar<Cfg>(full);
    mbar_arrive_expect_tx(vb, kNC * kTile);
#pragma unroll
    for (int x = 0; x < kNC; ++x) tma_load_4d(st + Cfg::kOffV + x * kTile, &p.tm_v, vb, w.v0 + 64 * x, w.h, t, w.b);
  }
};

// The converter's chunk: run_fused_converter's, copied here with one
// wait added (production's has no hook there, and should not grow one
// for a lab), the wait for the value tiles before its arrival on ready,
// so that the consumers, which wait for ready, find them. (Waiting in the
// aux group's end instead spilled its registers, 4 + 4 to 4 + 12 bytes
// under NVRTC 12.4.) Kernsrc's pipeline model does not carry this
// protocol; the lab step's comparison of the outputs with production's is
// its check.
template <class Cfg>
GDN_DEVICE void run_converter_awaits_v(unsigned char* smem, typename Cfg::Ring& ring, const Work& w) {
  const int tid = threadIdx.x & 127;
  for (int c = 0; c < w.nch; ++c) {
    const Slot sl = ring.slot(c);
    unsigned char* stage = smem + sl.s * Cfg::kStageBytes;
    ring.wait(kFull, sl);
    build_fused_p<Cfg>(stage, *reinterpret_cast<Vec*>(stage + Cfg::kOffVec), chunk_len(w, c), tid);
    named_sync(Cfg::kBarConv, 128);
    ring.wait(kQKRead, sl);
    convert_qk<2>(reinterpret_cast<uint4*>(stage + Cfg::kOffBQ), tid);
    ring.wait(kNormed, sl);
    fence_async_smem();
    ring.arrive(kReady, sl);
  }
}

template <class Cfg>
struct SplitFull : HopperRoles<Cfg> {
  static_assert(Cfg::kFused && !Cfg::kNorm, "the fused kernels without the norm");
  using Ring = typename Cfg::Ring;

  static GDN_DEVICE void aux_fused(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w) {
    if ((threadIdx.x & 127) == 0) {
      for (int s = 0; s < Cfg::kStages; ++s) mbar_init(ring.bar(kNormed, s), 1);
      mbar_fence_init();
      for (int s = 0; s < min(Cfg::kStages, w.nch); ++s) mbar_arrive(ring.bar(kNormed, s));
    }
    run_aux_fused<Cfg>(smem, ring, p, w);
  }

  static GDN_DEVICE void converter(unsigned char* smem, Ring& ring, const GdnHopperParams&, const Work& w) {
    run_converter_awaits_v<Cfg>(smem, ring, w);
  }

  static GDN_DEVICE void consumer(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w, int cw) {
    run_consumer<Cfg>(smem, ring, p, w, cw, SplitLoads{});
  }
};
