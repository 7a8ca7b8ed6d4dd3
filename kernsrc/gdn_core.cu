// gdn_core.cu: the Gated DeltaNet chunked-prefill core forward, first version.
//
// Given q, k, v, the chunk-local cumulative log-gate g, beta and the per-chunk
// matrix A = (I + StrictLower(diag(beta) K K^T * Gamma))^-1, it computes per
// 64-token chunk (shared/SPEC.md, "Chunked form"):
//
//   U   = K @ S                      W  = beta * (V - exp(g) * U)
//   Vn  = A @ W                      P  = Lower(Q K^T * Gamma)
//   O   = scale * (exp(g) * (Q @ S) + P @ Vn)
//   S  <- exp(g_last) * S + (K * exp(g_last - g))^T @ Vn
//
// One CTA of four warps owns one (sequence, value head, value tile of BV
// columns) and walks its chunks in order; the fp32 state tile S (128 x BV)
// lives in the warps' tensor-core accumulators for the whole sequence. Every
// matrix product runs on the tensor cores (mma.sync m16n8k16, fp32
// accumulate, fp16 operands); operands are staged in padded shared memory (no bank
// conflicts for ldmatrix). Phases are separated by __syncthreads: simple and
// exact first; overlap and asynchronous copies come in later versions.
//
// Compile-time choices (-D): GDN_FP16 (0: bf16, 1: fp16 inputs and output),
// GDN_BV (value-tile width, 32 or 64).
#include "gdn_common.cuh"

#ifndef GDN_FP16
#define GDN_FP16 0
#endif
#ifndef GDN_BV
#define GDN_BV 64
#endif

// GdnCoreParams is laid out byte for byte as the Go side packs it
// (package gdn, coreParams): ten pointers, then 32-bit fields.
struct GdnCoreParams {
  const uint16_t* q;     // [tokens, Hq, 128]
  const uint16_t* k;     // [tokens, Hq, 128]
  const uint16_t* v;     // [tokens, Hv, 128]
  const float* g;        // [tokens, Hv] chunk-local cumulative log-gate
  const void* beta;      // [tokens, Hv] fp32 or the input dtype (flag)
  const void* A;         // [tokens, Hv, 64] fp32 or bf16 (flag)
  const float* h0;       // [N, Hv, 128, 128] or null
  uint16_t* o;           // [tokens, Hv, 128]
  float* ht;             // [N, Hv, 128, 128] or null
  const void* cu_seqlens;  // [N+1] int32 or int64 (flag), or null: sequences of T tokens
  float scale;
  int32_t T;   // tokens per sequence when cu_seqlens is null
  int32_t Hq;
  int32_t Hv;
  int32_t N;   // number of sequences
  int32_t flags;
};

enum : int32_t {
  kBetaFP32 = 1,      // beta is fp32 (else the input dtype)
  kAFP32 = 2,         // A is fp32 (else bf16)
  kSeqlensInt64 = 4,  // cu_seqlens is int64 (else int32)
};

