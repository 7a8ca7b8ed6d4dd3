// gdn_solve.cuh: a chunk's A2 = (I + diag(beta) L)^-1 diag(beta) from its
// K K^T, in a 64 x 64 fp16 tile, by 16 x 16 blocks: the arithmetic both
// kernels that build A2 share (hopper_aux_fused.cuh's aux group, per chunk
// in the core forward; gdn_prep.cu's gdn_prep_chunk, per chunk and value
// head before it), so that the two paths of the full forward round alike.
// ref's emulateSolveAFused models it, in this order and with these fp16
// roundings (ref/precision_test.go).
//
// One warpgroup (four warps) takes a chunk: warp w holds rows 16w..16w+15
// of an m64n64 accumulator (the layout of wgmma's and of a warp's eight
// m16n8 mma.sync tiles alike: X[4 jb + e] is row 16w + gq + 8 (e / 2), column
// 8 jb + 2 tq + e % 2, with gq = lane / 4, tq = lane % 4). The steps:
//   1. L = StrictLower(K K^T * Gamma) (gate_lower<false>: no beta), stored
//      over the tile in fp16 (store_acc_fp16), and the warp's diagonal
//      block with its rows' beta, diag(beta) L, in fp32 to a scratch
//      (store_l_and_diag);
//   2. each warp inverts its diagonal block of I + diag(beta) L by forward
//      substitution (a column per lane, lanes 16-31 repeating lanes 0-15),
//      fp32: D_w, written as A2's diagonal block D_w diag(beta) over L's
//      (invert_diag_block); then a barrier of the four warps;
//   3. the blocks below the diagonal, as products of fp16 operands with
//      fp32 sums (mma.sync). For a matrix split in two block rows and
//      columns (a the lower half, b the upper), X = (I + diag(beta) L)^-1
//      has X[a, b] = -X[a, a] diag(beta_a) L[a, b] X[b, b]; with L free of
//      beta both factors are A2's own blocks (A2 = X diag(beta)). Applied
//      to each 32 x 32 half (a = 2h+1, b = 2h) and then to the whole (a =
//      rows 32-63, b = rows 0-31, A2[23, 23] the whole 32 x 32 block,
//      A2[3, 2] included):
//        A2[2h+1, 2h] = -(A2[2h+1, 2h+1] L[2h+1, 2h]) A2[2h, 2h]  (warp h, h = 0, 1)
//        A2[23, 01]   = -(A2[23, 23] L[23, 01]) A2[01, 01]        (all four warps)
//      with a barrier of the four warps between the two (merge_blocks), so
//      every product lands as A2's block, and no unscaled copy is kept.
// The tile has 128-byte rows swizzled by swz128 (sm90_tile.cuh), as a
// wgmma operand of the core kernel's stage wants them.
#pragma once
#include "sm90_sync.cuh"
#include "sm90_tile.cuh"

// The diagonal blocks' scratch (store_l_and_diag): fp32 [4 warps][16 m]
// [kLdStride], beta_i L[16w + i][16w + m] at [w][m][i] (transposed: rows
// of 16-byte groups for broadcast loads, conflict-free stores from the
// accumulator layout).
namespace {
constexpr int kLdStride = 20;
constexpr int kLdBytes = 4 * 16 * kLdStride * 4;
}  // namespace

// A chunk's m64n64 accumulator (rows i, columns j: Q K^T or K K^T) gated
// and masked in place: X[i][j] e^{g_i - g_j} where j <= i < len (DIAG: P)
// or j < i < len (L, without beta), else 0 (a select: rows past the chunk
// may hold anything, and 0 * NaN would poison). The exponent is taken as
// g_i log2(e) - g_j log2(e) (each sum scaled once, per row and per column
// pair, not each difference: one subtraction an entry where a subtraction
// and a multiply were two; its error, about |g| 2^-23, is the cumulative
// sum's own size). One straight run for every block: branches on the warp
// index that skip the blocks right of its diagonal (and the masks left of
// it) keep the exponentials from interleaving across blocks, which costs
// more than the work they skip, and spill in the converter.
template <bool DIAG>
GDN_DEVICE void gate_lower(float* X, const float* g, int len, int warp, int lane) {
  constexpr float kLog2e = 1.4426950408889634f;
  const int gq = lane >> 2, tq = lane & 3;
  const int i0 = 16 * warp + gq;
  const float gi[2] = {g[i0] * kLog2e, g[i0 + 8] * kLog2e};
#pragma unroll
  for (int jb = 0; jb < 8; ++jb) {
    const float2 gj = *reinterpret_cast<const float2*>(&g[8 * jb + 2 * tq]);
    const float gj2[2] = {gj.x * kLog2e, gj.y * kLog2e};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = i0 + 8 * (e >> 1), j = 8 * jb + 2 * tq + (e & 1);
      const bool in = (DIAG ? j <= i : j < i) && i < len;
      X[4 * jb + e] = in ? X[4 * jb + e] * exp2_ftz(gi[e >> 1] - gj2[e & 1]) : 0.f;
    }
  }
}

