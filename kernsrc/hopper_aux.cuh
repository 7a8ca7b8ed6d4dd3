// hopper_aux.cuh: the aux warpgroups of the core forward (not the fused
// preparation's: hopper_aux_fused.cuh). An aux group takes every kAux-th
// chunk and prepares, as soon as its tiles land, everything that does not
// need the state: P = Q K^T (from the tiles as loaded), the gate vectors,
// A2 = A diag(beta) masked (over A, in place), the gated P, and the fp16
// operands in place (bf16 inputs are converted: fp16 keeps three more
// mantissa bits for every derived operand); then it marks the stage ready.
#pragma once
#include "hopper_chunk.cuh"

// A[i][j] of a stage, two adjacent columns (j even); A32: A is fp32 (else
// bf16).
template <class Cfg, bool A32>
GDN_DEVICE float2 read_a2(const unsigned char* a, int i, int j) {
  if (A32) return *reinterpret_cast<const float2*>(a + (j >> 5) * Cfg::kTile + swz128(i, (j & 31) * 4));
  const uint32_t x = *reinterpret_cast<const uint32_t*>(a + swz128(i, j * 2));
  return make_float2(bf16_to_float((uint16_t)(x & 0xffff)), bf16_to_float((uint16_t)(x >> 16)));
}

// A2 = A diag(beta), masked to j <= i < len (columns past the chunk may
// hold anything, and 0 * NaN would poison the products), fp16, rows
// 16 warp + gq (+8), columns 16 ks + 2 tq (+1, +8, +9), for warp `warp` of
// an aux group. A2 is written over A, in place and without a barrier of
// the group: each warp reads and writes only its own 16 rows (a row keeps
// its 128 bytes in every tile), and A2's k-step ks covers bytes of A that
// only k-steps up to ks read (fp32: its 16-byte chunks 2ks, 2ks+1 of the
// first tile hold A's columns 8ks..8ks+7; bf16: the same columns), so a
// warp barrier between the reads and the store of each k-step suffices.
// A's dtype is a template parameter so that each chunk runs one loop of
// loads rather than both, predicated.
template <class Cfg, bool A32>
GDN_DEVICE void build_a2(unsigned char* st, const Vec& vec, int len, int warp, int lane) {
  const int gq = lane >> 2, tq = lane & 3;
  const int r0 = 16 * warp + gq, r1 = r0 + 8;
  const int m = lane >> 3, srow = 16 * warp + 8 * (m & 1) + (lane & 7);
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    uint32_t a2[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = (q & 1) ? r1 : r0;
      const int j = 16 * ks + 2 * tq + 8 * (q >> 1);
      float2 x = read_a2<Cfg, A32>(st + Cfg::kOffA2, i, j);
      const float2 b = *reinterpret_cast<const float2*>(&vec.beta[j]);
      const bool in = i < len;
      x.x = (in && j <= i) ? x.x * b.x : 0.f;
      x.y = (in && j + 1 <= i) ? x.y * b.y : 0.f;
      a2[q] = pack_fp16x2(x.x, x.y);
    }
    __syncwarp();
    stmatrix_x4(smem_addr(st + Cfg::kOffA2) + swz128(srow, 16 * (2 * ks + (m >> 1))), a2[0], a2[1], a2[2], a2[3]);
  }
}

