// hopper_aux_fused.cuh: the aux warpgroup of the fused full forward
// (kFused). Per chunk it builds A2 from the stage's K: beta of the chunk's
// tokens into the stage (loaded two chunks ahead), K K^T (from the
// converter's normalised fp16 K under kNorm, once normed says so; from K
// as loaded otherwise, then qk_read: the converter's go to rewrite it),
// then gdn_solve.cuh's steps over the stage's A2 tile: L, the diagonal
// blocks' inverses, the blocks below them (gdn_prep_chunk does the same
// per chunk and value head where the preparation is a kernel of its own).
// The converter builds P beside this chain; the consumers' gate warp
// writes the gate vectors (hopper_fused_gates.cuh).
#pragma once
#include "hopper_chunk.cuh"

// How the aux group ends a chunk once its diagonal blocks are written:
// production's merges the blocks below them (gdn_solve.cuh's last step)
// and marks the stage ready. (The lab's noloads_nomerge ends without
// the merge, to time what it costs: kernsrc/lab/noloads.cu.)
struct AuxMerges {
  template <class Cfg>
  static GDN_DEVICE void end(unsigned char* a2, typename Cfg::Ring& ring, const Slot& sl, const NamedBarrier& group,
                             int warp, int lane) {
    group.sync();  // every diagonal block written
    merge_blocks(a2, warp, lane, group.id);
    fence_async_smem();
    ring.arrive(kReady, sl);
  }
};

template <class Cfg, class End = AuxMerges>
GDN_DEVICE void run_aux_fused(unsigned char* smem, typename Cfg::Ring& ring, const GdnHopperParams& p, const Work& w) {
  constexpr int kStages = Cfg::kStages;
  const int tid = threadIdx.x & 127;
  const NamedBarrier group{Cfg::kBarAux, 128};
  unsigned char* const inv = smem + Cfg::kOffInv;
  const int t = tid;

  if (t == 0) {
    tma_prefetch_desc(&p.tm_q);
    tma_prefetch_desc(&p.tm_k);
    tma_prefetch_desc(&p.tm_v);
    tma_prefetch_desc(&p.tm_o);
    for (int c = 0; c < min(kStages, w.nch); ++c)
      issue_loads<Cfg>(smem + c * Cfg::kStageBytes, ring.bar(kFull, c), p, w, c);
  }

  // beta of token t < 64 (0 past the chunk), two chunks ahead as run_aux's
  // gates (the gates are the gate warp's).
  auto load_beta = [&](int c) {
    int t = tid;
    asm volatile("" : "+r"(t));
    return c < w.nch && t < chunk_len(w, c) ? read_beta<Cfg>(p, (w.bos + 64 * c + t) * p.sc.Hv + w.h) : 0.f;
  };
  float b_next = load_beta(0), b_next2 = load_beta(1);

  for (int c = 0; c < w.nch; ++c) {
    // The thread's indices anew in each chunk, hidden from the optimiser:
    // hoisted, the addresses derived from them stay live across the loop
    // and spill (gdn_prep_chunk does the same).
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

    // 1. beta (the gates' sums are the gate warp's, in the stage with K).
    ring.wait(kFull, sl);
    if (Cfg::kNorm) ring.wait(kNormed, sl);

    // 2. K K^T, both operands the stage's K rows (k-steps of 16 along d):
    // the normaliser's fp16 K under kNorm, else K as loaded (bf16), which
    // the converter rewrites in fp16 once this group has read it (qk_read).
    float KK[32];
    const KMajor k_rows = StageTiles<Cfg>::k_rows(sd);
    wgmma_fence();
    gemm_ss<64, !Cfg::kNorm, 0, 0, 8>(KK, k_rows, k_rows);
    wgmma_commit();
    if (t < 64) vec.beta[t] = bv;
    group.sync();
    wgmma_wait<0>();
    if (!Cfg::kNorm) ring.arrive(kQKRead, sl);
    reg_fence(KK, 32);
    gate_lower<false>(KK, vec.g, len, warp, lane);
    store_l_and_diag(a2, ld, KK, vec.beta, warp, lane, gq, tq);
    invert_diag_block(a2, ld, vec.beta, warp, lane);
    End::template end<Cfg>(a2, ring, sl, group, warp, lane);
  }
}