// The warp's part of the diagonal blocks' scratch (kLdBytes at ld).
GDN_DEVICE float* warp_ld(float* ld, int warp) { return ld + warp * 16 * kLdStride; }

// Step 1: L (gated and masked K K^T in KK) stored over the tile in fp16,
// and the warp's diagonal block (its accumulator's column blocks 2w,
// 2w + 1) with its rows' beta, transposed, to the warp's scratch w
// (warp_ld): w[m][i] = beta_i L[16w + i][16w + m].
GDN_DEVICE void store_l_and_diag(unsigned char* a2, float* w, const float* KK, const float* beta, int warp,
                                 int lane, int gq, int tq) {
  store_acc_fp16(a2, KK, 8, 0, warp, lane);
  const float bi[2] = {beta[16 * warp + gq], beta[16 * warp + gq + 8]};
#pragma unroll
  for (int jb = 0; jb < 8; ++jb) {
    if ((jb >> 1) != warp) continue;
#pragma unroll
    for (int e = 0; e < 4; ++e)
      w[(8 * (jb & 1) + 2 * tq + (e & 1)) * kLdStride + gq + 8 * (e >> 1)] = bi[e >> 1] * KK[4 * jb + e];
  }
  __syncwarp();
}

// Step 2: the warp's diagonal block of A2, D diag(beta), from its scratch
// w (store_l_and_diag's, the same warp's: a warp barrier orders them). x_i =
// e_col - sum_{m < i} L_im x_m, by columns of L (right-looking: each step's
// updates are independent), rows 16w..16w+15; lanes 0-15 store rows 0-7
// of their column, lanes 16-31 (the same column's copy) rows 8-15.
GDN_DEVICE void invert_diag_block(unsigned char* a2, const float* w, const float* beta, int warp, int lane) {
  const int col = lane & 15, d0 = 16 * warp;
  float xs[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) xs[i] = i == col ? 1.f : 0.f;
#pragma unroll
  for (int m = 0; m < 15; ++m) {
    float lm[16];
#pragma unroll
    for (int q = m / 4; q < 4; ++q)
      *reinterpret_cast<float4*>(&lm[4 * q]) = *reinterpret_cast<const float4*>(w + m * kLdStride + 4 * q);
#pragma unroll
    for (int i = m + 1; i < 16; ++i) xs[i] = fmaf(-lm[i], xs[m], xs[i]);
  }
  const float bc = beta[d0 + col];
  const int h8 = 8 * (lane >> 4);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    *reinterpret_cast<uint16_t*>(a2 + swz128(d0 + h8 + i, 2 * (d0 + col))) =
        (uint16_t)(pack_fp16x2((h8 ? xs[i + 8] : xs[i]) * bc, 0.f) & 0xffffu);
}

// -R of an m16n16 product (two m16n8 accumulators, n-tiles 0 and 1) stored
// as fp16 pairs, rows gq and gq + 8, columns 2 tq and 8 + 2 tq, at(row, col)
// giving the address of a pair.
GDN_DEVICE void store_pair(unsigned char* p, uint32_t v) { *reinterpret_cast<uint32_t*>(p) = v; }
template <typename At>
GDN_DEVICE void store_neg16(const float r0[4], const float r1[4], int lane, At at) {
  const int gq = lane >> 2, tq = lane & 3;
  store_pair(at(gq, 2 * tq), pack_fp16x2(-r0[0], -r0[1]));
  store_pair(at(gq + 8, 2 * tq), pack_fp16x2(-r0[2], -r0[3]));
  store_pair(at(gq, 8 + 2 * tq), pack_fp16x2(-r1[0], -r1[1]));
  store_pair(at(gq + 8, 8 + 2 * tq), pack_fp16x2(-r1[2], -r1[3]));
}

// Two m16n8 accumulators (n-tiles 0, 1 of 16 columns) as the A operand of
// an m16n8k16 product (k = those 16 columns).
GDN_DEVICE void acc16_to_a(uint32_t a[4], const float y0[4], const float y1[4]) {
  a[0] = pack_fp16x2(y0[0], y0[1]);
  a[1] = pack_fp16x2(y0[2], y0[3]);
  a[2] = pack_fp16x2(y1[0], y1[1]);
  a[3] = pack_fp16x2(y1[2], y1[3]);
}

