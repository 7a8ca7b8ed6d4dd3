// merge_in_converter.cu: the fused kernels without the L2 norm, with the
// solve's last step (merge_blocks, the blocks below A2's diagonal) moved
// from the aux group to the converter. With its copies free (the noloads
// labs, docs/perf/v48.md) production's chunk is bound by the aux group's
// chain (K K^T, L, the diagonal blocks, the merge: about 1,000
// instructions a warp), while the converter waits for it at qk_read a
// quarter of its time. Here the aux group hands each chunk on once its
// diagonal blocks are written, and starts the next chunk's K K^T while the
// converter merges: the same products in the same order, so production's
// outputs bit for bit. Two forms:
//   merge_in_converter          production's consumers;
//   noloads_merge_in_converter  noloads' (refills copy nothing: the chunk's
//                               bound without waiting for q, k and v).
// And its bound: noloads_nomerge, noloads' kernel with no merge at all
// (outputs wrong): the chunk if the merge cost the converter nothing.
// (Moving only the merge's second part, merge_halves, the aux group
// keeping merge_pairs, spilled 12 + 20 bytes in the aux group under NVRTC
// 12.4: the stage's address held across the diagonal blocks' inverses.)
// The program is fused_consumers.cu, noloads.cu, then this file. The
// hand-off's protocol is kernsrc's pipeline model's mergeInConverter
// (TestStageRingMergeInConverter).
#include "hopper_kernel.cuh"

// The hand-off "the diagonal blocks are written" is the ring's kNormed
// signal, which the kernels without the norm leave unused (and the entry
// leaves uninitialised): the converter's first thread initialises it, and
// both groups meet once on this named barrier before either uses it.
constexpr int kBarHandOff = 9;

// Arrives n times on bar at once.
GDN_DEVICE void mbar_arrive_n(uint64_t* bar, int n) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(n) : "memory");
}

// The aux group's end of a chunk: the hand-off (kNormed), once every
// thread has written its part of the diagonal blocks. (No barrier of the
// group: each thread's arrival releases its own writes, and the
// converter's wait sees all 128.) Ready is the converter's, after the
// merge: it arrives for both groups (ready counts 256), so the aux
// group's chunk ends with one arrival.
struct AuxHandsOff {
  template <class Cfg>
  static GDN_DEVICE void end(unsigned char*, typename Cfg::Ring& ring, const Slot& sl, const NamedBarrier&, int, int) {
    fence_async_smem();
    ring.arrive(kNormed, sl);
  }
};

// The converter's end of a chunk, once K and Q are converted: the merge,
// once the aux group's hand-off says the diagonal blocks are written,
// then ready for both producers.
struct ConverterMerges {
  template <class Cfg>
  static GDN_DEVICE void end(unsigned char* stage, typename Cfg::Ring& ring, const Slot& sl, int tid) {
    int t = tid;
    asm volatile("" : "+r"(t));
    ring.wait(kNormed, sl);
    merge_blocks(stage + Cfg::kOffA2, t >> 5, t & 31, Cfg::kBarConv);
    fence_async_smem();
    mbar_arrive_n(ring.bar(kReady, sl.s), 2);
  }
};

template <class Cfg>
struct MergeInConverter : HopperRoles<Cfg> {
  static_assert(Cfg::kFused && !Cfg::kNorm && Cfg::kConv, "the fused kernels without the norm");
  using Ring = typename Cfg::Ring;

  static GDN_DEVICE void aux_fused(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w) {
    named_sync(kBarHandOff, 256);
    run_aux_fused<Cfg, AuxHandsOff>(smem, ring, p, w);
  }

  // The converter's first thread initialises the hand-off's barriers.
  static GDN_DEVICE void converter(unsigned char* smem, Ring& ring, const Work& w) {
    if ((threadIdx.x & 127) == 0) {
      for (int s = 0; s < Cfg::kStages; ++s) mbar_init(ring.bar(kNormed, s), 128);
      mbar_fence_init();
    }
    named_sync(kBarHandOff, 256);
    run_fused_converter<Cfg, ConverterMerges>(smem, ring, w);
  }
};

// The aux group's end of a chunk with no merge (noloads_nomerge).
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

template <class Cfg>
struct NoLoadsMergeInConverter : ConsumersWith<Cfg, MergeInConverter<Cfg>, NoLoads<NoTurns>> {};

