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
//   h0      [N][Hv][128][128]     or null (zero)
//   starts  [N + P][Hv][128][128] row n < N: the start of sequence n's last
//           segment; row N + p: the start of transfer segment p
//   first   [N + 1]               sequence n's transfer segments are
//           first[n] .. first[n+1] - 1, in token order
//
// Grid (16, Hv, N), 256 threads: a CTA owns 8 value columns of one head of
// one sequence. Nothing but the product depends on the previous step: M of
// the next segment streams into the other half of a double buffer
// (cp.async), and B a step ahead into registers, while this one's product
// runs.
//
// The product (128 x 128 times 128 x 8, fp32 FMA) is split over k: warp w
// sums columns 16w..16w+15 of M for all 128 rows (lane l: rows l + 32 i)
// and all 8 state columns, so that each 16-byte load of M feeds 32 FMAs and
// the state's loads are one address across the warp; the eight partial
// sums then meet in shared memory (Red), and thread (r, c) = (t / 8, t % 8)
// adds them for rows r + 32 i of column c. (Unsplit, a thread's 4 rows x 1
// column took five 16-byte loads for 16 FMAs, and the loads' wavefronts
// bounded the step: docs/PERF.md v17.) M's rows and the transposed state
// are padded to 132 floats: a quarter-warp's loads of M land in distinct
// banks.

#include "gdn_common.cuh"

#ifdef GDN_SCAN_SMEM_BYTES
static_assert(GDN_SCAN_SMEM_BYTES == 2 * 128 * 132 * 4 + 8 * 128 * 8 * 4, "kernsrc.ScanSharedBytes");
#endif
#ifdef GDN_SCAN_THREADS
static_assert(GDN_SCAN_THREADS == 256, "kernsrc.ScanThreads");
#endif

namespace {
constexpr int kCols = 8;   // value columns per CTA
constexpr int kLd = 132;   // row stride of M and of the transposed state in shared memory (floats)
constexpr int kPlaneS = 128 * kLd;

// Starts copying M (128 x 128 floats) into dst (rows kLd floats apart):
// 16 bytes per cp.async.
__device__ __forceinline__ void load_m_async(float* dst, const float* M, int t) {
#pragma unroll
  for (int u = 0; u < 128 * 128 / 4 / 256; ++u) {
    const int q = t + 256 * u;  // 16-byte piece q: row q / 32, columns 4 (q % 32)..
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst + (q >> 5) * kLd + 4 * (q & 31)));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(M + 4 * q) : "memory");
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}
}  // namespace

extern "C" __global__ void __launch_bounds__(256, 1) gdn_scan_states(const float* __restrict__ bm,
                                                                      const float* __restrict__ h0,
                                                                      float* __restrict__ starts,
                                                                      const int* __restrict__ first, int P, int Hv,
                                                                      int N) {
  extern __shared__ float4 m_raw[];
  float* Mbuf = reinterpret_cast<float*>(m_raw);  // [2][128][kLd]
  float* Red = Mbuf + 2 * kPlaneS;                 // [8 warps][128 rows][kCols]: partial sums
  __shared__ __align__(16) float St[kCols][kLd];   // the state's columns, transposed
  const int t = threadIdx.x, c = t % kCols, r = t / kCols;
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
  // B of the current segment is loaded a step ahead, like M: its round trip
  // would otherwise stall the product's first FMA at every step.
  float Bn[4];
  if (p0 < p1) {
    load_m_async(Mbuf, MAT(p0), t);
#pragma unroll
    for (int i = 0; i < 4; ++i) Bn[i] = bm[AT(p0, i)];
  }
  for (int p = p0; p < p1; ++p) {
    const bool next = p + 1 < p1;
    if (next) load_m_async(Mbuf + ((p + 1 - p0) & 1) * kPlaneS, MAT(p + 1), t);
    float acc[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      starts[AT(N + p, i)] = S[i];
      St[c][r + 32 * i] = S[i];
      acc[i] = Bn[i];
      if (next) Bn[i] = bm[AT(p + 1, i)];
    }
    if (next)
      asm volatile("cp.async.wait_group 1;" ::: "memory");
    else
      asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();  // M_p and St visible to all
    // Split over k: warp w takes columns 16w..16w+15 of M for all 128 rows
    // (lane l: rows l + 32 i) and all 8 state columns, so that a 16-byte
    // load of M feeds 32 FMAs and the state's loads are the same address
    // across the warp; then the eight warps' partial sums meet in Red.
    {
      const int lane = t & 31, w = t >> 5;
      const float* M = Mbuf + ((p - p0) & 1) * kPlaneS + lane * kLd + 16 * w;
      float part[4][kCols];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int cc = 0; cc < kCols; ++cc) part[i][cc] = 0.f;
#pragma unroll
      for (int g = 0; g < 16; g += 4) {
        float4 m[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) m[i] = *reinterpret_cast<const float4*>(M + 32 * kLd * i + g);
#pragma unroll
        for (int cc = 0; cc < kCols; ++cc) {
          const float4 sv = *reinterpret_cast<const float4*>(&St[cc][16 * w + g]);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            part[i][cc] = fmaf(m[i].x, sv.x, part[i][cc]);
            part[i][cc] = fmaf(m[i].y, sv.y, part[i][cc]);
            part[i][cc] = fmaf(m[i].z, sv.z, part[i][cc]);
            part[i][cc] = fmaf(m[i].w, sv.w, part[i][cc]);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float* dst = Red + (w * 128 + lane + 32 * i) * kCols;
        *reinterpret_cast<float4*>(dst) = make_float4(part[i][0], part[i][1], part[i][2], part[i][3]);
        *reinterpret_cast<float4*>(dst + 4) = make_float4(part[i][4], part[i][5], part[i][6], part[i][7]);
      }
    }
    __syncthreads();  // Red complete; M_p and St read by all before they are rewritten
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float x = acc[i];
#pragma unroll
      for (int w = 0; w < 8; ++w) x += Red[(w * 128 + r + 32 * i) * kCols + c];
      S[i] = x;
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) starts[AT(n, i)] = S[i];
#undef AT
#undef MAT
}
