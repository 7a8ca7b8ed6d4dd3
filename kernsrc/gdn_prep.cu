// gdn_prep.cu: the steps of the full forward (FLA's chunk_gated_delta_rule)
// that come before the core forward, in one kernel (gdn_prep_chunk), per
// chunk and value head: the L2 normalisation of q and k (when asked), the
// per-token log-gate (from the raw gate inputs, when asked), its
// chunk-local cumulative sum, and A, the inverse of the gated, beta-scaled
// K K^T of the chunk (K K^T on the tensor cores, everything after it fp32),
// written as A2 = A diag(beta) in fp16.
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
#ifndef GDN_PREP_HEADS
#define GDN_PREP_HEADS 1
#endif

namespace {
typedef Elem<GDN_FP16 != 0> E;
// Value heads per CTA, all of one key head (kernsrc.PrepHeads): step 0's
// k rows and step 2's K K^T are done once for all of them.
constexpr int kHeads = GDN_PREP_HEADS;

enum : int32_t {
  kGateInKernel = 1,  // g holds the raw a: g = -exp(A_log) softplus(a + dt_bias)
  kBetaFP32 = 2,      // beta is fp32 (else the dtype of q)
  kL2Norm = 4,        // q and k are L2-normalised here (written to qn and kn in fp16)
  // With kL2Norm: the core kernel normalises q and k itself (GDN_QK_NORM),
  // so no copies are written and q is not read; k is still normalised here
  // for K K^T.
  kNormInCore = 8,
};

#ifdef GDN_PREP_FLAG_GATE
static_assert(GDN_PREP_FLAG_GATE == kGateInKernel && GDN_PREP_FLAG_BETA_FP32 == kBetaFP32 &&
                  GDN_PREP_FLAG_L2NORM == kL2Norm && GDN_PREP_FLAG_NORM_IN_CORE == kNormInCore,
              "kernsrc.Prep*");
#endif

// softplus as FLA's gate takes it: log(1 + e^x), x itself above 20.
__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(__expf(x)); }
}  // namespace

// The block products below use the TF32 pair split (split_tf32, mma_tf32:
// gdn_common.cuh); the bit lost to its truncation is far below the fp16
// that A2 is stored in.
namespace {
// c = A B for a warp: A 16 rows (stride sa), B 8 columns (stride sb), both
// fp32 in shared memory, over k-steps ks0 <= ks < ks1 of 8. Three TF32
// products per step, the small ones first: lo(a) hi(b) + hi(a) lo(b) +
// hi(a) hi(b) leaves out only lo(a) lo(b) and the truncated bits of the
// lo parts, about 2^-20 of a term: close to fp32 FMA's sums, and 2^9 below
// the fp16 rounding of A2. Fragments (m16n8k8): a thread holds A's
// rows g, g + 8 at columns t, t + 4, and B's rows t, t + 4 at column g.
__device__ __forceinline__ void tf32_mma3(float c[4], const float* A, int sa, const float* B, int sb, int ks0, int ks1,
                                          int lane) {
  const int g = lane >> 2, t = lane & 3;
  c[0] = c[1] = c[2] = c[3] = 0.f;
  for (int ks = ks0; ks < ks1; ++ks) {
    const float* a = A + g * sa + 8 * ks + t;
    const float* b = B + (8 * ks + t) * sb + g;
    uint32_t ah[4], al[4], bh[2], bl[2];
    split_tf32(a[0], ah[0], al[0]);
    split_tf32(a[8 * sa], ah[1], al[1]);
    split_tf32(a[4], ah[2], al[2]);
    split_tf32(a[8 * sa + 4], ah[3], al[3]);
    split_tf32(b[0], bh[0], bl[0]);
    split_tf32(b[4 * sb], bh[1], bl[1]);
    mma_tf32(c, al, bh[0], bh[1]);
    mma_tf32(c, ah, bl[0], bl[1]);
    mma_tf32(c, ah, bh[0], bh[1]);
  }
}

// s c into C (stride sc), the accumulator's layout: rows g, g + 8, columns
// 2t, 2t + 1.
__device__ __forceinline__ void store_c(const float c[4], float* C, int sc, float s, int lane) {
  const int g = lane >> 2, t = lane & 3;
  *reinterpret_cast<float2*>(C + g * sc + 2 * t) = make_float2(s * c[0], s * c[1]);
  *reinterpret_cast<float2*>(C + (g + 8) * sc + 2 * t) = make_float2(s * c[2], s * c[3]);
}
}  // namespace

