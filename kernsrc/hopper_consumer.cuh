// hopper_consumer.cuh: a consumer warpgroup of the Hopper core forward:
// value rows 64 cw .. 64 cw + 63 of the CTA's tile. It holds S^T (value
// rows x key columns) as a wgmma accumulator and, per chunk, runs
//   U^T  = S^T K^T,  O'^T = S^T Q^T diag(e^g)
//   Vn^T = (V - diag(e^g) U)^T A2^T
//   O^T  = scale (O'^T + Vn^T P^T)        staged and stored by TMA
//   S^T <- e^{g_last} S^T + (Vn^T diag(f)) K
// taking every product's A operand (S^T, Vn^T) from registers. The first
// group's first thread refills the stage it releases; under kFused the
// first group's first warp also writes the gate vectors
// (hopper_fused_gates.cuh).
#pragma once
#include "hopper_fused_gates.cuh"
#include "hopper_state.cuh"

// The A operand of Vn's product for k-step s: (V - diag(e^g) U)^T, from
// V^T's fragment v (ldmatrix .trans of the value tile, the input dtype:
// fp16 under VF16) and U^T's accumulator, the difference in fp32, rounded
// to fp16 once.
template <bool VF16>
GDN_DEVICE void v_minus_gated_u(uint32_t a[4], const uint32_t v[4], const float* U, int s, const float* eg, int tq) {
  const int j0 = 16 * s + 2 * tq;
  const float e0 = eg[j0], e1 = eg[j0 + 1], e8 = eg[j0 + 8], e9 = eg[j0 + 9];
  const float2 v0 = unpack2_of<VF16>(v[0]), v1 = unpack2_of<VF16>(v[1]);
  const float2 v2 = unpack2_of<VF16>(v[2]), v3 = unpack2_of<VF16>(v[3]);
  a[0] = pack_fp16x2(fmaf(-e0, U[8 * s + 0], v0.x), fmaf(-e1, U[8 * s + 1], v0.y));
  a[1] = pack_fp16x2(fmaf(-e0, U[8 * s + 2], v1.x), fmaf(-e1, U[8 * s + 3], v1.y));
  a[2] = pack_fp16x2(fmaf(-e8, U[8 * s + 4], v2.x), fmaf(-e9, U[8 * s + 5], v2.y));
  a[3] = pack_fp16x2(fmaf(-e8, U[8 * s + 6], v3.x), fmaf(-e9, U[8 * s + 7], v3.y));
}

// The consumer groups' turns at the tensor pipe: run_consumer calls its
// policy once before its first round of products (start), before each
// round (take: before its wgmma fence, or for Vn's round before V's
// fragments are read), after committing the round's products (pass) and
// once after its last round (end). Production's groups take no turns:
// NoTurns's calls are empty and leave no code. A policy that takes turns
// (kOn: the lab's pingpong) serves the two-group chain only, whose rounds
// are one commit group each (kWide's first round is two).
//
// kSkipUnitDecay: the chain leaves the state's decay out of a chunk whose
// gamma is exactly 1 (a multiply by 1 changes no bit). A writer of the
// gate vectors that folds the decay into the factors e^g and f writes 1
// for the chunks it does not fold (docs/perf/many-heads-model.md, the lean
// consumer chunk); the lab's nodecay times the 64 multiplies so spared.
// Production always decays: its code has no vote and no branch here.
//
// write_gates: the fused kernel's gate warp writes chunk x's gate vectors
// (x = 0, 1, ... in order, each once) through its policy: production's
// are write_chunk_gates'; the lab's lazy_decay folds the decay into them.
//
// load: the refill of a stage (chunk c's copies, issued by one thread once
// every consumer has released the stage): production's are issue_loads';
// the lab's noloads only completes the stage's full with no copy, so that
// the chunks run on the tiles a stage already holds.
struct NoTurns {
  static constexpr bool kOn = false;
  static constexpr bool kSkipUnitDecay = false;
  template <class Cfg>
  GDN_DEVICE void load(unsigned char* st, uint64_t* full, const GdnHopperParams& p, const Work& w, int c) const {
    issue_loads<Cfg>(st, full, p, w, c);
  }
  GDN_DEVICE void write_gates(Vec& v, float a, float b, int lane, int len, const GateParams& gp, int, int) {
    write_chunk_gates(v, a, b, lane, len, gp);
  }
  GDN_DEVICE void start(const Work&) const {}
  GDN_DEVICE void take() const {}
  GDN_DEVICE void pass() const {}
  GDN_DEVICE void end(const Work&) const {}
  // The grid rows whose states the walk starts from (h0) and ends in
  // (ht): production's walk is one sequence, its Work's own.
  GDN_DEVICE int first_row(const Work& w) const { return w.n; }
  GDN_DEVICE int last_row(const Work& w) const { return w.n; }
  // At the top of chunk c, before its wait on ready, with S the state
  // after chunk c - 1 (vb, warp, lane: the thread's place in S^T, as the
  // consumer's loads of h0 have it): nothing in production. The lab's
  // persistent CTAs, whose walk runs over several sequences, store one
  // sequence's ht there and load the next one's h0.
  template <class Cfg>
  GDN_DEVICE void top(const GdnHopperParams&, const Work&, int, float*, int, int, int) {}
};

