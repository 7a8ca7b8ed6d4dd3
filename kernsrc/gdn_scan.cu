// gdn_scan.cu: the scan of a sequence-parallel plan (phase 2 of 3).
//
// A long sequence is cut into segments of whole chunks. The transfer pass
// (gdn_hopper.cu with the transfer flag) gave every segment but the last of
// each sequence its end state from a zero start, B, and its transfer matrix
// M: a segment entered with state S leaves with M S + B (S indexed [k, v],
// M [k, k'], all fp32). This kernel walks each sequence's segments in order
// from its h0 (or zero) and writes every segment's true start state, which
// the output pass then uses as that segment's h0. The chain is short (the
// segments of one sequence) and stays fp32 throughout: the error of M
// would otherwise grow along it.
//
// Layouts (floats, 128 x 128 per state):
//   bm      [2][P][Hv][128][128]  B of the P transfer segments, then their M
//           transposed (element (k, k') of M at k' * 128 + k)
//   h0      [N][Hv][128][128]     or null (zero)
//   starts  [N + P][Hv][128][128] row n < N: the start of sequence n's last
//           segment; row N + p: the start of transfer segment p
//   first   [N + 1]               sequence n's transfer segments are
//           first[n] .. first[n+1] - 1, in token order
//
// Grid (16, Hv, N), 256 threads: a CTA owns 8 value columns of one head of
// one sequence. Nothing but the product depends on the previous step: M and
// B of the next segment load into registers while this one's product runs.
//
// The product (128 x 128 times 128 x 8, fp32 FMA) is split over k: warp w
// sums columns 16w..16w+15 of M for all 128 rows (lane l: rows l + 32 i)
// and all 8 state columns, so that the state's loads are one address
// across the warp; the eight partial sums then meet in shared memory
// (Red), and thread (r, c) = (t / 8, t % 8) adds them for rows r + 32 i of
// column c.
//
// M comes straight from global memory into registers, a step ahead: the
// transfer pass stores it transposed (bm's M planes are M^T, [k'][k]), so
// that for one column k' of M a warp's 32 lanes read rows l + 32 i as 128
// contiguous bytes. Each thread holds its 4 rows x 16 columns (64
// registers) of the current M and loads the next one's while it computes.
// (Through shared memory, 16 CTAs a head each wrote and read all of M every
// step, and those wavefronts bounded the step: docs/PERF.md v18, v19.)

#include "gdn_common.cuh"

#ifdef GDN_SCAN_SMEM_BYTES
static_assert(GDN_SCAN_SMEM_BYTES == (2 * 8 * 128 * 4 + 16) * 4, "kernsrc.ScanSharedBytes");
#endif
#ifdef GDN_SCAN_THREADS
static_assert(GDN_SCAN_THREADS == 256, "kernsrc.ScanThreads");
#endif

// GDN_SCAN_PREFETCH=0 (a knob for measuring): M is loaded at the start of
// its own step instead of a step ahead (64 registers fewer, its round trip
// exposed).
#ifndef GDN_SCAN_PREFETCH
#define GDN_SCAN_PREFETCH 1
#endif

namespace {
constexpr int kCols = 8;  // value columns per CTA
constexpr int kLd = 132;  // row stride of the transposed state in shared memory (floats)
// Red, the warps' partial sums, is two planes of four columns each, [8
// warps][128 rows][4]: a warp's 16-byte stores of one plane are contiguous
// (four wavefronts where eight columns a row, 32 bytes apart, took eight),
// and the planes are 16 floats apart, so that the final sum's loads of
// both (a warp: 4 rows x 8 columns) fall in distinct banks.
constexpr int kRedPlane = 8 * 128 * 4 + 16;

// This thread's part of M (rows lane + 32 i, columns 16 w + kk) from M^T
// (mt: [k'][k], 128 x 128 floats): mt[(16 w + kk) * 128 + lane + 32 i].
// One base address, the rest constant offsets (LDG [R + imm]).
__device__ __forceinline__ void load_m(float (&m)[4][16], const float* __restrict__ mt, int w, int lane) {
  const float* b = mt + 16 * 128 * w + lane;
#pragma unroll
  for (int kk = 0; kk < 16; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) m[i][kk] = __ldcg(b + 128 * kk + 32 * i);
}
}  // namespace

