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
// Grid (16, Hv, N), 128 threads: a CTA owns 8 value columns of one head of
// one sequence; thread (r, c) = (t / 8, t % 8) computes rows 8r .. 8r + 7 of
// column c.

namespace {
constexpr int kCols = 8;    // value columns per CTA
constexpr int kJBlock = 32; // columns of M staged in shared memory at a time
}  // namespace

extern "C" __global__ void __launch_bounds__(128, 1) gdn_scan_states(const float* __restrict__ bm,
                                                                   const float* __restrict__ h0,
                                                                   float* __restrict__ starts,
                                                                   const int* __restrict__ first, int P, int Hv,
                                                                   int N) {
  __shared__ float Ss[128][kCols];
  __shared__ float Ms[128][kJBlock + 1];  // +1: rows 8 apart fall in different banks
  const int t = threadIdx.x, c = t % kCols, r = t / kCols;
  const int v = blockIdx.x * kCols + c, h = blockIdx.y, n = blockIdx.z;
  const size_t plane = 128 * 128;
  const int off = 8 * r * 128 + v;  // element (8r, v) of a state
  // State `row` (sequence or segment) of head h, at this thread's elements.
#define AT(row, i) (((size_t)(row) * Hv + h) * plane + off + 128 * (i))

  float S[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) S[i] = h0 != nullptr ? h0[AT(n, i)] : 0.f;

  const int p0 = first[n], p1 = first[n + 1];
  for (int p = p0; p < p1; ++p) {
    float acc[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      starts[AT(N + p, i)] = S[i];
      Ss[8 * r + i][c] = S[i];
      acc[i] = bm[AT(p, i)];
    }
    const float* M = bm + ((size_t)(P + p) * Hv + h) * plane;
    for (int jb = 0; jb < 128; jb += kJBlock) {
      __syncthreads();  // Ss written; the previous block of Ms read
#pragma unroll
      for (int u = 0; u < 128 * kJBlock / 4 / 128; ++u) {
        const int q = t + 128 * u, k = q / (kJBlock / 4), j4 = q % (kJBlock / 4);
        const float4 m = *reinterpret_cast<const float4*>(M + (size_t)k * 128 + jb + 4 * j4);
        Ms[k][4 * j4] = m.x, Ms[k][4 * j4 + 1] = m.y, Ms[k][4 * j4 + 2] = m.z, Ms[k][4 * j4 + 3] = m.w;
      }
      __syncthreads();
#pragma unroll
      for (int j = 0; j < kJBlock; ++j) {
        const float s = Ss[jb + j][c];
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] = fmaf(Ms[8 * r + i][j], s, acc[i]);
      }
    }
    __syncthreads();  // every thread is done reading Ss before the next segment writes it
#pragma unroll
    for (int i = 0; i < 8; ++i) S[i] = acc[i];
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) starts[AT(n, i)] = S[i];
}
#undef AT
