// gdn_core.cu: the Gated DeltaNet chunked-prefill core forward.
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
// One CTA of eight warps owns one (sequence, value head, value tile of BV
// columns) and walks its chunks in order; the fp32 state tile S (128 x BV)
// lives in the warps' tensor-core accumulators for the whole sequence (warp w
// holds rows 16w..16w+15). Every matrix product runs on the tensor cores
// (mma.sync m16n8k16, fp32 accumulate, fp16 operands) from padded shared
// memory (no bank conflicts for ldmatrix).
//
// The chain of chunks is latency-bound (docs/PERF.md, v1), so the inputs of
// chunk c+1 are fetched with asynchronous copies (cp.async, zero-filled past
// the sequence) into a second stage buffer while chunk c computes, and g and
// beta travel one chunk ahead in registers. Per chunk: B1 (stage landed) ->
// prepare operands -> B2 -> K@S, Q@S, Q K^T -> B3 -> A@W -> B4 -> P@Vn, the
// output, the state update -> next chunk.
//
// Compile-time choices (-D): GDN_FP16 (0: bf16, 1: fp16 inputs and output),
// GDN_BV (value-tile width, 32 or 64), GDN_SMEM_BYTES (the host's idea of
// sizeof(Smem), checked).
#include "gdn_common.cuh"

#ifndef GDN_FP16
#define GDN_FP16 0
#endif
#ifndef GDN_BV
#define GDN_BV 64
#endif

// GdnCoreParams is laid out byte for byte as the Go side packs it
// (package gdn, packCoreParams): ten pointers, then 32-bit fields.
struct GdnCoreParams {
  const uint16_t* q;       // [tokens, Hq, 128]
  const uint16_t* k;       // [tokens, Hq, 128]
  const uint16_t* v;       // [tokens, Hv, 128]
  const float* g;          // [tokens, Hv] chunk-local cumulative log-gate
  const void* beta;        // [tokens, Hv] fp32 or the input dtype (flag)
  const void* A;           // [tokens, Hv, 64] fp32 or bf16 (flag), 16-byte aligned
  const float* h0;         // [N, Hv, 128, 128] or null
  uint16_t* o;             // [tokens, Hv, 128]
  float* ht;               // [N, Hv, 128, 128] or null
  const void* cu_seqlens;  // [N+1] int32 or int64 (flag), or null: sequences of T tokens
  float scale;
  int32_t T;  // tokens per sequence when cu_seqlens is null
  int32_t Hq;
  int32_t Hv;
  int32_t N;  // number of sequences
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
constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
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

// One chunk's inputs as the asynchronous copies leave them: q and k rows in
// the input dtype (converted to fp16 in place before use), the value tile,
// and A's rows as stored (64 floats, or 64 bf16 in the first half of a row).
struct Stage {
  uint16_t q[kC * kLdD];
  uint16_t k[kC * kLdD];
  uint16_t v[kC * kLdV];
  float a[kC * kC];
};

// Shared memory of one CTA, in 16-bit elements unless said otherwise.
struct Smem {
  Stage st[2];              // chunk c computes from one while chunk c+1 lands in the other
  uint16_t kd[kC * kLdD];   // K * exp(g_last - g), rows past the chunk zero
  uint16_t s[kD * kLdV];    // the state tile rounded to fp16, operand of K@S and Q@S
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

// 16 bytes from global to shared memory without passing through registers;
// with valid false nothing is read and the destination is zero-filled.
GDN_DEVICE void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
GDN_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
GDN_DEVICE void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

// Issues the copies of one chunk (rows cs .. cs+len-1; rows past len are
// zero-filled) into a stage buffer. Every thread issues a fixed share, all
// independent, so they are in flight together.
GDN_DEVICE void load_stage(Stage& st, const GdnCoreParams& p, int64_t cs, int len, int hk, int h, int v0) {
  const int tid = threadIdx.x;
  const int64_t qk_stride = (int64_t)p.Hq * kD, v_stride = (int64_t)p.Hv * kD;
  const uint16_t* q = p.q + cs * qk_stride + hk * kD;
  const uint16_t* k = p.k + cs * qk_stride + hk * kD;
#pragma unroll
  for (int i = tid; i < kC * kD / 8; i += kThreads) {  // q and k: 16 vectors of 8 per row
    const int r = i / (kD / 8), c = (i % (kD / 8)) * 8;
    const bool in = r < len;
    cp_async16(st.q + r * kLdD + c, in ? q + r * qk_stride + c : p.q, in);
    cp_async16(st.k + r * kLdD + c, in ? k + r * qk_stride + c : p.k, in);
  }
  const uint16_t* v = p.v + cs * v_stride + h * kD + v0;
#pragma unroll
  for (int i = tid; i < kC * kBV / 8; i += kThreads) {
    const int r = i / (kBV / 8), c = (i % (kBV / 8)) * 8;
    const bool in = r < len;
    cp_async16(st.v + r * kLdV + c, in ? v + r * v_stride + c : p.v, in);
  }
  // A rows: 256 bytes (fp32) or 128 bytes (bf16) each, contiguous in memory.
  const int row_vecs = (p.flags & kAFP32) ? kC * 4 / 16 : kC * 2 / 16;
  const char* a = static_cast<const char*>(p.A) + ((cs * p.Hv + h) * kC) * ((p.flags & kAFP32) ? 4 : 2);
  const int64_t a_stride = (int64_t)p.Hv * kC * ((p.flags & kAFP32) ? 4 : 2);  // bytes between tokens
#pragma unroll
  for (int i = tid; i < kC * 16; i += kThreads) {
    const int r = i / 16, c = i % 16;
    if (c < row_vecs) {
      const bool in = r < len;
      cp_async16(reinterpret_cast<char*>(st.a + r * kC) + 16 * c, in ? a + r * a_stride + 16 * c : p.A, in);
    }
  }
}

// Stores an m16 x n8 accumulator tile as fp16 at (r0, c0) of a shared-memory
// matrix with leading dimension ld.
GDN_DEVICE void store_tile(uint16_t* M, int ld, int r0, int c0, const float c[4], int lane) {
  const int r = r0 + (lane >> 2), col = c0 + 2 * (lane & 3);
  *reinterpret_cast<uint32_t*>(M + r * ld + col) = pack_fp16x2(c[0], c[1]);
  *reinterpret_cast<uint32_t*>(M + (r + 8) * ld + col) = pack_fp16x2(c[2], c[3]);
}

// Converts 8 input-dtype values to fp16, in a 16-byte vector.
GDN_DEVICE uint4 to_fp16x8(uint4 x) {
  if (kConvert) {
    uint32_t* w = reinterpret_cast<uint32_t*>(&x);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      w[j] = pack_fp16x2(E::to_float((uint16_t)(w[j] & 0xffff)), E::to_float((uint16_t)(w[j] >> 16)));
  }
  return x;
}

// 8 fp16 values times f, as fp16.
GDN_DEVICE uint4 scale_fp16x8(uint4 x, float f) {
  uint32_t* w = reinterpret_cast<uint32_t*>(&x);
#pragma unroll
  for (int j = 0; j < 4; ++j)
    w[j] = pack_fp16x2(fp16_to_float((uint16_t)(w[j] & 0xffff)) * f, fp16_to_float((uint16_t)(w[j] >> 16)) * f);
  return x;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1) gdn_core_fwd(const GdnCoreParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);

  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int gid = lane >> 2, tig = lane & 3;
  const int tiles = kD / kBV;
  const int h = blockIdx.x / tiles;           // value head
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

