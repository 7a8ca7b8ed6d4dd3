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

template <class Cfg>
struct MergeInConverter : HopperRoles<Cfg> {
  static_assert(Cfg::kFused && !Cfg::kNorm && Cfg::kConv, "the fused kernels without the norm");
  using Ring = typename Cfg::Ring;

  // The aux group: run_aux_fused's chunk up to the diagonal blocks, then
  // the hand-off (kNormed).
  // Ready is the converter's, after the merge: it arrives for both groups
  // (ready counts 256), so the aux group's chunk ends with one arrival.
  static GDN_DEVICE void aux_fused(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w) {
    const int tid = threadIdx.x & 127;
    const NamedBarrier group{Cfg::kBarAux, 128};
    unsigned char* const inv = smem + Cfg::kOffInv;
    named_sync(kBarHandOff, 256);
    if (tid == 0) {
      tma_prefetch_desc(&p.tm_q);
      tma_prefetch_desc(&p.tm_k);
      tma_prefetch_desc(&p.tm_v);
      tma_prefetch_desc(&p.tm_o);
      for (int c = 0; c < min(Cfg::kStages, w.nch); ++c)
        issue_loads<Cfg>(smem + c * Cfg::kStageBytes, ring.bar(kFull, c), p, w, c);
    }
    auto load_beta = [&](int c) {
      int t = tid;
      asm volatile("" : "+r"(t));
      return c < w.nch && t < chunk_len(w, c) ? read_beta<Cfg>(p, (w.bos + 64 * c + t) * p.sc.Hv + w.h) : 0.f;
    };
    float b_next = load_beta(0), b_next2 = load_beta(1);
    for (int c = 0; c < w.nch; ++c) {
      int t = tid;
      asm volatile("" : "+r"(t));
      const int warp = t >> 5, lane = t & 31, gq = lane >> 2, tq = lane & 3;
      float* const ld = warp_ld(reinterpret_cast<float*>(inv + Cfg::kInvLd), warp);
      const Slot sl = ring.slot(c);
      unsigned char* st = smem + sl.s * Cfg::kStageBytes;
      unsigned char* a2 = st + Cfg::kOffA2;
      const DescBase sd(st);
      Vec& vec = *reinterpret_cast<Vec*>(st + Cfg::kOffVec);
      const int len = chunk_len(w, c);
      const float bv = b_next;
      b_next = b_next2;
      b_next2 = load_beta(c + 2);

      ring.wait(kFull, sl);
      float KK[32];
      const KMajor k_rows = StageTiles<Cfg>::k_rows(sd);
      wgmma_fence();
      gemm_ss<64, true, 0, 0, 8>(KK, k_rows, k_rows);
      wgmma_commit();
      if (t < 64) vec.beta[t] = bv;
      group.sync();
      wgmma_wait<0>();
      ring.arrive(kQKRead, sl);
      reg_fence(KK, 32);
      gate_lower<false>(KK, vec.g, len, warp, lane);
      store_l_and_diag(a2, ld, KK, vec.beta, warp, lane, gq, tq);
      invert_diag_block(a2, ld, vec.beta, warp, lane);
      // (No barrier of the group: each thread's arrival releases its own
      // writes, and the converter's wait sees all 128.)
      fence_async_smem();
      ring.arrive(kNormed, sl);
    }
  }

  // The converter: run_fused_converter's chunk (P, then K and Q to fp16
  // once the aux group has read them), then the merge once the diagonal
  // blocks are written, and ready for both producers.
  static GDN_DEVICE void converter(unsigned char* smem, Ring& ring, const Work& w) {
    const int tid = threadIdx.x & 127;
    if (tid == 0) {
      for (int s = 0; s < Cfg::kStages; ++s) mbar_init(ring.bar(kNormed, s), 128);
      mbar_fence_init();
    }
    named_sync(kBarHandOff, 256);
    for (int c = 0; c < w.nch; ++c) {
      const Slot sl = ring.slot(c);
      unsigned char* stage = smem + sl.s * Cfg::kStageBytes;
      uint4* st = reinterpret_cast<uint4*>(stage + Cfg::kOffBQ);
      ring.wait(kFull, sl);
      build_fused_p<Cfg>(stage, *reinterpret_cast<Vec*>(stage + Cfg::kOffVec), chunk_len(w, c), tid);
      named_sync(Cfg::kBarConv, 128);
      ring.wait(kQKRead, sl);
      convert_qk<2>(st, tid);
      int t = tid;
      asm volatile("" : "+r"(t));
      ring.wait(kNormed, sl);
      merge_blocks(stage + Cfg::kOffA2, t >> 5, t & 31, Cfg::kBarConv);
      fence_async_smem();
      mbar_arrive_n(ring.bar(kReady, sl.s), 2);
    }
  }
};

template <class Cfg>
struct NoLoadsMergeInConverter : ConsumersWith<Cfg, MergeInConverter<Cfg>, NoLoads<NoTurns>> {};