template <class Cfg, class Turns = NoTurns>
GDN_DEVICE void run_consumer(unsigned char* smem, typename Cfg::Ring& ring, const GdnHopperParams& p, const Work& w, int cw,
                             Turns turns = Turns{}) {
  constexpr int kStages = Cfg::kStages, kTile = Cfg::kTile, kNC = Cfg::kNC;
  constexpr bool kXfer = Cfg::kXfer, kWide = Cfg::kWide, kFused = Cfg::kFused, kDeferStore = Cfg::kDeferStore;
  constexpr bool kEarlyExit = Cfg::kEarlyExit;
  static_assert(!Turns::kOn || (kNC == 2 && !kWide), "turns are taken between two consumer groups");
  using E = typename Cfg::E;
  using T = StageTiles<Cfg>;
  const int t = threadIdx.x & 127, warp = t >> 5, lane = t & 31;
  const int gq = lane >> 2, tq = lane & 3;
  const int vb = w.v0 + 64 * cw;  // first value column of this group
  const NamedBarrier group{1 + cw, 128};
  unsigned char* out = smem + Cfg::kOffOut + cw * kTile;
  // The transfer matrix of a segment goes after the B states of all.
  const int64_t state = ((int64_t)turns.first_row(w) * p.sc.Hv + w.h) * 128 * 128 +
                        (w.zero_v ? (int64_t)p.sc.N * p.sc.Hv * 128 * 128 : 0);
  // Where lane's row of the value tile's 8x8 blocks starts for ldmatrix
  // (block m = lane / 8: rows j + 8 (m / 2), columns v + 8 (m % 2)).
  const int vm = lane >> 3, vrow = 8 * (vm >> 1) + (lane & 7), vbyte = 2 * (16 * warp + 8 * (vm & 1));

  // kFused: the gate warp writes chunks 0 and 1's vectors here, and chunk
  // c + 2's at the top of chunk c, after the refill of the same stage (both
  // once chunk c - 1, its last user, is released by both groups).
  const bool gate_warp = kFused && cw == 0 && warp == 0;
  GateParams gp{};
  float* const raw = reinterpret_cast<float*>(smem + Cfg::kOffInv + Cfg::kRawGates);
  auto write_gates = [&](int x, float a, float b) {
    Vec& v = *reinterpret_cast<Vec*>(smem + (x % kStages) * Cfg::kStageBytes + Cfg::kOffVec);
    turns.write_gates(v, a, b, lane, chunk_len(w, x), gp, x, w.nch);
    mbar_arrive(ring.bar(kFull, x % kStages));
  };
  if (gate_warp) {
    gp = gate_params(p, w);
    if (w.nch > 0) fetch_raw_gates(raw, p, w, lane, 0);
    if (w.nch > 1) fetch_raw_gates(raw, p, w, lane, 1);
    cp_async_wait_all();
    for (int x = 0; x < 2 && x < w.nch; ++x) write_gates(x, raw[64 * x + lane], raw[64 * x + lane + 32]);
    if (w.nch > 2) fetch_raw_gates(raw, p, w, lane, 2);
  }
  // As the output pass of a split (a dependent launch after the scan), the
  // start state is the scan's result: nothing before this point reads or
  // writes what the scan touches, and everything after it may. (The
  // producers never wait: they read only the call's inputs. A transfer
  // pass after an early pass must not wait here: hopper_kernel.cuh.)
  if (!kXfer || !(p.sc.flags & kAfterEarly)) griddep_wait();

  // S^T: rows v = vb + 16 warp + gq (+8), columns k = 8 j + 2 tq (+1).
  float S[64];
  float decay = 1.f;  // the product of the chunks' gammas so far (early exit)
  if (Cfg::kStates && h0_format(p) != 0) {
    // The caller's h0 or pool in another format (hopper_state.cuh): entry
    // (k, v) at k sk + v sv, fp32 or bf16; a negative slot reads zero.
    const int f = h0_format(p), sk = (f & kStateVK) ? 1 : 128, sv = 129 - sk;
    const int64_t at = p.ptr.h0 != nullptr ? caller_state(p, f, turns.first_row(w), w.h) : -1;
    const float* hf = p.ptr.h0 + (at < 0 ? 0 : at);
    const uint16_t* hb = reinterpret_cast<const uint16_t*>(p.ptr.h0) + (at < 0 ? 0 : at);
    const bool bf = f & kPoolBF16;
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int v = vb + 16 * warp + gq + 8 * (e >> 1), k = 8 * j + 2 * tq + (e & 1);
        S[4 * j + e] = at < 0 ? 0.f : bf ? bf16_to_float(hb[k * sk + v * sv]) : hf[k * sk + v * sv];
      }
  } else {
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int v = vb + 16 * warp + gq + 8 * (e >> 1), k = 8 * j + 2 * tq + (e & 1);
        S[4 * j + e] = w.zero_v ? (k == v ? 1.f : 0.f) : p.ptr.h0 != nullptr ? p.ptr.h0[state + (int64_t)k * 128 + v] : 0.f;
      }
  }

  // Checkpoints (states variants but the fused ones, whose consumers have
  // no registers to spare in the chunk loop; hopper_state.cuh).
  constexpr bool kCkpt = Cfg::kStates && !kFused;
  CkptWalk ck;
  if (kCkpt) ck.start(p, w);

  // Releases chunk c's stage once every wgmma that read it is done.
  auto release = [&](int c) { ring.arrive(kEmpty, ring.slot(c)); };
  // Refills chunk c's stage with the chunk kStages ahead once every
  // consumer has released it: the first consumer's first thread, called
  // one chunk later, while its group waits for products anyway (issued at
  // the release, the copies held up the group's other three warps at its
  // next barrier). Under kFused, at the top of the chunk (below).
  auto refill = [&](int c) {
    if (cw == 0 && t == 0 && c >= 0 && c + kStages < w.nch) {
      const Slot sl = ring.slot(c);
      ring.wait(kEmpty, sl);
      turns.template load<Cfg>(smem + sl.s * Cfg::kStageBytes, ring.bar(kFull, sl.s), p, w, c + kStages);
    }
  };
  // The early exit after chunk c (one thread): the aux groups prepare the
  // chunks whose copies are in flight (up to c + 2: refill(c - 1) ran in
  // chunk c), so that none is left landing when the CTA ends, and stop at
  // the first chunk from c + 3 on, whose phase of full this thread
  // completes by hand (an arrival with no bytes). Where the stage's chunk
  // before was not consumed (c + 1, under two aux groups), only once it is
  // prepared: its group is then past its wait on full, which completing
  // the next phase early would leave two phases behind, waiting forever.
  auto stop_after = [&](int c) {
    *reinterpret_cast<volatile int*>(smem + Cfg::kOffStop) = c + 3;
    for (int k = 0; k < Cfg::kAux; ++k) {
      const int cc = c + 3 + k, prev = cc - kStages;
      if (cc >= w.nch) break;
      if (prev > c) mbar_wait(ring.bar(kReady, prev % kStages), (prev / kStages) & 1);
      mbar_arrive(ring.bar(kFull, cc % kStages));
    }
  };
  // O^T of chunk c -> o[i][v] through the staging tile (stmatrix .trans
  // writes rows i): stage_o writes the tile (once the store before has
  // read it), flush_o stores it (len rows). Under kDeferStore a whole
  // chunk's flush waits for the next chunk's first products to be issued
  // (or the loop's end); the next stage_o's wait and barrier still come
  // after it, so the tile is never overwritten before its store read it.
  auto stage_o = [&](const float* O) {
    if (t == 0) tma_store_wait_read();
    group.sync();
    const int m = lane >> 3, r = lane & 7;
    const float sc = p.sc.scale;
#pragma unroll
    for (int jb = 0; jb < 8; jb += 2) {
      const int i = 8 * (jb + (m >> 1)) + r;
      const int chunk = 2 * warp + (m & 1);
      stmatrix_x4_trans(smem_addr(out) + swz128(i, 16 * chunk), E::pack2(sc * O[4 * jb], sc * O[4 * jb + 1]),
                        E::pack2(sc * O[4 * jb + 2], sc * O[4 * jb + 3]),
                        E::pack2(sc * O[4 * jb + 4], sc * O[4 * jb + 5]),
                        E::pack2(sc * O[4 * jb + 6], sc * O[4 * jb + 7]));
    }
  };
  auto flush_o = [&](int c, int len) {
    fence_async_smem();
    group.sync();
    if (len == 64) {
      if (t == 0) {
        tma_store_4d(&p.tm_o, out, vb, w.h, w.t0 + 64 * c, w.b);
        tma_store_commit();
      }
    } else {
      // The chunk ends inside the tile: rows past it belong to the next
      // sequence (or lie past the tensor), so only len rows are written.
      const int64_t tok = w.bos + 64 * c;
      for (int q = t; q < len * 8; q += 128) {
        const int i = q >> 3, ch = q & 7;
        *reinterpret_cast<uint4*>(p.ptr.o + (tok + i) * p.sc.Hv * 128 + w.h * 128 + vb + 8 * ch) =
            *reinterpret_cast<const uint4*>(out + swz128(i, 16 * ch));
      }
    }
  };
  // (Only a whole chunk's TMA store is deferred: with the partial chunk's
  // row copy inlined into the loop's flush as well, its address arithmetic
  // held registers across the first products and ptxas spilled.)
  auto store_o = [&](int c, const float* O) {
    const int len = chunk_len(w, c);
    stage_o(O);
    if (!kDeferStore || len < 64) flush_o(c, len);
  };
  // The deferred flush of chunk c - 1, in chunk c right after its U and O'
  // products are issued, or after the loop (c = nch).
  auto flush_prev = [&](int c) {
    if (kDeferStore && w.store_o && c > 0 && chunk_len(w, c - 1) == 64) flush_o(c - 1, 64);
  };

  turns.start(w);
  for (int c = 0; c < w.nch; ++c) {
    const Slot sl = ring.slot(c);
    unsigned char* st = smem + sl.s * Cfg::kStageBytes;
    const DescBase sd(st);  // the stage's wgmma descriptors
    const Vec& vec = *reinterpret_cast<const Vec*>(st + Cfg::kOffVec);
    // Under kFused the refill goes first, at the top of the chunk: behind
    // the gate work and the first products, the copies were late enough
    // for the converter to wait on full.
    if (kFused) refill(c - 1);
    if (gate_warp && c + 2 < w.nch) {
      if (c >= 1) mbar_wait(ring.bar(kEmpty, (c - 1) % kStages), ((c - 1) / kStages) & 1);
      cp_async_wait_all();
      const float* const r = raw + ((c + 2) & 1) * 64;
      write_gates(c + 2, r[lane], r[lane + 32]);
      if (c + 3 < w.nch && !kDeferStore) fetch_raw_gates(raw, p, w, lane, c + 3);
    }
    turns.template top<Cfg>(p, w, c, S, vb, warp, lane);
    ring.wait(kReady, sl);

    // U^T = S^T K^T into acc[0..31], S^T Q^T into acc[32..63], whose
    // columns then take their factors e^{g_i}: O'^T. (The aux group
    // leaves Q unscaled: the multiplies cost its chain, the bound of a BV
    // 128 chunk, more than the consumers'.)
    float acc[64];
    float* U = acc;
    float* O = acc + 32;
    // O' takes its factors e^{g_i} (columns of O'^T) once its products are in.
    auto scale_o = [&] {
#pragma unroll
      for (int jb = 0; jb < 8; ++jb) {
        const int i = 8 * jb + 2 * tq;
        const float e0 = vec.eg[i], e1 = vec.eg[i + 1];
        O[4 * jb] *= e0, O[4 * jb + 1] *= e1, O[4 * jb + 2] *= e0, O[4 * jb + 3] *= e1;
      }
    };
    if (kWide) {
      // One m64n128 product against [K; Q], in two halves of d so that only
      // half of S^T's fp16 copy is held at a time.
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = 0.f;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        uint32_t sa[4][4];
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) acc_to_a(sa[ks], S, 4 * half + ks);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) mma_rs<128>(acc, sa[ks], T::k_rows(sd)(4 * half + ks));
        wgmma_commit();
        wgmma_wait<0>();
      }
      reg_fence(acc, 64);
      // (Written out, not scale_o: through the lambda ptxas serialised the
      // fp16 BV 64 variant's products.)