  // The state tile: warp w owns state rows [16w, 16w+16).
  float S[kNT][4];
  const int64_t state_base = ((int64_t)n * p.Hv + h) * kD * kD + v0;
  const int srow = 16 * warp + gid;
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
    const int c = 8 * nt + 2 * tig;
    if (p.h0 != nullptr) {
      const float2 lo = *reinterpret_cast<const float2*>(p.h0 + state_base + (int64_t)srow * kD + c);
      const float2 hi = *reinterpret_cast<const float2*>(p.h0 + state_base + (int64_t)(srow + 8) * kD + c);
      S[nt][0] = lo.x, S[nt][1] = lo.y, S[nt][2] = hi.x, S[nt][3] = hi.y;
    } else {
      S[nt][0] = S[nt][1] = S[nt][2] = S[nt][3] = 0.f;
    }
  }

  const int64_t v_stride = (int64_t)p.Hv * kD;
  const int mt = warp & 3, half = warp >> 2;  // in the 64-row products: m-tile and which half of the work
  const int m0 = 16 * mt;
  const int r_lo = m0 + gid, r_hi = r_lo + 8;
  float O[kNT][4];  // the output rows [m0, m0+16) of warps with half == 1

  // Prologue: the first chunk's copies, g and beta.
  float g_next = 0.f, beta_next = 0.f;
  if (bos < eos) {
    const int len0 = (int)min((int64_t)kC, eos - bos);
    load_stage(sm.st[0], p, bos, len0, hk, h, v0);
    if (tid < len0) {
      g_next = p.g[(bos + tid) * p.Hv + h];
      beta_next = read_beta(p, (bos + tid) * p.Hv + h);
    }
  }
  cp_async_commit();