// Per-lane ldmatrix row addresses of the tile's 16 x 16 blocks: A (x4,
// rows r, columns 8 (lane / 16)) and B taken as its rows k (x4.trans: the
// same addresses; n-tile 0 in b[0], b[1], n-tile 1 in b[2], b[3]);
// tile_at(r0, c0) is lane's address in the block at (r0, c0).
struct SolveTile {
  const unsigned char* a2;
  int lr, lc;
  GDN_DEVICE SolveTile(const unsigned char* t, int lane) : a2(t), lr(lane & 15), lc(8 * (lane >> 4)) {}
  GDN_DEVICE const uint16_t* operator()(int r0, int c0) const {
    return reinterpret_cast<const uint16_t*>(a2 + swz128(r0 + lr, 2 * (c0 + lc)));
  }
};

// Step 3: the blocks below the diagonal, once every diagonal block is
// written (a barrier of the four warps before the call). First
// A2[2h+1, 2h] = -(A2[2h+1, 2h+1] L[2h+1, 2h]) A2[2h, 2h] by warp h < 2;
// then, after named barrier bar of the group's 128 threads (bar 0 is
// __syncthreads in a CTA of 128), A2[23, 01] = -(A2[23, 23] L[23, 01])
// A2[01, 01] by all four warps, the same barrier again between the reads
// of L[23, 01] and the stores over it. In the second, warp w takes rows
// 32 + 16 mt and columns 16 nh of the block (mt = w / 2, nh = w % 2);
// A2[23, 23]'s first 16 rows end at its column 15, A2[01, 01]'s columns
// 16.. start at its row 16.
GDN_DEVICE void merge_blocks(unsigned char* a2, int warp, int lane, int bar) {
  const SolveTile tile_at(a2, lane);
  if (warp < 2) {
    const int d = 32 * warp;
    uint32_t a[4], b[4], ya[4];
    ldmatrix_x4(a, tile_at(d + 16, d + 16));
    ldmatrix_x4_trans(b, tile_at(d + 16, d));
    float y0[4] = {0.f, 0.f, 0.f, 0.f}, y1[4] = {0.f, 0.f, 0.f, 0.f};
    mma_16816<true>(y0, a, b[0], b[1]);
    mma_16816<true>(y1, a, b[2], b[3]);
    acc16_to_a(ya, y0, y1);
    ldmatrix_x4_trans(b, tile_at(d, d));
    float r0[4] = {0.f, 0.f, 0.f, 0.f}, r1[4] = {0.f, 0.f, 0.f, 0.f};
    mma_16816<true>(r0, ya, b[0], b[1]);
    mma_16816<true>(r1, ya, b[2], b[3]);
    // The warp's lanes will write over what other lanes read (the block
    // it replaces): the mma products order them, a warp barrier says so.
    __syncwarp();
    store_neg16(r0, r1, lane, [&](int r, int cc) { return a2 + swz128(d + 16 + r, 2 * (d + cc)); });
  }
  named_sync(bar, 128);
  {
    const int mt = warp >> 1, nh = warp & 1;
    float yv[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n) yv[n][0] = yv[n][1] = yv[n][2] = yv[n][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      if (ks > mt) break;
      uint32_t a[4], b[4];
      ldmatrix_x4(a, tile_at(32 + 16 * mt, 32 + 16 * ks));
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        ldmatrix_x4_trans(b, tile_at(32 + 16 * ks, 16 * np));
        mma_16816<true>(yv[2 * np], a, b[0], b[1]);
        mma_16816<true>(yv[2 * np + 1], a, b[2], b[3]);
      }
    }
    float r0[4] = {0.f, 0.f, 0.f, 0.f}, r1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      if (ks < nh) continue;
      uint32_t ya[4], b[4];
      acc16_to_a(ya, yv[2 * ks], yv[2 * ks + 1]);
      ldmatrix_x4_trans(b, tile_at(16 * ks, 16 * nh));
      mma_16816<true>(r0, ya, b[0], b[1]);
      mma_16816<true>(r1, ya, b[2], b[3]);
    }
    named_sync(bar, 128);  // every warp has read L[23, 01]
    store_neg16(r0, r1, lane, [&](int r, int cc) { return a2 + swz128(32 + 16 * mt + r, 2 * (16 * nh + cc)); });
  }
}