#pragma unroll
      for (int jb = 0; jb < 8; ++jb) {
        const int i = 8 * jb + 2 * tq;
        const float e0 = vec.eg[i], e1 = vec.eg[i + 1];
        O[4 * jb] *= e0, O[4 * jb + 1] *= e1, O[4 * jb + 2] *= e0, O[4 * jb + 3] *= e1;
      }
    } else {
      uint32_t sa[8][4];
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) acc_to_a(sa[ks], S, ks);
      turns.take();
      wgmma_fence();
      gemm_rs<64, 0, 8, false>(U, sa, T::k_rows(sd));
      if (!kXfer) gemm_rs<64, 0, 8, false>(O, sa, T::q_rows(sd));
      wgmma_commit();
      turns.pass();
      flush_prev(c);
      // (The gate warp's next raw gates after the flush, whose proxy fence
      // would otherwise wait for those copies.)
      if (kDeferStore && gate_warp && c + 3 < w.nch) fetch_raw_gates(raw, p, w, lane, c + 3);
      if (!kFused) refill(c - 1);
      wgmma_wait<0>();
      reg_fence(acc, kXfer ? 32 : 64);
      if (!kXfer) scale_o();
    }

    // Vn^T = (V - diag(e^g) U)^T A2^T, into acc[0..31] (the transfer
    // matrix's value tiles are zero).
    float* Vn = U;
    if (kWide) {
      // V^T A2^T with V fp16 in the stage (read M-major: rows j, columns
      // v), then -(U^T diag(e^g)) A2^T from registers.
      uint32_t ua[4][4];
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) acc_to_a_scaled<true>(ua[ks], U, ks, vec.eg, tq);
      wgmma_fence();
      gemm_ss<64, false, 1, 0, 4>(Vn, T::v_tokens(sd, cw), T::a2_rows(sd));
      gemm_rs<64, 0, 4, true>(Vn, ua, T::a2_rows(sd));
    } else {
      // V^T's A fragments straight from the value tile (rows j, columns
      // v, the input dtype); the difference in fp32, rounded to fp16 once.
      uint32_t wa[4][4], vr[4][4];
      const unsigned char* vt = st + Cfg::kOffV + cw * kTile;
      // (The turn before the fragments: taken after them, ptxas spilled a
      // register in the bf16 BV 128 core variants, NVRTC 12.4.)
      turns.take();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        ldmatrix_x4_trans(vr[ks], reinterpret_cast<const uint16_t*>(vt + swz128(16 * ks + vrow, vbyte)));
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) v_minus_gated_u<Cfg::kVF16>(wa[ks], vr[ks], U, ks, vec.eg, tq);
      wgmma_fence();
      gemm_rs<64, 0, 4, false>(Vn, wa, T::a2_rows(sd));
    }
    wgmma_commit();
    turns.pass();
    if (kWide) refill(c - 1);
    wgmma_wait<0>();
    reg_fence(Vn, 32);

    // Vn^T as A operands: as is (for P) and with the column factors f (for
    // the state update).
    uint32_t va[4][4], vf[4][4];
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      acc_to_a(va[ks], Vn, ks);
      acc_to_a_scaled<false>(vf[ks], Vn, ks, vec.f, tq);
    }
    const float gamma = vec.gamma;
    if (kXfer && kEarlyExit) decay *= gamma;
    // (Every thread reads the same gamma; the vote is what lets ptxas treat
    // the branch as uniform.)
    if (!Turns::kSkipUnitDecay || __any_sync(0xffffffffu, gamma != 1.f)) {
#pragma unroll
      for (int i = 0; i < 64; ++i) S[i] *= gamma;
    }
    // O^T += Vn^T P^T and S^T <- gamma S^T + (Vn^T diag(f)) K (K read
    // N-major: rows j, columns d; the two d blocks are BQ's halves). The
    // kWide chain issues O's product first and stores o while the state
    // update runs; with two consumer groups the state update goes first
    // (the orders that keep the products pipelined and run fastest).
    auto update_state = [&] {
      gemm_rs<128, 1, 4, true>(S, vf, T::k_tokens(sd));
      wgmma_commit();
    };
    auto p_term = [&] {
      gemm_rs<64, 0, 4, true>(O, va, T::p_rows(sd));
      wgmma_commit();
    };
    turns.take();
    wgmma_fence();
    if (kWide) {
      p_term();
      update_state();
      wgmma_wait<1>();
      reg_fence(O, 32);
      if (w.store_o) store_o(c, O);
      wgmma_wait<0>();
      reg_fence(S, 64);
      release(c);
    } else {
      update_state();
      if (!kXfer) p_term();
      turns.pass();
      wgmma_wait<0>();
      reg_fence(S, 64);
      release(c);
      if (!kXfer) {
        reg_fence(O, 32);
        if (w.store_o) store_o(c, O);
      }
    }
    if (kCkpt && c == ck.next) {
      // The state after chunk c is a checkpoint (if the chunk is whole).
      if (64 * (c + 1) <= w.len && ck.row < p.sc.ck_rows) {
        const int f = p.sc.flags & (kStateVK | kPoolBF16);
        const int64_t at = ((int64_t)ck.row * p.sc.Hv + w.h) * (128 * 128);
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            set_state_entry(static_cast<float*>(p.st.ckpt), at, f, 8 * j + 2 * tq + (e & 1),
                            vb + 16 * warp + gq + 8 * (e >> 1), S[4 * j + e]);
      }
      ck.next += p.sc.ck_chunks;
      ++ck.row;
    }
    // A transfer matrix whose state is exactly zero stays zero (v is zero:
    // every later product is of zeros), so its CTA may stop: the values of
    // walking on, for finite inputs (a zero's sign aside; an infinity met
    // later, 0 * inf, would have made NaN). Decaying heads get there once
    // e^{sum g} underflows, often early in a segment; checked every four
    // chunks by all consumer groups together, once the gates' product
    // (the same in every group) says the state may be near zero: a head
    // that barely decays never pays for the barrier. (With unit keys and
    // beta in [0, 2] the state's entries are at most that product; other
    // keys only make the look come earlier or later, never change the
    // result.) Both tests go through a warp vote: the same in every thread,
    // but only a vote's result is one ptxas treats as uniform; a branch out
    // of the loop on anything else made the chunk index, and with it every
    // wgmma descriptor, per-thread values.
    if (kXfer && kEarlyExit && w.zero_v && (c & 3) == 3 && c + 1 < w.nch &&
        __all_sync(0xffffffffu, decay < 0x1p-100f)) {
      bool nonzero = false;
#pragma unroll
      for (int i = 0; i < 64; ++i) nonzero |= S[i] != 0.f;
      if (__all_sync(0xffffffffu, !named_sync_or(Cfg::kBarConsumers, 128 * kNC, nonzero))) {
        if (cw == 0 && t == 0) stop_after(c);
        break;
      }
    }
  }
  // The last chunk's deferred flush (the last staged is nch - 1: the fused
  // chain has no early exit).
  flush_prev(w.nch);
  turns.end(w);
  if (t == 0) tma_store_wait_all();

  if (p.ptr.ht != nullptr && turns.last_row(w) < p.sc.n_ht) {
    // A transfer matrix (zero_v: its "value" index is M's column k') is
    // stored in the scan's fragment order (scan_m_index, gdn_common.cuh):
    // each scan thread then loads its part of M as 16-byte rows.
    // (States variants: the caller's ht or pool in its format,
    // hopper_state.cuh; -1: a negative slot, nothing written.)
    const int htf = Cfg::kStates ? ht_format(p) : 0;
    const int64_t hts = state + ((int64_t)turns.last_row(w) - turns.first_row(w)) * p.sc.Hv * 128 * 128;
    const int64_t htat = htf != 0 ? caller_state(p, htf, turns.last_row(w), w.h) : hts;
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int v = vb + 16 * warp + gq + 8 * (e >> 1), k = 8 * j + 2 * tq + (e & 1);
        if (htf != 0) {
          if (htat >= 0) set_state_entry(p.ptr.ht, htat, htf, k, v, S[4 * j + e]);
        } else {
          const int at = kXfer && w.zero_v ? scan_m_index(k, v) : k * 128 + v;
          p.ptr.ht[hts + at] = S[4 * j + e];
        }
      }
  }
}