// A 128-vector held by a half-warp, eight 16-bit values (16 bytes) a lane,
// L2-normalised: x / sqrt(sum(x^2) + 1e-6) (FLA's l2norm), rounded to fp16
// whatever the input dtype (a unit vector's entries are at most 1, where
// fp16 keeps three more bits than bf16: the core forward then takes the
// copies as fp16, kernsrc.CoreBF16FP16QK, and K K^T here sees the very rows
// its products take). Every lane of the warp takes part (the two halves hold
// two vectors); a zero vector stays zero. The inverse norm is rsqrt_ftz
// (rsqrtf to the bit here; FLA's form too): its error of a few fp32 ulps
// vanishes in the 16-bit rounding, and it is one MUFU where 1 / sqrtf was a
// square root and a division with their slow paths (about 260 fewer
// instructions in the kernel).
namespace {
__device__ __forceinline__ uint4 l2_normalise(uint4 x) {
  const uint32_t* w = reinterpret_cast<const uint32_t*>(&x);
  float v[8];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    v[2 * e] = E::to_float((uint16_t)(w[e] & 0xffff));
    v[2 * e + 1] = E::to_float((uint16_t)(w[e] >> 16));
  }
  float ss = 0.f;
#pragma unroll
  for (int e = 0; e < 8; ++e) ss = fmaf(v[e], v[e], ss);
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = rsqrt_ftz(ss + 1e-6f);
  uint4 out;
  out.x = pack_fp16x2(v[0] * inv, v[1] * inv);
  out.y = pack_fp16x2(v[2] * inv, v[3] * inv);
  out.z = pack_fp16x2(v[4] * inv, v[5] * inv);
  out.w = pack_fp16x2(v[6] * inv, v[7] * inv);
  return out;
}
}  // namespace

