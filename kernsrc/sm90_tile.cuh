// sm90_tile.cuh: operand tiles in shared memory. A tile is rows of 128
// bytes (64 16-bit values), 8-row groups of 1024 bytes, with the 16-byte
// chunks of row r permuted by r % 8 (XOR): the layout TMA writes with
// CU_TENSOR_MAP_SWIZZLE_128B, and the one wgmma reads with swizzle mode 1.
// A tile wider than 64 values is stored as 64-wide column blocks, each of
// its own rows x 128 bytes, `block` bytes apart. Every tile starts at a
// multiple of 1024 bytes.
//
// KMajor and MNMajor are views of such a tile as a wgmma operand: view(ks)
// is the descriptor of k-slice ks (16 values of k). gemm_ss and gemm_rs run
// a product's k-slices. Then the fragments: an accumulator as the next
// product's A operand, and stored into a tile (stmatrix).
#pragma once
#include "sm90_wgmma.cuh"

// Byte offset of (row, byte) in a swizzled tile of 128-byte rows.
GDN_DEVICE uint32_t swz128(int row, int byte) {
  return (uint32_t)(row * 128 + ((((byte >> 4) ^ row) & 7) << 4) + (byte & 15));
}

// A tile read along its rows (K-major: the rows are the product's M or N,
// k runs along a row): k-slice ks is 32 bytes into column block ks / 4.
struct KMajor {
  DescBase sd;  // the region the tile lies in (its descriptor base)
  int off;             // the tile's byte offset in it
  int block;           // bytes between 64-wide column blocks
  GDN_DEVICE uint64_t operator()(int ks) const { return sd.at(off + (ks >> 2) * block + (ks & 3) * 32, 16, 1024); }
};

// A tile read across its rows (M/N-major: k runs down the rows, 16 rows =
// 2048 bytes a k-slice; the product's M or N runs along a row, its 64-wide
// column blocks `block` bytes apart).
struct MNMajor {
  DescBase sd;
  int off, block;
  GDN_DEVICE uint64_t operator()(int ks) const { return sd.at(off + ks * 2048, block, 1024); }
};

// acc = sum over k-slices ks < K of A(ks) B(ks) (acc's old value dropped),
// both operands views of shared memory.
template <int N, bool BF16, int TA, int TB, int K, class A, class B>
GDN_DEVICE void gemm_ss(float* acc, const A& a, const B& b) {
#pragma unroll
  for (int ks = 0; ks < K; ++ks) mma_ss<N, BF16, TA, TB>(acc, a(ks), b(ks), ks > 0);
}

// acc = (ACC ? acc : 0) + sum over k-slices ks < K of A(ks) B(ks), A's
// k-slice ks in registers a[ks] (acc_to_a).
template <int N, int TB, int K, bool ACC, class B>
GDN_DEVICE void gemm_rs(float* acc, const uint32_t (*a)[4], const B& b) {
#pragma unroll
  for (int ks = 0; ks < K; ++ks) mma_rs<N, TB>(acc, a[ks], b(ks), ACC || ks > 0);
}

// ---------------------------------------------------------------------------
// Fragments. An m64nN fp32 accumulator gives warp w of the warpgroup rows
// 16w + lane/4 (+8), and per 8-column block j the elements d[4j..4j+3] at
// columns 8j + 2(lane%4) (+1): (r, c), (r, c+1), (r+8, c), (r+8, c+1). The A
// operand from registers for k-step s (columns 16s..16s+15) is the same
// fragment packed to f16x2: {d[8s], d[8s+1]}, {d[8s+2], d[8s+3]},
// {d[8s+4], d[8s+5]}, {d[8s+6], d[8s+7]}.
// ---------------------------------------------------------------------------

// A-operand registers for k-step s from an accumulator (optionally with
// column factors: f[c] for the column c of each element).
GDN_DEVICE void acc_to_a(uint32_t a[4], const float* d, int s) {
  a[0] = pack_fp16x2(d[8 * s + 0], d[8 * s + 1]);
  a[1] = pack_fp16x2(d[8 * s + 2], d[8 * s + 3]);
  a[2] = pack_fp16x2(d[8 * s + 4], d[8 * s + 5]);
  a[3] = pack_fp16x2(d[8 * s + 6], d[8 * s + 7]);
}

// The same for an accumulator whose columns take factors first (a chunk's
// gate factors by token): element (r, j) times f[j], negated under NEG,
// for the columns j = 16 s + 2 (lane % 4) (+1, +8, +9) of k-step s; tq =
// lane % 4.
template <bool NEG>
GDN_DEVICE void acc_to_a_scaled(uint32_t a[4], const float* d, int s, const float* f, int tq) {
  const int j0 = 16 * s + 2 * tq;
  const float f0 = NEG ? -f[j0] : f[j0], f1 = NEG ? -f[j0 + 1] : f[j0 + 1];
  const float f8 = NEG ? -f[j0 + 8] : f[j0 + 8], f9 = NEG ? -f[j0 + 9] : f[j0 + 9];
  a[0] = pack_fp16x2(d[8 * s + 0] * f0, d[8 * s + 1] * f1);
  a[1] = pack_fp16x2(d[8 * s + 2] * f0, d[8 * s + 3] * f1);
  a[2] = pack_fp16x2(d[8 * s + 4] * f8, d[8 * s + 5] * f9);
  a[3] = pack_fp16x2(d[8 * s + 6] * f8, d[8 * s + 7] * f9);
}

// Stores four 8x8 16-bit matrices; lane l gives the address of row l%8 of
// matrix l/8, and r[j] is the thread's pair of matrix j in the accumulator
// layout (row lane/4, columns 2(lane%4), +1). With .trans each matrix is
// written transposed.
GDN_DEVICE void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}
GDN_DEVICE void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// Stores an m64 x (8 nblocks) accumulator (columns c0.., fp16) into a
// swizzled tile of 128-byte rows at tile (row 0 = accumulator row 0): each
// stmatrix covers two 8-column blocks of the warp's 16 rows. The columns
// c0 .. c0 + 8 nblocks - 1 must lie within the tile's 64.
GDN_DEVICE void store_acc_fp16(unsigned char* tile, const float* d, int nblocks, int c0, int warp, int lane) {
  const int m = lane >> 3, r = lane & 7;
  const int row = 16 * warp + 8 * (m & 1) + r;
#pragma unroll
  for (int j = 0; j < nblocks; j += 2) {
    const int chunk = c0 / 8 + j + (m >> 1);
    stmatrix_x4(smem_addr(tile) + swz128(row, 16 * chunk), pack_fp16x2(d[4 * j], d[4 * j + 1]),
                pack_fp16x2(d[4 * j + 2], d[4 * j + 3]), pack_fp16x2(d[4 * j + 4], d[4 * j + 5]),
                pack_fp16x2(d[4 * j + 6], d[4 * j + 7]));
  }
}