// Aux group aw of the core forward. Aux group 0's first thread issues the
// first kStages chunks' loads (the consumers refill the stages after).
template <class Cfg>
GDN_DEVICE void run_aux(unsigned char* smem, typename Cfg::Ring& ring, const GdnHopperParams& p, const Work& w, int aw) {
  constexpr int kAux = Cfg::kAux, kStages = Cfg::kStages;
  const int t = threadIdx.x & 127, warp = t >> 5, lane = t & 31;
  const NamedBarrier group{Cfg::kBarAux + aw, 128};
  const bool a32 = p.sc.flags & kAFP32;

  if (aw == 0 && t == 0) {
    tma_prefetch_desc(&p.tm_q);
    tma_prefetch_desc(&p.tm_k);
    tma_prefetch_desc(&p.tm_v);
    tma_prefetch_desc(&p.tm_a);
    tma_prefetch_desc(&p.tm_o);
    for (int c = 0; c < min(kStages, w.nch); ++c)
      issue_loads<Cfg>(smem + c * Cfg::kStageBytes, ring.bar(kFull, c), p, w, c);
  }

  // g and beta of a chunk (one token per thread) are plain loads, strided
  // by Hv: issued two of this group's chunks ahead (one ahead, the group
  // still stalled on them under the kernel's own HBM traffic). beta only
  // builds A2: a prepared A2 needs none (and has the full forward's beta
  // in it, from its logits when the call gave them).
  const bool need_beta = !(p.sc.flags & kAPrepared);
  auto load_gates = [&](int c, float& gv, float& bv) {
    gv = bv = 0.f;
    const int64_t tok = w.bos + 64 * c + t;
    if (c < w.nch && t < chunk_len(w, c)) {
      gv = p.ptr.g[tok * p.sc.Hv + w.h];
      if (need_beta) bv = read_beta<Cfg>(p, tok * p.sc.Hv + w.h);
    }
  };
  float g_next, b_next, g_next2, b_next2;
  load_gates(aw, g_next, b_next);
  load_gates(aw + kAux, g_next2, b_next2);

  for (int c = aw; c < w.nch; c += kAux) {
    const Slot sl = ring.slot(c);
    unsigned char* st = smem + sl.s * Cfg::kStageBytes;
    const DescBase sd(st);  // the stage's wgmma descriptors
    Vec& vec = *reinterpret_cast<Vec*>(st + Cfg::kOffVec);
    const int len = chunk_len(w, c);
    const float gv = g_next, bv = b_next;
    g_next = g_next2, b_next = b_next2;
    load_gates(c + 2 * kAux, g_next2, b_next2);
    // With two aux groups the stage's previous phase (chunk c - kStages)
    // is the other group's, and it may still be pending when this group
    // gets here: a parity wait on full would then pass at once, and this
    // group would prepare chunk c from the tiles of chunk c - kStages, or
    // before they land. The other group's arrival on ready for that chunk
    // proves the phase complete, and ready's phase before it was this
    // group's own arrival, so that wait is unambiguous.
    static_assert(kAux == 1 || (kAux == 2 && kStages % 2 == 1), "chunk c - kStages belongs to the other aux group");
    if (kAux > 1 && c >= kStages) ring.wait_before(kReady, sl);
    ring.wait(kFull, sl);
    if (Cfg::kNorm) ring.wait(kNormed, sl);
    // A transfer matrix that ended early (the consumers' early exit): the
    // chunks from the stop on were never loaded; their phase of full was
    // completed by hand so that this group would see the stop. (A vote,
    // so that ptxas keeps the chunk index uniform.)
    if (Cfg::kXfer &&
        __all_sync(0xffffffffu, c >= *reinterpret_cast<volatile const int*>(smem + Cfg::kOffStop)))
      break;

    if (t < 64) vec.g[t] = gv, vec.beta[t] = bv;
    // P = Q K^T from the tiles as they arrived (the input dtype: exact
    // products), before the conversion below rewrites them.
    float P[32];
    if (!Cfg::kXfer) issue_qk<Cfg, !Cfg::kQKFP16 && !Cfg::kNorm>(P, sd);
    group.sync();
    write_gate_vectors(vec, gv, t, len);

    // A2 over A (see build_a2), or A2 as the preparation wrote it: rows past
    // a short chunk's end hold the next sequence's (or are TMA's zero fill
    // at the end of the tensor), and are cleared. A row keeps its 128 bytes
    // under the swizzle, so the rows from len on are the tile's bytes from
    // 128 len on.
    if (Cfg::kNorm || (p.sc.flags & kAPrepared)) {
      for (int q = 8 * len + t; q < 512; q += 128)
        *reinterpret_cast<uint4*>(st + Cfg::kOffA2 + 16 * q) = make_uint4(0, 0, 0, 0);
    } else if (a32) {
      build_a2<Cfg, true>(st, vec, len, warp, lane);
    } else {
      build_a2<Cfg, false>(st, vec, len, warp, lane);
    }

    // The operands the consumers take from the stage as fp16, converted in
    // place from bf16 once every warp's part of Q K^T has read Q and K: K
    // and Q (by the converter where there is one: it waits for qk_read),
    // and V where the consumer reads it from the stage (kWide; else the
    // consumers read it into registers as loaded and convert there).
    if (!Cfg::kXfer) wgmma_wait<0>();
    if (Cfg::kConv && !Cfg::kNorm) ring.arrive(kQKRead, sl);
    group.sync();
    // Unrolled, so that a tile's loads overlap the tile before's conversion.
#pragma unroll
    for (int x = 0; x < (Cfg::kWide ? 4 + Cfg::kNC : 4); ++x) {
      // Tiles 0, 2: K's d halves; 1, 3: Q's; then the value tiles, which
      // only the one-consumer chain takes from the stage (kWide). The
      // tile's dtype: q's and k's (x < 4) or v's.
      const bool isq = x < 4 && (x & 1), f16 = x < 4 ? Cfg::kQKFP16 : !Cfg::kConvert;
      // fp16 tiles stay as loaded, and the transfer pass has no Q.
      if (Cfg::kConv && x < 4) continue;  // the converter's
      if (f16 || (isq && Cfg::kXfer)) continue;
      unsigned char* tile = st + Cfg::kOffBQ + x * Cfg::kTile;
      uint4 y[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) y[u] = *reinterpret_cast<const uint4*>(tile + (t + 128 * u) * 16);
#pragma unroll
      for (int u = 0; u < 4; ++u) *reinterpret_cast<uint4*>(tile + (t + 128 * u) * 16) = bf16_to_fp16x8(y[u]);
    }

    if (Cfg::kXfer) {
      fence_async_smem();
      ring.arrive(kReady, sl);
      continue;
    }
    reg_fence(P, 32);
    gate_lower<true>(P, vec.g, len, warp, lane);
    store_acc_fp16(st + Cfg::kOffP, P, 8, 0, warp, lane);

    fence_async_smem();
    ring.arrive(kReady, sl);
  }
}