// gdn_prep_chunk: one CTA of 128 threads per chunk and kHeads value heads
// of one key head does all of that chunk's preparation for them; steps 0
// and 2 are done once, 1 and 3-5 for each head:
//   0. with L2Norm, the chunk's k rows normalised as they arrive (every CTA
//      of the key head, for its own K K^T), and the CTA of the key head's
//      first value head writes them, and the chunk's normalised q rows, to
//      kn and qn for the core forward (a memory-bound pass folded into a
//      compute-bound kernel rather than two passes of their own), unless
//      the core normalises them itself (kNormInCore);
//   1. the log-gate of each token (from the raw input when asked) and its
//      chunk-local cumulative sum, by a warp scan, written to gcum;
//   2. K K^T of the chunk's k rows on the tensor cores (m16n8k16, exact
//      16-bit products, fp32 sums; warp w takes rows 16w..16w+15 and only
//      the column tiles that reach the diagonal), kept for every head;
//   3. L = StrictLower(diag(beta) K K^T * Gamma), Gamma_ij = exp(g_i - g_j)
//      (one exponential of the difference: exp(-g_j) alone overflows under
//      strong decay), zero from row len on;
//   4. X = (I + L)^-1 by 16 x 16 blocks: the four diagonal blocks D_r^-1 by
//      forward substitution (a column per thread, rows of L in registers),
//      then the two 32 x 32 halves' off-diagonal blocks and the lower-left
//      32 x 32 block, each as two products on the tensor cores (TF32 in
//      three passes, sums to about 2^-20): four dependent steps in all;
//   5. the chunk's rows of A2 = X diag(beta), fp16: what the core kernel's
//      products take (kernsrc.HopperFlagAPrepared).
// One 64 x 64 fp32 buffer M holds in turn the k rows, L, and X: X's blocks
// overwrite the blocks of L that are no longer needed (the diagonal ones
// after step 4a has read them, the others once the product that reads them
// is in Y): the CTA needs about 22 KB of shared memory (26 KB for several
// heads) and 64 registers a thread (__launch_bounds__ holds it there), so
// eight fit an SM
// (the kernel issues an instruction on about 2 of every 3 cycles of its
// schedulers, ncu: its instruction count, not memory, bounds it).
// Dynamic shared memory: kernsrc.PrepChunkSharedBytes.
namespace {
constexpr int kKs = 136;  // k row stride (16-bit values): ldmatrix rows land in distinct banks
constexpr int kLs = 68;   // M row stride (floats): 16-byte rows for float4 loads and stores
constexpr int kYs = 36;   // Y row stride (floats): like kLs, 4 mod 32, for conflict-free A fragments
constexpr int kKKdFloats = kHeads > 1 ? 4 * 256 : 0;  // K K^T's diagonal blocks, kept for several heads
constexpr int kPrepChunkSmem = 64 * kLs * 4 + 32 * kYs * 4 + kKKdFloats * 4 + 2 * 64 * 4 + 16;
static_assert(64 * kKs * 2 <= 64 * kLs * 4, "the k rows fit M");
}  // namespace
#ifdef GDN_PREP_CHUNK_SMEM
static_assert(GDN_PREP_CHUNK_SMEM == kPrepChunkSmem, "kernsrc.PrepChunkSharedBytes");
#endif

