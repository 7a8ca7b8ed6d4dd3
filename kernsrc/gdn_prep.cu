// gdn_prep.cu: the steps of the full forward (FLA's chunk_gated_delta_rule)
// that come before the core forward: the per-token log-gate (from the raw
// gate inputs, when asked) and its chunk-local cumulative sum, the L2
// normalisation of q and k (when asked), and A, the inverse of the gated,
// beta-scaled K K^T of each chunk. Everything here is fp32 and plain CUDA
// cores: this is a correctness-first pass ahead of the tensor-core kernel.
//
// Chunks are listed by the host as int32 (begin, end) token pairs (flat
// indices into the B*T tokens): every sequence's 64-token chunks, the last
// one possibly shorter, no chunk across two sequences.
//
// Defines: GDN_FP16 (q and k are fp16, else bf16).
#include "gdn_common.cuh"

#ifndef GDN_FP16
#define GDN_FP16 0
#endif

namespace {
typedef Elem<GDN_FP16 != 0> E;

enum : int32_t {
  kGateInKernel = 1,  // g holds the raw a: g = -exp(A_log) softplus(a + dt_bias)
  kBetaFP32 = 2,      // beta is fp32 (else the dtype of q)
};

#ifdef GDN_PREP_FLAG_GATE
static_assert(GDN_PREP_FLAG_GATE == kGateInKernel && GDN_PREP_FLAG_BETA_FP32 == kBetaFP32, "kernsrc.Prep*");
#endif

// softplus as FLA's gate takes it: log(1 + e^x), x itself above 20.
__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(__expf(x)); }
}  // namespace

// gdn_prep_gates: one thread per (chunk, value head) writes the chunk-local
// cumulative sum of the log-gate, in token order. Grid ceil(chunks * Hv /
// 128) x 128 threads.
extern "C" __global__ void __launch_bounds__(128) gdn_prep_gates(const float* __restrict__ g,
                                                                  const float* __restrict__ a_log,
                                                                  const float* __restrict__ dt_bias,
                                                                  float* __restrict__ gcum,
                                                                  const int* __restrict__ chunks, int nchunks,
                                                                  int Hv, int flags) {
  const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long long)nchunks * Hv) return;
  const int c = (int)(idx / Hv), h = (int)(idx % Hv);
  const int b = chunks[2 * c], e = chunks[2 * c + 1];
  const bool gate = flags & kGateInKernel;
  const float decay = gate ? -__expf(a_log[h]) : 0.f, bias = gate ? dt_bias[h] : 0.f;
  float s = 0.f;
  for (int t = b; t < e; ++t) {
    const float x = g[(long long)t * Hv + h];
    s += gate ? decay * softplus(x + bias) : x;
    gcum[(long long)t * Hv + h] = s;
  }
}

// gdn_prep_l2norm: one warp per 128-vector (a token of a head) of x, written
// to y as x / sqrt(sum(x^2) + 1e-6), rounded to the input dtype. Grid
// ceil(rows / 4) x 128 threads.
extern "C" __global__ void __launch_bounds__(128) gdn_prep_l2norm(const uint16_t* __restrict__ x,
                                                                   uint16_t* __restrict__ y, long long rows) {
  const long long row = (long long)blockIdx.x * 4 + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const uint2 in = reinterpret_cast<const uint2*>(x + row * 128)[lane];
  float v[4] = {E::to_float((uint16_t)(in.x & 0xffff)), E::to_float((uint16_t)(in.x >> 16)),
                E::to_float((uint16_t)(in.y & 0xffff)), E::to_float((uint16_t)(in.y >> 16))};
  float ss = v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = 1.f / sqrtf(ss + 1e-6f);
  uint2 out;
  out.x = E::pack2(v[0] * inv, v[1] * inv);
  out.y = E::pack2(v[2] * inv, v[3] * inv);
  reinterpret_cast<uint2*>(y + row * 128)[lane] = out;
}