namespace {

constexpr int kD = 128;        // head dimension
constexpr int kC = 64;         // chunk length
constexpr int kBV = GDN_BV;    // value-tile width
constexpr int kThreads = 128;  // four warps
constexpr int kLdD = kD + 8;   // padded leading dimensions (16 bytes) for conflict-free ldmatrix
constexpr int kLdC = kC + 8;
constexpr int kLdV = kBV + 8;
constexpr int kNT = kBV / 8;   // n-tiles of 8 across a value tile

// E is the input/output dtype. Every tensor-core operand, whatever E, is
// fp16: q and k convert exactly, and the intermediates (the state copy, W,
// Vn, A, P, the decayed keys) keep 3 more mantissa bits than bf16 would, which
// is 8x less rounding error in o and ht at no cost. Values must stay within
// fp16's range (|x| < 65504): true of normalised q and k, unit-scale v and
// the state of the delta rule, which beta <= 1 keeps bounded by the values
// it stores.
typedef Elem<GDN_FP16 != 0> E;
constexpr bool kConvert = GDN_FP16 == 0;  // bf16 q and k need converting

// Shared memory of one CTA, in 16-bit elements unless said otherwise.
struct Smem {
  uint16_t q[kC * kLdD];     // fp16
  uint16_t k[kC * kLdD];     // fp16
  uint16_t kd[kC * kLdD];   // K * exp(g_last - g), rows past the chunk zero
  uint16_t s[kD * kLdV];    // the state tile rounded to 16 bits, operand of K@S and Q@S
  uint16_t v[kC * kLdV];    // input dtype, only read as floats
  uint16_t w[kC * kLdV];    // W  = beta * (V - exp(g) * U)
  uint16_t vn[kC * kLdV];   // Vn = A @ W
  uint16_t a[kC * kLdC];    // A, masked to its lower triangle and the chunk
  uint16_t p[kC * kLdC];    // P = Lower(Q K^T * Gamma)
  float g[kC];
  float beta[kC];
  float eg[kC];             // exp(g), zero past the chunk
};

// The host sizes the dynamic shared memory from its own formula
// (kernsrc.CoreSharedBytes) and passes it here, so a layout change that
// forgets the Go side fails to compile instead of overrunning at run time.
#ifdef GDN_SMEM_BYTES
static_assert(sizeof(Smem) == GDN_SMEM_BYTES, "kernsrc.CoreSharedBytes disagrees with struct Smem");
#endif

GDN_DEVICE float read_beta(const GdnCoreParams& p, int64_t idx) {
  if (p.flags & kBetaFP32) return static_cast<const float*>(p.beta)[idx];
  return E::to_float(static_cast<const uint16_t*>(p.beta)[idx]);
}

GDN_DEVICE float read_a(const GdnCoreParams& p, int64_t idx) {
  if (p.flags & kAFP32) return static_cast<const float*>(p.A)[idx];
  return bf16_to_float(static_cast<const uint16_t*>(p.A)[idx]);
}

// Copies rows [0, len) of a [64, 8*vecs_per_row] slab of 16-bit elements
// whose rows are row_stride elements apart into shared memory with leading
// dimension ld, writing zeros to rows past len. With TO_FP16 the elements
// are input-dtype values converted to fp16 (exact for bf16 values of
// magnitude 2^-14 to 65504, the range of normalised q and k).
template <bool TO_FP16>
GDN_DEVICE void load_rows(uint16_t* dst, int ld, const uint16_t* src, int64_t row_stride, int vecs_per_row,
                          int len) {
  const int total = kC * vecs_per_row;
  for (int i = threadIdx.x; i < total; i += kThreads) {
    const int r = i / vecs_per_row, c = (i % vecs_per_row) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r < len) val = *reinterpret_cast<const uint4*>(src + r * row_stride + c);
    if (TO_FP16) {
      uint32_t* w = reinterpret_cast<uint32_t*>(&val);
#pragma unroll
      for (int j = 0; j < 4; ++j)
        w[j] = pack_fp16x2(E::to_float((uint16_t)(w[j] & 0xffff)), E::to_float((uint16_t)(w[j] >> 16)));
    }
    *reinterpret_cast<uint4*>(dst + r * ld + c) = val;
  }
}