extern "C" __global__ void __launch_bounds__(128, 8) gdn_prep_chunk(
    const uint16_t* __restrict__ q, const uint16_t* __restrict__ k, uint16_t* __restrict__ qn,
    uint16_t* __restrict__ kn, const void* __restrict__ beta, const float* __restrict__ g,
    const float* __restrict__ a_log, const float* __restrict__ dt_bias, float* __restrict__ gcum,
    uint16_t* __restrict__ A2, const int* __restrict__ chunks, int Hq, int Hv, int flags) {
  extern __shared__ float4 smem_raw[];
  float* M = reinterpret_cast<float*>(smem_raw);  // [64][kLs]: k rows, then L, then X
  uint16_t* Ks = reinterpret_cast<uint16_t*>(M);  // [64][kKs]
  float* Y = M + 64 * kLs;                        // [32][kYs]: the inner products of 4b
  float2* KKd = reinterpret_cast<float2*>(Y + 32 * kYs);  // kHeads > 1: [4 warps][2][2][32 lanes]
  float* gv = Y + 32 * kYs + kKKdFloats;          // [64]
  float* bv = gv + 64;                            // [64]
  float* wsum = bv + 64;                          // [1]
  const int c = blockIdx.x, h0 = kHeads * blockIdx.y, hk = h0 / (Hv / Hq);
  int t = threadIdx.x, warp = t >> 5, lane = t & 31, gq = lane >> 2, tq = lane & 3;  // see the head loop
  const int b = chunks[2 * c], len = chunks[2 * c + 1] - b;

  // The gate inputs of token t for value head h (step 1), loaded a step
  // ahead of their use (the first head's before step 0), so that their
  // round trip overlaps other work rather than preceding it.
  auto load_gates = [&](int h, float& x, float& bb) {
    x = bb = 0.f;
    if (t < len && t < 64) {
      const long long at = (long long)(b + t) * Hv + h;
      x = g[at];
      bb = (flags & kBetaFP32) ? static_cast<const float*>(beta)[at] : E::to_float(static_cast<const uint16_t*>(beta)[at]);
    }
  };
  float x, bb;
  load_gates(h0, x, bb);

  // 0. The chunk's k rows (zero past its end), normalised with L2Norm: row
  // i = t / 16 + 8 u in a half-warp, 16 bytes a lane, four rows' loads out
  // before the first use. The CTA of the key head's first value head
  // writes them, and q's rows likewise (loaded beside k's), to kn and qn
  // for the core forward.
  const bool l2 = flags & kL2Norm, writer = l2 && !(flags & kNormInCore) && h0 % (Hv / Hq) == 0;
#pragma unroll 1
  for (int half = 0; half < 2; ++half) {
    uint4 xk[4], xq[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int e = t + 128 * (4 * half + u), i = e >> 4, part = e & 15;
      const long long row = ((long long)(b + i) * Hq + hk) * 128;
      xk[u] = i < len ? reinterpret_cast<const uint4*>(k + row)[part] : make_uint4(0, 0, 0, 0);
      xq[u] = writer && i < len ? reinterpret_cast<const uint4*>(q + row)[part] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int e = t + 128 * (4 * half + u), i = e >> 4, part = e & 15;
      const long long row = ((long long)(b + i) * Hq + hk) * 128;
      if (l2) xk[u] = l2_normalise(xk[u]);
      *reinterpret_cast<uint4*>(Ks + i * kKs + part * 8) = xk[u];
      if (writer) {
        xq[u] = l2_normalise(xq[u]);
        if (i < len) {
          reinterpret_cast<uint4*>(kn + row)[part] = xk[u];
          reinterpret_cast<uint4*>(qn + row)[part] = xq[u];
        }
      }
    }
  }

  // 1. Gates of value head h: token t of the chunk in thread t (two warps),
  // an inclusive warp scan, then warp 1 adds warp 0's total. For the first
  // head its barrier also completes step 0's k rows; for the others a
  // barrier before the call orders the last head's step 5 before bv is
  // rewritten. gv is complete after the next barrier (before step 3).
  auto gates = [&](int h, int t, int lane) {
    if (t < 64) {
      if (t < len && (flags & kGateInKernel)) x = -__expf(a_log[h]) * softplus(x + dt_bias[h]);
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const float y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
      }
      if (t == 31) *wsum = x;
      bv[t] = bb;
    }
    __syncthreads();
    if (t < 64) {
      if (t >= 32) x += *wsum;
      gv[t] = x;
      if (t < len) gcum[(long long)(b + t) * Hv + h] = x;
    }
  };
  gates(h0, t, lane);

  // 2. K K^T, rows 16 warp.., column tiles up to the diagonal block.
  float acc[8][4];
#pragma unroll
  for (int n = 0; n < 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    uint32_t a[4];
    load_a(a, Ks, kKs, 16 * warp, 16 * ks, lane);
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      if (np > warp) break;
      uint32_t bt[4];
      load_bt_pair(bt, Ks, kKs, 16 * ks, 16 * np, lane);
      if (GDN_FP16 != 0 || l2) {  // fp16 rows: the input's, or normalised (l2_normalise)
        mma_16816<true>(acc[2 * np], a, bt[0], bt[1]);
        mma_16816<true>(acc[2 * np + 1], a, bt[2], bt[3]);
      } else {
        mma_16816<false>(acc[2 * np], a, bt[0], bt[1]);
        mma_16816<false>(acc[2 * np + 1], a, bt[2], bt[3]);
      }
    }
  }
  __syncthreads();  // gv complete; every warp done with the k rows (L replaces them)

  // With several value heads, K K^T is kept for each head's step 3, every
  // thread's own entries where it reads them back: the blocks left of the
  // diagonal at their mirror images in M's blocks right of it (K K^T is
  // symmetric, and no later step writes or reads those blocks: L and X are
  // lower triangular, and step 5 masks them), the diagonal blocks in KKd,
  // a float2 a lane. (Kept in registers instead, they spill.) A mirrored
  // entry's bank is 8 tq + gq (+ 4): the scalar accesses are free of
  // conflicts.
  if (kHeads > 1) {
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      if (n > 2 * warp + 1) break;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = 16 * warp + gq + 8 * r, j = 8 * n + 2 * tq;
        if (n < 2 * warp) {
          M[j * kLs + i] = acc[n][2 * r];
          M[(j + 1) * kLs + i] = acc[n][2 * r + 1];
        } else {
          KKd[((warp * 2 + (n & 1)) * 2 + r) * 32 + lane] = make_float2(acc[n][2 * r], acc[n][2 * r + 1]);
        }
      }
    }
  }

