// hopper_converter.cuh: the converter warpgroup (kConv: BV 128 with bf16 q
// and k). It turns each chunk's K and Q into the fp16 operands the
// consumers take, in place, so that the conversion leaves the aux group's
// chain without entering the consumers'. Three forms:
//   run_converter: the conversion alone, once the aux group's Q K^T has
//     read the tiles (qk_read); then its half of ready.
//   run_normaliser (kNorm): the full forward's L2 norm of every K and Q row
//     with the conversion, as soon as the tiles land, before the aux
//     group's products (normed); under kFused it then builds P too, and
//     arrives on ready beside the aux group.
//   run_fused_converter (kFused without kNorm): P from Q and K as loaded,
//     beside the aux group's K K^T of the same tiles; then, once the aux
//     group has read K too (qk_read), the conversion, and its half of ready.
#pragma once
#include "hopper_chunk.cuh"

// The sum of squares of eight bf16 values, in the order l2_normalise
// (gdn_prep.cu) takes them.
GDN_DEVICE float sum_squares8(uint4 x) {
  const uint32_t* v = reinterpret_cast<const uint32_t*>(&x);
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 y = unpack2_of<false>(v[j]);
    ss = fmaf(y.x, y.x, ss);
    ss = fmaf(y.y, y.y, ss);
  }
  return ss;
}

// Eight bf16 values times s, as fp16.
GDN_DEVICE uint4 scale_to_fp16x8(uint4 x, float s) {
  uint32_t* v = reinterpret_cast<uint32_t*>(&x);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 y = unpack2_of<false>(v[j]);
    v[j] = pack_fp16x2(y.x * s, y.y * s);
  }
  return x;
}

// A stage's K and Q tiles (st: their 2048 16-byte pieces) from bf16 to
// fp16 in place, by one warpgroup: thread t takes the pieces t + 128 u, two
// at a time, U pairs an iteration (the core's converter 1, in 24
// registers; the fused one 2).
template <int U>
GDN_DEVICE void convert_qk(uint4* st, int t) {
#pragma unroll U
  for (int u = 0; u < 16; u += 2) {
    const uint4 a = st[t + 128 * u], b = st[t + 128 * (u + 1)];
    st[t + 128 * u] = bf16_to_fp16x8(a);
    st[t + 128 * (u + 1)] = bf16_to_fp16x8(b);
  }
}

// The fused preparation's P: Q K^T from the stage's tiles (fp16 under
// kNorm, the normaliser's; else bf16 as loaded: exact products), gated and
// stored in the stage's P tile as fp16. Every warp of the group has waited
// for its part of the product when this returns.
template <class Cfg>
GDN_DEVICE void build_fused_p(unsigned char* stage, const Vec& vec, int len, int tid) {
  int tt = tid;
  asm volatile("" : "+r"(tt));
  const int warp = tt >> 5, lane = tt & 31;
  const DescBase sd(stage);
  float P[32];
  issue_qk<Cfg, !Cfg::kNorm>(P, sd);
  wgmma_wait<0>();
  reg_fence(P, 32);
  gate_lower<true>(P, vec.g, len, warp, lane);
  store_acc_fp16(stage + Cfg::kOffP, P, 8, 0, warp, lane);
}