// gdn_prep_solve: one CTA of 256 threads per (chunk, value head) writes the
// chunk's rows of A = (I + StrictLower(diag(beta) K K^T * Gamma))^-1, Gamma_ij
// = exp(g_i - g_j) (one exponential of the difference: exp(-g_j) alone
// overflows under strong decay), zero past the chunk's end. K K^T in fp32
// from the 16-bit k; the unit lower triangular inverse by forward
// substitution, one column per thread. Dynamic shared memory:
// kPrepSolveSmem bytes.
namespace {
constexpr int kKs = 136;  // k row stride (16-bit values): 272 bytes, rows 8 words apart in banks
constexpr int kLs = 65;   // L and X row stride (floats)
}  // namespace

extern "C" __global__ void __launch_bounds__(256) gdn_prep_solve(const uint16_t* __restrict__ k,
                                                                  const void* __restrict__ beta,
                                                                  const float* __restrict__ gcum,
                                                                  float* __restrict__ A,
                                                                  const int* __restrict__ chunks, int Hq, int Hv,
                                                                  int flags) {
  extern __shared__ float4 smem_raw[];
  uint16_t* Ks = reinterpret_cast<uint16_t*>(smem_raw);                  // [64][kKs]
  float* L = reinterpret_cast<float*>(Ks + 64 * kKs);                    // [64][kLs]
  float* X = L + 64 * kLs;                                               // [64][kLs]
  float* gv = X + 64 * kLs;                                              // [64]
  float* bv = gv + 64;                                                   // [64]
  const int c = blockIdx.x, h = blockIdx.y, hk = h / (Hv / Hq), t = threadIdx.x;
  const int b = chunks[2 * c], len = chunks[2 * c + 1] - b;

  // k rows of the chunk (zero past its end), g and beta.
  for (int q = t; q < 64 * 16; q += 256) {
    const int i = q >> 4, part = q & 15;
    uint4 w = make_uint4(0, 0, 0, 0);
    if (i < len) w = reinterpret_cast<const uint4*>(k + ((long long)(b + i) * Hq + hk) * 128)[part];
    *reinterpret_cast<uint4*>(Ks + i * kKs + part * 8) = w;
  }
  if (t < 64) {
    float gg = 0.f, bb = 0.f;
    if (t < len) {
      const long long at = (long long)(b + t) * Hv + h;
      gg = gcum[at];
      bb = (flags & kBetaFP32) ? static_cast<const float*>(beta)[at] : E::to_float(static_cast<const uint16_t*>(beta)[at]);
    }
    gv[t] = gg, bv[t] = bb;
  }
  __syncthreads();

  // L = strictly lower beta_i (k_i . k_j) exp(g_i - g_j): 16 entries a thread.
  for (int q = t; q < 64 * 64; q += 256) {
    const int i = q >> 6, j = q & 63;
    float v = 0.f;
    if (j < i && i < len) {
      float s = 0.f;
#pragma unroll 8
      for (int d = 0; d < 128; d += 2) {
        const uint32_t ki = *reinterpret_cast<const uint32_t*>(Ks + i * kKs + d);
        const uint32_t kj = *reinterpret_cast<const uint32_t*>(Ks + j * kKs + d);
        s = fmaf(E::to_float((uint16_t)(ki & 0xffff)), E::to_float((uint16_t)(kj & 0xffff)), s);
        s = fmaf(E::to_float((uint16_t)(ki >> 16)), E::to_float((uint16_t)(kj >> 16)), s);
      }
      v = bv[i] * s * __expf(gv[i] - gv[j]);
    }
    L[i * kLs + j] = v;
  }
  __syncthreads();

  // X = (I + L)^-1, column j by thread j: X_jj = 1, and for i > j
  // X_ij = -(L_ij + sum_{j < m < i} L_im X_mj).
  if (t < 64) {
    const int j = t;
    for (int i = 0; i < 64; ++i) {
      float x = i == j ? 1.f : 0.f;
      if (i > j) {
        float s = L[i * kLs + j];
        for (int m = j + 1; m < i; ++m) s = fmaf(L[i * kLs + m], X[m * kLs + j], s);
        x = -s;
      }
      X[i * kLs + j] = x;
    }
  }
  __syncthreads();

  // The chunk's rows of A: row i of the matrix for token b + i.
  for (int q = t; q < len * 64; q += 256) {
    const int i = q >> 6, j = q & 63;
    A[((long long)(b + i) * Hv + h) * 64 + j] = X[i * kLs + j];
  }
}