#pragma unroll 1
  for (int vh = 0; vh < kHeads; ++vh) {
    const int h = h0 + vh;
    // With several heads, the thread's indices anew for each, hidden from
    // the optimiser: ptxas would otherwise keep every address derived from
    // them live across the loop, and spill at 64 registers.
    if (kHeads > 1) {
      asm volatile("" : "+r"(t));
      warp = t >> 5, lane = t & 31, gq = lane >> 2, tq = lane & 3;
    }
    if (kHeads > 1 && vh > 0) {
      __syncthreads();  // the last head's step 5 done with M and bv
      gates(h, t, lane);
      __syncthreads();  // gv complete
    }
    float x_next = 0.f, bb_next = 0.f;
    if (kHeads > 1 && vh + 1 < kHeads) load_gates(h + 1, x_next, bb_next);

    // 3. L into M (zero above the diagonal and past len; with several
    // heads only the blocks on and left of the diagonal), two adjacent
    // columns a store.
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      if (kHeads > 1 && n > 2 * warp + 1) break;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = 16 * warp + gq + 8 * r, j = 8 * n + 2 * tq;
        float2 kk = make_float2(acc[n][2 * r], acc[n][2 * r + 1]);
        if (kHeads > 1)
          kk = n < 2 * warp ? make_float2(M[j * kLs + i], M[(j + 1) * kLs + i])
                            : KKd[((warp * 2 + (n & 1)) * 2 + r) * 32 + lane];
        float2 l;
        l.x = (j < i && i < len) ? bv[i] * kk.x * __expf(gv[i] - gv[j]) : 0.f;
        l.y = (j + 1 < i && i < len) ? bv[i] * kk.y * __expf(gv[i] - gv[j + 1]) : 0.f;
        *reinterpret_cast<float2*>(M + i * kLs + j) = l;
      }
    }
    __syncthreads();

    // 4a. Diagonal blocks (threads 0..63: block t/16, column t%16): x_i = 1 at
    // the diagonal, else -sum_{m<i} L_im x_m (x_m = 0 above the column), each
    // row of the block's L read into registers before its dependent sums.
    // Written over L's diagonal blocks once all are read. (The blocks right
    // of the diagonal hold step 3's zeros with one head, K K^T's mirror
    // with several: only step 5 reads them, and it masks them.)
    float xs[16];
    const int d0 = 16 * (t >> 4), col = t & 15;
    if (t < 64) {
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        float s = 0.f;
#pragma unroll
        for (int m = 0; m < i; m += 4) {
          const float4 l = *reinterpret_cast<const float4*>(M + (d0 + i) * kLs + d0 + m);
          s = fmaf(l.x, xs[m], s);
          if (m + 1 < i) s = fmaf(l.y, xs[m + 1], s);
          if (m + 2 < i) s = fmaf(l.z, xs[m + 2], s);
          if (m + 3 < i) s = fmaf(l.w, xs[m + 3], s);
        }
        xs[i] = i == col ? 1.f : -s;
      }
    }
    __syncthreads();
    if (t < 64) {
#pragma unroll
      for (int i = 0; i < 16; ++i) M[(d0 + i) * kLs + d0 + col] = xs[i];
    }
    __syncthreads();

    // 4b. The 32 x 32 inverses of the two halves, then the whole: with D the
    // diagonal blocks' inverses (4a),
    //   X[2h+1, 2h] = -D_{2h+1} (L[2h+1, 2h] D_{2h})       (16 x 16 blocks, h = 0, 1)
    //   X[23, 01]   = -X[23] (L[23, 01] X[01])             (32 x 32 blocks)
    // each product on the tensor cores in three TF32 passes (tf32_mma3: as
    // exact as fp32 FMA for these sums), the inner product into Y first, the
    // outer one over the L block it replaces. Each step's four warps share
    // the work evenly; the k-steps that meet only the zeros of a triangular
    // factor are skipped.
    {
      float c[4];
      // Y[16h.., 8nt..] = L[2h+1, 2h] D_{2h}, n-tile nt of half h (warp 2h + nt);
      // D_{2h}'s columns 8nt.. are zero above row 8nt.
      const int half = warp >> 1, nt = warp & 1, d = 32 * half;
      tf32_mma3(c, M + (d + 16) * kLs + d, kLs, M + d * kLs + d + 8 * nt, kLs, nt, 2, lane);
      store_c(c, Y + 16 * half * kYs + 8 * nt, kYs, 1.f, lane);
      __syncthreads();
      tf32_mma3(c, M + (d + 16) * kLs + d + 16, kLs, Y + 16 * half * kYs + 8 * nt, kYs, 0, 2, lane);
      store_c(c, M + (d + 16) * kLs + d + 8 * nt, kLs, -1.f, lane);
      __syncthreads();
      // Y[16mt.., 8nt..] = L[23, 01] X[01]: warp w takes n-tile w of the first
      // m-tile and 3 - w of the second (X[01]'s columns 8nt.. are zero above
      // row 8nt: 5 k-steps a warp).
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int mt = u, n = u ? 3 - warp : warp;
        tf32_mma3(c, M + (32 + 16 * mt) * kLs, kLs, M + 8 * n, kLs, n, 4, lane);
        store_c(c, Y + 16 * mt * kYs + 8 * n, kYs, 1.f, lane);
      }
      __syncthreads();
      // X[23, 01] = -X[23] Y: X[23]'s rows 16mt.. end at column 16mt + 15.
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int mt = u, n = u ? 3 - warp : warp;
        tf32_mma3(c, M + (32 + 16 * mt) * kLs + 32, kLs, Y + 8 * n, kYs, 0, 2 * mt + 2, lane);
        store_c(c, M + (32 + 16 * mt) * kLs + 8 * n, kLs, -1.f, lane);
      }
      __syncthreads();
    }

    // 5. The chunk's rows of A2 = X diag(beta) in fp16, the operand the core
    // kernel's products take (it would otherwise build it from an fp32 A, with
    // the same multiply and the same rounding): row i for token b + i, four
    // columns at 4m and four at 32 + 4m a thread (m = e % 8), so that the
    // eight threads of a row read 128 contiguous bytes of M a load (eight
    // columns at 8m, 16-byte loads 32 bytes apart, met in pairs in the same
    // banks: twice the wavefronts, ncu).
    for (int e = t; e < len * 8; e += 128) {
      const int i = e >> 3, m = e & 7;
      uint16_t* row = A2 + ((long long)(b + i) * Hv + h) * 64;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int j = 32 * half + 4 * m;
        uint2 y = make_uint2(0, 0);  // right of the diagonal block (kHeads > 1: K K^T there)
        if (kHeads == 1 || j >> 4 <= i >> 4) {
          const float4 x = *reinterpret_cast<const float4*>(M + i * kLs + j);
          const float4 bj = *reinterpret_cast<const float4*>(bv + j);
          y.x = pack_fp16x2(x.x * bj.x, x.y * bj.y);
          y.y = pack_fp16x2(x.z * bj.z, x.w * bj.w);
        }
        reinterpret_cast<uint2*>(row + j)[0] = y;
      }
    }
    x = x_next, bb = bb_next;
  }
}