// The normaliser (kNorm). The 16-byte pieces t + 128 u (u < 16) of thread
// t lie in rows t / 8 + 16 (u % 4) of tile u / 4 (K, Q, K, Q: d halves 0,
// 0, 1, 1), at position t % 8 of the row's eight (swizzled: the piece
// holds the row's values 8 ((t % 8) ^ (row % 8)) ..). So a thread has the
// same piece of both d halves of eight rows (K's u = 0..3, Q's 4..7), and
// the eight lanes t ^ 1, 2, 4 the rest of them: the sums pair the two
// halves first and then lanes 4, 2, 1 apart, which is l2_normalise's order
// of additions, so every row's inverse norm, and with it every fp16 value,
// is the preparation's to the bit.
template <class Cfg>
GDN_DEVICE void run_normaliser(unsigned char* smem, typename Cfg::Ring& ring, const Work& w) {
  const int tid = threadIdx.x & 127;
  const int t = tid;
  for (int c = 0; c < w.nch; ++c) {
    const Slot sl = ring.slot(c);
    uint4* st = reinterpret_cast<uint4*>(smem + sl.s * Cfg::kStageBytes + Cfg::kOffBQ);
    ring.wait(kFull, sl);
    // Row group r: pieces r and r + 8 (the two d halves of the same rows).
#pragma unroll 2
    for (int r = 0; r < 8; ++r) {
      const uint4 a = st[t + 128 * r], b = st[t + 128 * (r + 8)];
      float ss = sum_squares8(a) + sum_squares8(b);
      ss += __shfl_xor_sync(0xffffffffu, ss, 4);
      ss += __shfl_xor_sync(0xffffffffu, ss, 2);
      ss += __shfl_xor_sync(0xffffffffu, ss, 1);
      const float inv = rsqrt_ftz(ss + 1e-6f);
      st[t + 128 * r] = scale_to_fp16x8(a, inv);
      st[t + 128 * (r + 8)] = scale_to_fp16x8(b, inv);
    }
    fence_async_smem();
    ring.arrive(kNormed, sl);
    if (Cfg::kFused) {
      // The fused preparation's P, beside the aux group's A2: Q K^T, gated
      // and stored; then this group's half of ready.
      unsigned char* stage = smem + sl.s * Cfg::kStageBytes;
      Vec& vec = *reinterpret_cast<Vec*>(stage + Cfg::kOffVec);
      const int len = chunk_len(w, c);
      // Q K^T reads rows every warp of this group normalised: their fences
      // are each thread's own, so the group meets before its wgmma (the aux
      // group's wait on normed is that meeting for its K K^T).
      named_sync(Cfg::kBarConv, 128);
      build_fused_p<Cfg>(stage, vec, len, tid);
      fence_async_smem();
      ring.arrive(kReady, sl);
    }
  }
}

template <class Cfg>
GDN_DEVICE void run_fused_converter(unsigned char* smem, typename Cfg::Ring& ring, const Work& w) {
  const int tid = threadIdx.x & 127;
  for (int c = 0; c < w.nch; ++c) {
    const Slot sl = ring.slot(c);
    unsigned char* stage = smem + sl.s * Cfg::kStageBytes;
    uint4* st = reinterpret_cast<uint4*>(stage + Cfg::kOffBQ);
    ring.wait(kFull, sl);
    build_fused_p<Cfg>(stage, *reinterpret_cast<Vec*>(stage + Cfg::kOffVec), chunk_len(w, c), tid);
    // Every warp's part of Q K^T has read Q and K, and the aux group's
    // K K^T has read K: the tiles may be rewritten.
    named_sync(Cfg::kBarConv, 128);
    ring.wait(kQKRead, sl);
    convert_qk<2>(st, tid);
    fence_async_smem();
    ring.arrive(kReady, sl);
  }
}

template <class Cfg>
GDN_DEVICE void run_converter(unsigned char* smem, typename Cfg::Ring& ring, const Work& w) {
  const int t = threadIdx.x & 127;
  if (Cfg::kNorm) {
    run_normaliser<Cfg>(smem, ring, w);
    return;
  }
  if (Cfg::kFused) {
    run_fused_converter<Cfg>(smem, ring, w);
    return;
  }
  for (int c = 0; c < w.nch; ++c) {
    const Slot sl = ring.slot(c);
    uint4* st = reinterpret_cast<uint4*>(smem + sl.s * Cfg::kStageBytes + Cfg::kOffBQ);
    ring.wait(kQKRead, sl);
    convert_qk<1>(st, t);
    fence_async_smem();
    ring.arrive(kReady, sl);
  }
}