extern "C" __global__ void __launch_bounds__(256, 1) gdn_scan_states(const float* __restrict__ bm,
                                                                      const float* __restrict__ h0,
                                                                      float* __restrict__ starts,
                                                                      const int* __restrict__ first, int P, int Hv,
                                                                      int N) {
  extern __shared__ float4 red_raw[];
  float* Red = reinterpret_cast<float*>(red_raw);  // [2 planes][8 warps][128 rows][4]: partial sums
  __shared__ __align__(16) float St[kCols][kLd];   // the state's columns, transposed
  const int t = threadIdx.x, c = t % kCols, r = t / kCols;
  const int lane = t & 31, w = t >> 5;
  const int v = blockIdx.x * kCols + c, h = blockIdx.y, n = blockIdx.z;
  const size_t plane = 128 * 128;
  const int off = r * 128 + v;  // element (r, v) of a state
  // State `row` (sequence or segment) of head h, at this thread's elements
  // (rows r + 32 i of column v).
#define AT(row, i) (((size_t)(row) * Hv + h) * plane + off + 32 * 128 * (i))
#define MAT(p) (bm + ((size_t)(P + (p)) * Hv + h) * plane)

  // A dependent launch (splitcall.go): the output pass may be placed now,
  // and nothing is read before the transfer pass has finished.
  griddep_release();
  griddep_wait();

  float S[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) S[i] = h0 != nullptr ? h0[AT(n, i)] : 0.f;

  const int p0 = first[n], p1 = first[n + 1];
  // M and B of the current segment are loaded a step ahead: their round
  // trips would otherwise stall the product's first FMA at every step.
  float m[4][16], Bn[4];
  if (p0 < p1) {
    if (GDN_SCAN_PREFETCH) load_m(m, MAT(p0), w, lane);
#pragma unroll
    for (int i = 0; i < 4; ++i) Bn[i] = bm[AT(p0, i)];
  }
  for (int p = p0; p < p1; ++p) {
    const bool next = p + 1 < p1;
    if (!GDN_SCAN_PREFETCH) load_m(m, MAT(p), w, lane);
    float acc[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      starts[AT(N + p, i)] = S[i];
      St[c][r + 32 * i] = S[i];
      acc[i] = Bn[i];
      if (next) Bn[i] = bm[AT(p + 1, i)];
    }
    __syncthreads();  // St visible to all
    // Split over k: warp w takes columns 16w..16w+15 of M for all 128 rows
    // (lane l: rows l + 32 i) and all 8 state columns, the state's loads
    // the same address across the warp; then the eight warps' partial sums
    // meet in Red. The next segment's M is loaded into mn meanwhile.
    {
      float part[4][kCols], mn[4][16];
      if (GDN_SCAN_PREFETCH && next) load_m(mn, MAT(p + 1), w, lane);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int cc = 0; cc < kCols; ++cc) part[i][cc] = 0.f;
#pragma unroll
      for (int g = 0; g < 16; g += 4) {
#pragma unroll
        for (int cc = 0; cc < kCols; ++cc) {
          const float4 sv = *reinterpret_cast<const float4*>(&St[cc][16 * w + g]);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            part[i][cc] = fmaf(m[i][g], sv.x, part[i][cc]);
            part[i][cc] = fmaf(m[i][g + 1], sv.y, part[i][cc]);
            part[i][cc] = fmaf(m[i][g + 2], sv.z, part[i][cc]);
            part[i][cc] = fmaf(m[i][g + 3], sv.w, part[i][cc]);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float* dst = Red + (w * 128 + lane + 32 * i) * 4;
        *reinterpret_cast<float4*>(dst) = make_float4(part[i][0], part[i][1], part[i][2], part[i][3]);
        *reinterpret_cast<float4*>(dst + kRedPlane) = make_float4(part[i][4], part[i][5], part[i][6], part[i][7]);
      }
      if (GDN_SCAN_PREFETCH && next) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int kk = 0; kk < 16; ++kk) m[i][kk] = mn[i][kk];
      }
    }
    __syncthreads();  // Red complete; St read by all before it is rewritten
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float x = acc[i];
#pragma unroll
      for (int w2 = 0; w2 < 8; ++w2) x += Red[(c >> 2) * kRedPlane + (w2 * 128 + r + 32 * i) * 4 + (c & 3)];
      S[i] = x;
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) starts[AT(n, i)] = S[i];
#undef AT
#undef MAT
}