  int stage = 0;
  for (int64_t cs = bos; cs < eos; cs += kC, stage ^= 1) {
    const int len = (int)min((int64_t)kC, eos - cs);
    Stage& st = sm.st[stage];

    // --- B1: this chunk's stage has landed; publish its g and beta.
    if (tid < kC) {
      sm.g[tid] = g_next;  // zero past the chunk
      sm.beta[tid] = beta_next;
    }
    cp_async_wait_all();
    __syncthreads();

    // Start the next chunk's copies into the other stage (last read by the
    // previous chunk, which every thread has finished).
    const int64_t cn = cs + kC;
    g_next = beta_next = 0.f;
    if (cn < eos) {
      const int len1 = (int)min((int64_t)kC, eos - cn);
      load_stage(sm.st[stage ^ 1], p, cn, len1, hk, h, v0);
      if (tid < len1) {
        g_next = p.g[(cn + tid) * p.Hv + h];
        beta_next = read_beta(p, (cn + tid) * p.Hv + h);
      }
    }
    cp_async_commit();

    // --- Prepare the operands: four threads per row r, a quarter of its
    // columns each. q and k become fp16 in place; the decayed keys, A
    // (masked) and the fp16 state copy are written.
    const float g_last = sm.g[len - 1];
    {
      const int r = tid >> 2, part = tid & 3;
      const float f = r < len ? __expf(g_last - sm.g[r]) : 0.f;
      if (part == 0) sm.eg[r] = r < len ? __expf(sm.g[r]) : 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = 32 * part + 8 * j;
        const uint4 kk = to_fp16x8(*reinterpret_cast<const uint4*>(st.k + r * kLdD + c));
        if (kConvert) {
          *reinterpret_cast<uint4*>(st.k + r * kLdD + c) = kk;
          *reinterpret_cast<uint4*>(st.q + r * kLdD + c) = to_fp16x8(*reinterpret_cast<const uint4*>(st.q + r * kLdD + c));
        }
        *reinterpret_cast<uint4*>(sm.kd + r * kLdD + c) = scale_fp16x8(kk, f);
      }
      // A row r, columns [16 part, 16 part + 16): kept where c <= r < len
      // (columns past the chunk may hold anything, SPEC; 0 * NaN would
      // poison the product).
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int c = 16 * part + 2 * j;
        float a0, a1;
        if (p.flags & kAFP32) {
          const float2 x = *reinterpret_cast<const float2*>(st.a + r * kC + c);
          a0 = x.x, a1 = x.y;
        } else {
          const uint32_t x = *reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint16_t*>(st.a + r * kC) + c);
          a0 = bf16_to_float((uint16_t)(x & 0xffff)), a1 = bf16_to_float((uint16_t)(x >> 16));
        }
        a0 = (r < len && c <= r) ? a0 : 0.f;
        a1 = (r < len && c + 1 <= r) ? a1 : 0.f;
        *reinterpret_cast<uint32_t*>(sm.a + r * kLdC + c) = pack_fp16x2(a0, a1);
      }
    }
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) store_tile(sm.s, kLdV, 16 * warp, 8 * nt, S[nt], lane);
    __syncthreads();  // B2

    // --- Rows [m0, m0+16). half 0: U = K@S, then W; half 1: Q@S (starts O).
    // Both: half of the columns of P = Q K^T.
    {
      float X[kNT][4];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) X[nt][0] = X[nt][1] = X[nt][2] = X[nt][3] = 0.f;
      const uint16_t* lhs = half == 0 ? st.k : st.q;