// Stores an m16 x n8 accumulator tile, converted to 16 bits, at (r0, c0) of a
// shared-memory matrix with leading dimension ld.
GDN_DEVICE void store_tile(uint16_t* M, int ld, int r0, int c0, const float c[4], int lane) {
  const int r = r0 + (lane >> 2), col = c0 + 2 * (lane & 3);
  *reinterpret_cast<uint32_t*>(M + r * ld + col) = pack_fp16x2(c[0], c[1]);
  *reinterpret_cast<uint32_t*>(M + (r + 8) * ld + col) = pack_fp16x2(c[2], c[3]);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1) gdn_core_fwd(const GdnCoreParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gid = lane >> 2, tig = lane & 3;
  const int tiles = kD / kBV;
  const int h = blockIdx.x / tiles;          // value head
  const int v0 = (blockIdx.x % tiles) * kBV;  // first value column of the tile
  const int n = blockIdx.y;                   // sequence
  const int hk = h / (p.Hv / p.Hq);           // its query/key head (GVA)

  int64_t bos, eos;
  if (p.cu_seqlens == nullptr) {
    bos = (int64_t)n * p.T;
    eos = bos + p.T;
  } else if (p.flags & kSeqlensInt64) {
    bos = static_cast<const int64_t*>(p.cu_seqlens)[n];
    eos = static_cast<const int64_t*>(p.cu_seqlens)[n + 1];
  } else {
    bos = static_cast<const int32_t*>(p.cu_seqlens)[n];
    eos = static_cast<const int32_t*>(p.cu_seqlens)[n + 1];
  }

  // The state tile: warp w owns state rows [32w, 32w+32) as two m16 tiles.
  float S[2][kNT][4];
  const int64_t state_base = ((int64_t)n * p.Hv + h) * kD * kD + v0;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const int r = 32 * warp + 16 * mt + gid, c = 8 * nt + 2 * tig;
      if (p.h0 != nullptr) {
        const float2 lo = *reinterpret_cast<const float2*>(p.h0 + state_base + (int64_t)r * kD + c);
        const float2 hi = *reinterpret_cast<const float2*>(p.h0 + state_base + (int64_t)(r + 8) * kD + c);
        S[mt][nt][0] = lo.x, S[mt][nt][1] = lo.y, S[mt][nt][2] = hi.x, S[mt][nt][3] = hi.y;
      } else {
        S[mt][nt][0] = S[mt][nt][1] = S[mt][nt][2] = S[mt][nt][3] = 0.f;
      }
    }

  const int64_t qk_stride = (int64_t)p.Hq * kD;  // elements between tokens
  const int64_t v_stride = (int64_t)p.Hv * kD;
  const int m0 = 16 * warp;  // this warp's rows of every 64-row product

  for (int64_t cs = bos; cs < eos; cs += kC) {
    const int len = (int)min((int64_t)kC, eos - cs);

    // --- 1. Stage the chunk's inputs; rows past its end become zeros.
    load_rows<kConvert>(sm.q, kLdD, p.q + cs * qk_stride + hk * kD, qk_stride, kD / 8, len);
    load_rows<kConvert>(sm.k, kLdD, p.k + cs * qk_stride + hk * kD, qk_stride, kD / 8, len);
    load_rows<false>(sm.v, kLdV, p.v + cs * v_stride + h * kD + v0, v_stride, kBV / 8, len);
    for (int i = threadIdx.x; i < kC; i += kThreads) {
      const bool in = i < len;
      const int64_t idx = (cs + i) * p.Hv + h;
      sm.g[i] = in ? p.g[idx] : 0.f;
      sm.beta[i] = in ? read_beta(p, idx) : 0.f;
    }
    // A, kept to its lower triangle inside the chunk: columns past the chunk
    // hold anything (SPEC), and 0 * NaN would poison the product.
    for (int i = threadIdx.x; i < kC * kC / 2; i += kThreads) {
      const int r = i / (kC / 2), c = 2 * (i % (kC / 2));
      const int64_t base = ((cs + r) * p.Hv + h) * kC + c;
      const float a0 = (r < len && c <= r) ? read_a(p, base) : 0.f;
      const float a1 = (r < len && c + 1 <= r) ? read_a(p, base + 1) : 0.f;
      *reinterpret_cast<uint32_t*>(sm.a + r * kLdC + c) = pack_fp16x2(a0, a1);
    }
    __syncthreads();

    // --- 2. Gate factors, the decayed keys and the 16-bit state operand.
    const float g_last = sm.g[len - 1];
    for (int i = threadIdx.x; i < kC * kD / 2; i += kThreads) {
      const int r = i / (kD / 2), c = 2 * (i % (kD / 2));
      const float f = r < len ? __expf(g_last - sm.g[r]) : 0.f;
      const uint32_t kk = *reinterpret_cast<const uint32_t*>(sm.k + r * kLdD + c);
      *reinterpret_cast<uint32_t*>(sm.kd + r * kLdD + c) =
          pack_fp16x2(fp16_to_float((uint16_t)(kk & 0xffff)) * f, fp16_to_float((uint16_t)(kk >> 16)) * f);
    }
    for (int i = threadIdx.x; i < kC; i += kThreads) sm.eg[i] = i < len ? __expf(sm.g[i]) : 0.f;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) store_tile(sm.s, kLdV, 32 * warp + 16 * mt, 8 * nt, S[mt][nt], lane);
    __syncthreads();

    // --- 3. Per warp, rows [m0, m0+16): U = K@S and QS = Q@S (which starts
    // O), then W from U; then P = Q K^T. Two passes keep fewer accumulators
    // live next to the state.
    float O[kNT][4];
    const int r_lo = m0 + gid, r_hi = r_lo + 8;
    {
      float U[kNT][4];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) U[nt][0] = U[nt][1] = U[nt][2] = U[nt][3] = 0.f;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) O[nt][0] = O[nt][1] = O[nt][2] = O[nt][3] = 0.f;
#pragma unroll 2
      for (int ks = 0; ks < kD / 16; ++ks) {
        uint32_t aq[4], ak[4], b[4];
        load_a(aq, sm.q, kLdD, m0, 16 * ks, lane);
        load_a(ak, sm.k, kLdD, m0, 16 * ks, lane);
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          load_b_pair(b, sm.s, kLdV, 16 * ks, 16 * np, lane);
          mma_16816<true>(U[2 * np], ak, b[0], b[1]);
          mma_16816<true>(U[2 * np + 1], ak, b[2], b[3]);
          mma_16816<true>(O[2 * np], aq, b[0], b[1]);
          mma_16816<true>(O[2 * np + 1], aq, b[2], b[3]);
        }
      }
      const float eg_lo = sm.eg[r_lo], eg_hi = sm.eg[r_hi];
      const float b_lo = sm.beta[r_lo], b_hi = sm.beta[r_hi];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int c = 8 * nt + 2 * tig;
        float w[4];
        w[0] = b_lo * (E::to_float(sm.v[r_lo * kLdV + c]) - eg_lo * U[nt][0]);
        w[1] = b_lo * (E::to_float(sm.v[r_lo * kLdV + c + 1]) - eg_lo * U[nt][1]);
        w[2] = b_hi * (E::to_float(sm.v[r_hi * kLdV + c]) - eg_hi * U[nt][2]);
        w[3] = b_hi * (E::to_float(sm.v[r_hi * kLdV + c + 1]) - eg_hi * U[nt][3]);
        store_tile(sm.w, kLdV, m0, 8 * nt, w, lane);
        O[nt][0] *= eg_lo, O[nt][1] *= eg_lo, O[nt][2] *= eg_hi, O[nt][3] *= eg_hi;
      }
    }
    {
      float P[kC / 8][4];
#pragma unroll
      for (int nt = 0; nt < kC / 8; ++nt) P[nt][0] = P[nt][1] = P[nt][2] = P[nt][3] = 0.f;
#pragma unroll 2
      for (int ks = 0; ks < kD / 16; ++ks) {
        uint32_t aq[4], b[4];
        load_a(aq, sm.q, kLdD, m0, 16 * ks, lane);
#pragma unroll
        for (int np = 0; np < kC / 16; ++np) {
          load_bt_pair(b, sm.k, kLdD, 16 * ks, 16 * np, lane);
          mma_16816<true>(P[2 * np], aq, b[0], b[1]);
          mma_16816<true>(P[2 * np + 1], aq, b[2], b[3]);
        }
      }
      const float g_lo = sm.g[r_lo], g_hi = sm.g[r_hi];
#pragma unroll
      for (int nt = 0; nt < kC / 8; ++nt) {
        const int c = 8 * nt + 2 * tig;
        float pm[4];
        // Gamma only where it multiplies a kept entry: exp of a difference,
        // never of -g alone (it would overflow under strong decay).
        pm[0] = (c <= r_lo && c < len) ? P[nt][0] * __expf(g_lo - sm.g[c]) : 0.f;
        pm[1] = (c + 1 <= r_lo && c + 1 < len) ? P[nt][1] * __expf(g_lo - sm.g[c + 1]) : 0.f;
        pm[2] = (c <= r_hi && c < len) ? P[nt][2] * __expf(g_hi - sm.g[c]) : 0.f;
        pm[3] = (c + 1 <= r_hi && c + 1 < len) ? P[nt][3] * __expf(g_hi - sm.g[c + 1]) : 0.f;
        store_tile(sm.p, kLdC, m0, 8 * nt, pm, lane);
      }
    }
    __syncthreads();

    // --- 4. Vn = A @ W, rows [m0, m0+16).
    {
      float Vn[kNT][4];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) Vn[nt][0] = Vn[nt][1] = Vn[nt][2] = Vn[nt][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks) {
        uint32_t a[4], b[4];
        load_a(a, sm.a, kLdC, m0, 16 * ks, lane);
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          load_b_pair(b, sm.w, kLdV, 16 * ks, 16 * np, lane);
          mma_16816<true>(Vn[2 * np], a, b[0], b[1]);
          mma_16816<true>(Vn[2 * np + 1], a, b[2], b[3]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) store_tile(sm.vn, kLdV, m0, 8 * nt, Vn[nt], lane);
    }
    __syncthreads();

    // --- 5. O += P @ Vn and write it; S = exp(g_last) S + Kd^T @ Vn.
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks) {
      uint32_t a[4], b[4];
      load_a(a, sm.p, kLdC, m0, 16 * ks, lane);
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        load_b_pair(b, sm.vn, kLdV, 16 * ks, 16 * np, lane);
        mma_16816<true>(O[2 * np], a, b[0], b[1]);
        mma_16816<true>(O[2 * np + 1], a, b[2], b[3]);
      }
    }
    {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int c = v0 + 8 * nt + 2 * tig;
        if (r_lo < len)
          *reinterpret_cast<uint32_t*>(p.o + (cs + r_lo) * v_stride + h * kD + c) =
              E::pack2(p.scale * O[nt][0], p.scale * O[nt][1]);
        if (r_hi < len)
          *reinterpret_cast<uint32_t*>(p.o + (cs + r_hi) * v_stride + h * kD + c) =
              E::pack2(p.scale * O[nt][2], p.scale * O[nt][3]);
      }
    }
    const float decay = __expf(g_last);
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) S[mt][nt][e] *= decay;
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        uint32_t a[4], b[4];
        load_a_trans(a, sm.kd, kLdD, 32 * warp + 16 * mt, 16 * ks, lane);
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          load_b_pair(b, sm.vn, kLdV, 16 * ks, 16 * np, lane);
          mma_16816<true>(S[mt][2 * np], a, b[0], b[1]);
          mma_16816<true>(S[mt][2 * np + 1], a, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // the next chunk overwrites what this one still reads
  }

  if (p.ht != nullptr) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int r = 32 * warp + 16 * mt + gid, c = 8 * nt + 2 * tig;
        *reinterpret_cast<float2*>(p.ht + state_base + (int64_t)r * kD + c) = make_float2(S[mt][nt][0], S[mt][nt][1]);
        *reinterpret_cast<float2*>(p.ht + state_base + (int64_t)(r + 8) * kD + c) =
            make_float2(S[mt][nt][2], S[mt][nt][3]);
      }
  }
}