#pragma unroll 2
      for (int ks = 0; ks < kD / 16; ++ks) {
        uint32_t a[4], b[4];
        load_a(a, lhs, kLdD, m0, 16 * ks, lane);
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          load_b_pair(b, sm.s, kLdV, 16 * ks, 16 * np, lane);
          mma_16816<true>(X[2 * np], a, b[0], b[1]);
          mma_16816<true>(X[2 * np + 1], a, b[2], b[3]);
        }
      }
      const float eg_lo = sm.eg[r_lo], eg_hi = sm.eg[r_hi];
      if (half == 0) {
        const float b_lo = sm.beta[r_lo], b_hi = sm.beta[r_hi];
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const int c = 8 * nt + 2 * tig;
          float w[4];
          w[0] = b_lo * (E::to_float(st.v[r_lo * kLdV + c]) - eg_lo * X[nt][0]);
          w[1] = b_lo * (E::to_float(st.v[r_lo * kLdV + c + 1]) - eg_lo * X[nt][1]);
          w[2] = b_hi * (E::to_float(st.v[r_hi * kLdV + c]) - eg_hi * X[nt][2]);
          w[3] = b_hi * (E::to_float(st.v[r_hi * kLdV + c + 1]) - eg_hi * X[nt][3]);
          store_tile(sm.w, kLdV, m0, 8 * nt, w, lane);
        }
      } else {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          O[nt][0] = eg_lo * X[nt][0], O[nt][1] = eg_lo * X[nt][1];
          O[nt][2] = eg_hi * X[nt][2], O[nt][3] = eg_hi * X[nt][3];
        }
      }
    }
    {
      constexpr int kPN = kC / 16;  // n-tiles of P per warp: 4 of the 8
      float P[kPN][4];
#pragma unroll
      for (int nt = 0; nt < kPN; ++nt) P[nt][0] = P[nt][1] = P[nt][2] = P[nt][3] = 0.f;
      const int n0 = (kC / 2) * half;
#pragma unroll 2
      for (int ks = 0; ks < kD / 16; ++ks) {
        uint32_t a[4], b[4];
        load_a(a, st.q, kLdD, m0, 16 * ks, lane);
#pragma unroll
        for (int np = 0; np < kPN / 2; ++np) {
          load_bt_pair(b, st.k, kLdD, 16 * ks, n0 + 16 * np, lane);
          mma_16816<true>(P[2 * np], a, b[0], b[1]);
          mma_16816<true>(P[2 * np + 1], a, b[2], b[3]);
        }
      }
      const float g_lo = sm.g[r_lo], g_hi = sm.g[r_hi];
#pragma unroll
      for (int nt = 0; nt < kPN; ++nt) {
        const int c = n0 + 8 * nt + 2 * tig;
        float pm[4];
        // Gamma only where it multiplies a kept entry: exp of a difference,
        // never of -g alone (it would overflow under strong decay).
        pm[0] = (c <= r_lo && c < len) ? P[nt][0] * __expf(g_lo - sm.g[c]) : 0.f;
        pm[1] = (c + 1 <= r_lo && c + 1 < len) ? P[nt][1] * __expf(g_lo - sm.g[c + 1]) : 0.f;
        pm[2] = (c <= r_hi && c < len) ? P[nt][2] * __expf(g_hi - sm.g[c]) : 0.f;
        pm[3] = (c + 1 <= r_hi && c + 1 < len) ? P[nt][3] * __expf(g_hi - sm.g[c + 1]) : 0.f;
        store_tile(sm.p, kLdC, m0, n0 + 8 * nt, pm, lane);
      }
    }
    __syncthreads();  // B3

    // --- Vn = A @ W, rows [m0, m0+16), columns of this warp's half.
    {
      constexpr int kHN = kNT / 2;  // n-tiles per half
      float Vn[kHN][4];
#pragma unroll
      for (int nt = 0; nt < kHN; ++nt) Vn[nt][0] = Vn[nt][1] = Vn[nt][2] = Vn[nt][3] = 0.f;
      const int n0 = (kBV / 2) * half;
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks) {
        uint32_t a[4], b[4];
        load_a(a, sm.a, kLdC, m0, 16 * ks, lane);
#pragma unroll
        for (int np = 0; np < kHN / 2; ++np) {
          load_b_pair(b, sm.w, kLdV, 16 * ks, n0 + 16 * np, lane);
          mma_16816<true>(Vn[2 * np], a, b[0], b[1]);
          mma_16816<true>(Vn[2 * np + 1], a, b[2], b[3]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kHN; ++nt) store_tile(sm.vn, kLdV, m0, n0 + 8 * nt, Vn[nt], lane);
    }
    __syncthreads();  // B4

    // --- half 1: O += P @ Vn and write it. Every warp: its 16 state rows,
    // S = exp(g_last) S + Kd^T @ Vn.
    if (half == 1) {
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
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) S[nt][e] *= decay;
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks) {
      uint32_t a[4], b[4];
      load_a_trans(a, sm.kd, kLdD, 16 * warp, 16 * ks, lane);
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        load_b_pair(b, sm.vn, kLdV, 16 * ks, 16 * np, lane);
        mma_16816<true>(S[2 * np], a, b[0], b[1]);
        mma_16816<true>(S[2 * np + 1], a, b[2], b[3]);
      }
    }
    // The next chunk's B1 orders these reads before anything overwrites them.
  }
  cp_async_wait_all();  // no copy may outlive the block (an empty group when the loop ran)

  if (p.ht != nullptr) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const int c = 8 * nt + 2 * tig;
      *reinterpret_cast<float2*>(p.ht + state_base + (int64_t)srow * kD + c) = make_float2(S[nt][0], S[nt][1]);
      *reinterpret_cast<float2*>(p.ht + state_base + (int64_t)(srow + 8) * kD + c) = make_float2(S[nt][2], S[nt][3]);
    }
  }
}
