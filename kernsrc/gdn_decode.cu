// gdn_decode.cu: decode, one batched recurrent step of 1 to 8 tokens a
// sequence from a state pool, in place (docs/SPEC.md, "Decode"). For each
// token t of a sequence, with u = S^T k and p = S^T q over the state S
// before the token:
//
//   delta = beta (v - decay u)          decay = exp(g)
//   o_t   = scale (decay p + delta (k . q))
//   S     = decay S + k delta^T
//
// so o needs no second reduction over k. Everything is fp32; o is rounded
// to v's dtype, and a bf16 pool is widened as read and rounded to nearest
// even once per state written.
//
// The kernel is bound by the state's bytes. A CTA of 128 threads owns a
// 128 x 32 slice of one value head's state (32 value columns) of one
// sequence: grid (128 / 32, Hv, N). The slice lives in registers, 32
// values a thread, loaded once with 16-byte loads issued before anything
// else, and is written back once (and after every token to token_states).
//
// Which thread holds which entries depends on the layout (the contiguous
// axis of a 16-byte vector is v in [K,V], k in [V,K]), but the sums over k
// are the same tree in both: every sum over k is a balanced binary tree
// over 32 "units" of 4 consecutive k (each unit an fma chain in increasing
// k), reduced over the unit index's bits, lowest first. A [V,K] call thus
// gives the [K,V] call's o bit for bit and the exact transposes of its
// states (docs/SPEC.md). Products that meet a sum are written as fmaf so
// that no build contracts them differently.
//
// Defines: GDN_FP16 (q, k, v, o are fp16, else bf16), GDN_DECODE_VK (the
// [V,K] layout), GDN_DECODE_POOL_BF16 (the pool and token_states are bf16).
#include "gdn_common.cuh"

#ifndef GDN_FP16
#define GDN_FP16 0
#endif
#ifndef GDN_DECODE_VK
#define GDN_DECODE_VK 0
#endif
#ifndef GDN_DECODE_POOL_BF16
#define GDN_DECODE_POOL_BF16 0
#endif

// The kernel's one parameter, packed by kernsrc.DecodeParams.Pack: the
// device addresses, then the 32-bit fields (every member naturally
// aligned, so the two blocks' sizes fix every offset).
struct DecodePtrs {
  const uint16_t* q;       // [tokens, Hq, 128]
  const uint16_t* k;       // [tokens, Hq, 128]
  const uint16_t* v;       // [tokens, Hv, 128]
  const float* g;          // [tokens, Hv] log-gate, or the gate's raw input a (kGateInKernel)
  const void* beta;        // [tokens, Hv] fp32 or the dtype of q (kBetaFP32); logits with kBetaLogits
  const float* a_log;      // [Hv], kGateInKernel only
  const float* dt_bias;    // [Hv], kGateInKernel only
  void* pool;              // [S, Hv, 128, 128] fp32 or bf16, read and written in place
  const int32_t* slots;    // [N] slot of each sequence; negative: from zero, nothing written
  uint16_t* o;             // [tokens, Hv, 128]
  void* token_states;      // [tokens, Hv, 128, 128] in the pool's dtype, or null
  const void* cu_seqlens;  // [N + 1] int32 or int64 (kSeqlensInt64), with kVarlen
};
struct DecodeScalars {
  float scale;
  int32_t T;  // tokens per sequence without kVarlen
  int32_t Hq;
  int32_t Hv;
  int32_t N;
  int32_t flags;
};
struct GdnDecodeParams {
  DecodePtrs ptr;
  DecodeScalars sc;
};

namespace {
enum : int32_t {
  kL2Norm = 1,          // q and k are L2-normalised here: x / sqrt(sum x^2 + 1e-6)
  kGateInKernel = 2,    // g = -exp(a_log) softplus(a + dt_bias)
  kBetaFP32 = 4,        // beta is fp32 (else the dtype of q)
  kBetaLogits = 8,      // beta = sigmoid(b)
  kNegEigval = 16,      // with kBetaLogits: beta = 2 sigmoid(b)
  kSeqlensInt64 = 32,   // cu_seqlens is int64
  kVarlen = 64,         // cu_seqlens gives the sequences
};

#ifdef GDN_DECODE_PARAMS_BYTES
static_assert(sizeof(GdnDecodeParams) == GDN_DECODE_PARAMS_BYTES && sizeof(DecodePtrs) == GDN_DECODE_OFF_SCALARS &&
                  sizeof(DecodeScalars) == 24,
              "kernsrc.DecodeParamsBytes, DecodeOffScalars");
static_assert(GDN_DECODE_FLAG_L2NORM == kL2Norm && GDN_DECODE_FLAG_GATE == kGateInKernel &&
                  GDN_DECODE_FLAG_BETA_FP32 == kBetaFP32 && GDN_DECODE_FLAG_BETA_LOGITS == kBetaLogits &&
                  GDN_DECODE_FLAG_NEG_EIGVAL == kNegEigval && GDN_DECODE_FLAG_SEQLENS_INT64 == kSeqlensInt64 &&
                  GDN_DECODE_FLAG_VARLEN == kVarlen,
              "kernsrc.DecodeFlag*");
static_assert(GDN_DECODE_THREADS == 128 && GDN_DECODE_COLUMNS == 32 && GDN_DECODE_MAX_TOKENS == 8,
              "kernsrc.DecodeThreads, DecodeColumns, DecodeMaxTokens");
#endif

typedef Elem<GDN_FP16 != 0> E;
constexpr int kThreads = 128;
constexpr int kCols = 32;      // value columns a CTA owns
constexpr int kMaxTokens = 8;  // tokens a sequence may bring
constexpr bool kVK = GDN_DECODE_VK != 0;
constexpr bool kBF16 = GDN_DECODE_POOL_BF16 != 0;
constexpr int kVE = kBF16 ? 8 : 4;    // state entries in one 16-byte vector
constexpr int kVecs = 32 / kVE;       // vectors a thread holds (32 entries)
constexpr int kNCol = kVK ? 4 : kVE;  // value columns a thread holds
// Units (4 consecutive k) a thread holds per column: kNU x 4 x kNCol = 32.
constexpr int kNU = 32 / (4 * kNCol);
static_assert(kNU * 4 * kNCol == 32, "a thread holds 32 entries");

// Register index of entry e (0..3) of unit u in column c of the thread.
__device__ __forceinline__ constexpr int reg(int u, int e, int c) {
  return kVK ? (c * 2 + u) * 4 + e : (u * 4 + e) * kVE + c;
}

// softplus as FLA's gate takes it: log(1 + e^x), x itself above 20.
__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(expf(x)); }

// The thread's place in the slice: which k each unit starts at, which
// slice column each of its columns is, where each of its vectors lies in
// a 128 x 128 state (an element offset).
struct Place {
  int kbase[kNU];
  int col[kNCol];
  int vec[kVecs];
};

__device__ __forceinline__ Place place(int tid, int v0) {
  const int w = tid >> 5, lane = tid & 31;
  Place pl;
  if (!kVK) {
    // [K,V]: lanes along v (a row's 32 columns in 8 fp32 or 4 bf16 lanes),
    // then rows. fp32: unit index u*16 + m (m = w*4 + rsub), rows u*64 +
    // m*4 + e; bf16: unit index w*8 + rsub, rows (w*8 + rsub)*4 + e. Each
    // load instruction of a warp reads whole 128-byte (fp32) or 64-byte
    // (bf16) row segments.
    const int lanesPerRow = kCols / kVE;
    const int rsub = lane / lanesPerRow, vq = lane % lanesPerRow;
#pragma unroll
    for (int u = 0; u < kNU; ++u) pl.kbase[u] = kBF16 ? (w * 8 + rsub) * 4 : u * 64 + (w * 4 + rsub) * 4;
#pragma unroll
    for (int c = 0; c < kNCol; ++c) pl.col[c] = vq * kVE + c;
#pragma unroll
    for (int u = 0; u < kNU; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) pl.vec[u * 4 + e] = (pl.kbase[u] + e) * 128 + v0 + vq * kVE;
  } else {
    // [V,K]: lanes along k (a half-warp covers a column's 128 k, 256
    // contiguous bytes a load), the two half-warps two columns. fp32: unit index u*16 + kl, k = u*64 + kl*4 +
    // e; bf16: unit index kl*2 + u, k = kl*8 + u*4 + e.
    const int kl = lane & 15, half = lane >> 4;
#pragma unroll
    for (int u = 0; u < kNU; ++u) pl.kbase[u] = kBF16 ? kl * 8 + u * 4 : u * 64 + kl * 4;
#pragma unroll
    for (int c = 0; c < kNCol; ++c) pl.col[c] = w * 8 + c * 2 + half;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const int c = kBF16 ? i : i / 2, u = kBF16 ? 0 : i % 2;
      pl.vec[i] = (v0 + pl.col[c]) * 128 + pl.kbase[u];
    }
  }
  return pl;
}

__device__ __forceinline__ void load_vec(const void* base, int off, float* s) {
  if (kBF16) {
    const uint4 x = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + off);
    const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      s[2 * j] = __uint_as_float(w[j] << 16);
      s[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    }
  } else {
    const float4 x = *reinterpret_cast<const float4*>(static_cast<const float*>(base) + off);
    s[0] = x.x, s[1] = x.y, s[2] = x.z, s[3] = x.w;
  }
}

__device__ __forceinline__ void store_vec(void* base, int off, const float* s) {
  if (kBF16) {
    uint4 x;
    x.x = pack_bf16x2(s[0], s[1]);
    x.y = pack_bf16x2(s[2], s[3]);
    x.z = pack_bf16x2(s[4], s[5]);
    x.w = pack_bf16x2(s[6], s[7]);
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(base) + off) = x;
  } else {
    *reinterpret_cast<float4*>(static_cast<float*>(base) + off) = make_float4(s[0], s[1], s[2], s[3]);
  }
}

// Every vector of the thread's slice to (or from) the state at base.
__device__ __forceinline__ void load_state(const void* base, const Place& pl, float* s) {
#pragma unroll
  for (int i = 0; i < kVecs; ++i) load_vec(base, pl.vec[i], s + i * kVE);
}
__device__ __forceinline__ void store_state(void* base, const Place& pl, const float* s) {
#pragma unroll
  for (int i = 0; i < kVecs; ++i) store_vec(base, pl.vec[i], s + i * kVE);
}

// An element offset into [.., Hv, 128, 128] for row r, head h.
__device__ __forceinline__ size_t state_off(long long r, int hv, int h) {
  return ((size_t)r * hv + h) * (128 * 128);
}

struct Staged {
  float q[kMaxTokens][128];
  float k[kMaxTokens][128];
  float v[kMaxTokens][kCols];
  float decay[kMaxTokens];
  float beta[kMaxTokens];
  float kq[kMaxTokens];
  // [K,V] only: the per-warp sums (u, p of each unit) of two tokens in turn.
  float red[2][4][kVK ? 1 : kNU * 2][kCols];
};

// One warp stages token t (flat index tok): q and k as fp32 (normalised
// with kL2Norm), k . q, the slice's v, decay = exp(g) and beta.
__device__ __forceinline__ void stage_token(const DecodePtrs& p, const DecodeScalars& sc, Staged& st, int t, long long tok, int h, int hq,
                                            int v0, int lane) {
  const size_t qk = ((size_t)tok * sc.Hq + hq) * 128 + lane * 4;
  const uint2 qr = *reinterpret_cast<const uint2*>(p.q + qk);
  const uint2 kr = *reinterpret_cast<const uint2*>(p.k + qk);
  const uint16_t vr = p.v[((size_t)tok * sc.Hv + h) * 128 + v0 + lane];
  float q[4] = {E::to_float(qr.x & 0xffff), E::to_float(qr.x >> 16), E::to_float(qr.y & 0xffff),
                E::to_float(qr.y >> 16)};
  float k[4] = {E::to_float(kr.x & 0xffff), E::to_float(kr.x >> 16), E::to_float(kr.y & 0xffff),
                E::to_float(kr.y >> 16)};
  if (sc.flags & kL2Norm) {
    float sq = 0.f, sk = 0.f;
#pragma unroll
    for (int e = 0; e < 4; ++e) sq = fmaf(q[e], q[e], sq), sk = fmaf(k[e], k[e], sk);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      sq += __shfl_xor_sync(0xffffffffu, sq, o);
      sk += __shfl_xor_sync(0xffffffffu, sk, o);
    }
    const float iq = 1.f / sqrtf(sq + 1e-6f), ik = 1.f / sqrtf(sk + 1e-6f);
#pragma unroll
    for (int e = 0; e < 4; ++e) q[e] *= iq, k[e] *= ik;
  }
  float kq = 0.f;
#pragma unroll
  for (int e = 0; e < 4; ++e) kq = fmaf(k[e], q[e], kq);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) kq += __shfl_xor_sync(0xffffffffu, kq, o);
  *reinterpret_cast<float4*>(&st.q[t][lane * 4]) = make_float4(q[0], q[1], q[2], q[3]);
  *reinterpret_cast<float4*>(&st.k[t][lane * 4]) = make_float4(k[0], k[1], k[2], k[3]);
  st.v[t][lane] = E::to_float(vr);
  if (lane == 0) {
    const size_t gi = (size_t)tok * sc.Hv + h;
    float g = p.g[gi];
    if (sc.flags & kGateInKernel) g = -expf(p.a_log[h]) * softplus(g + p.dt_bias[h]);
    float b = (sc.flags & kBetaFP32) ? static_cast<const float*>(p.beta)[gi]
                                    : E::to_float(static_cast<const uint16_t*>(p.beta)[gi]);
    if (sc.flags & kBetaLogits) {
      b = 1.f / (1.f + expf(-b));
      if (sc.flags & kNegEigval) b *= 2.f;
    }
    st.decay[t] = expf(g);
    st.beta[t] = b;
    st.kq[t] = kq;
  }
}

// The leaf sums of the thread's units: for every unit u and column c, the
// fma chain over its 4 k of S[k, c] x[k], in increasing k.
__device__ __forceinline__ void leaves(const float* s, const float* x, const Place& pl, float (&L)[kNU][kNCol]) {
#pragma unroll
  for (int u = 0; u < kNU; ++u) {
    const float4 xv = *reinterpret_cast<const float4*>(x + pl.kbase[u]);
    const float xe[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
    for (int c = 0; c < kNCol; ++c) {
      float a = 0.f;
#pragma unroll
      for (int e = 0; e < 4; ++e) a = fmaf(s[reg(u, e, c)], xe[e], a);
      L[u][c] = a;
    }
  }
}

__device__ __forceinline__ void shfl_add(float (&x)[kNCol], int off) {
#pragma unroll
  for (int c = 0; c < kNCol; ++c) x[c] += __shfl_xor_sync(0xffffffffu, x[c], off);
}
}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads) gdn_decode(const GdnDecodeParams params) {
  const DecodePtrs& p = params.ptr;
  const DecodeScalars& sc = params.sc;
  __shared__ __align__(16) Staged st;
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
  const int v0 = blockIdx.x * kCols, h = blockIdx.y, n = blockIdx.z;
  const int hq = h / (sc.Hv / sc.Hq);

  long long bos, len;
  if (sc.flags & kVarlen) {
    if (sc.flags & kSeqlensInt64) {
      const long long* cu = static_cast<const long long*>(p.cu_seqlens);
      bos = cu[n], len = cu[n + 1] - bos;
    } else {
      const int32_t* cu = static_cast<const int32_t*>(p.cu_seqlens);
      bos = cu[n], len = cu[n + 1] - bos;
    }
  } else {
    bos = (long long)n * sc.T, len = sc.T;
  }
  len = len < 0 ? 0 : (len > kMaxTokens ? kMaxTokens : len);  // validated on the host; never past the staging
  const int T = (int)len;
  const int slot = p.slots[n];

  // The state's loads first: everything after overlaps them.
  const Place pl = place(tid, v0);
  float s[32];
  if (slot >= 0) {
    load_state(static_cast<const uint8_t*>(p.pool) + state_off(slot, sc.Hv, h) * (kBF16 ? 2 : 4), pl, s);
  } else {
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = 0.f;
  }
  for (int t = w; t < T; t += 4) stage_token(p, sc, st, t, bos + t, h, hq, v0, lane);
  __syncthreads();

  for (int t = 0; t < T; ++t) {
    const float decay = st.decay[t], beta = st.beta[t], kq = st.kq[t];
    float Lu[kNU][kNCol], Lp[kNU][kNCol];
    leaves(s, st.k[t], pl, Lu);
    leaves(s, st.q[t], pl, Lp);
    float U[kNCol], P[kNCol];
    if (kVK && kBF16) {
      // Unit bit 0 is the two halves of a vector, bits 1-4 the lanes.
#pragma unroll
      for (int c = 0; c < kNCol; ++c) U[c] = Lu[0][c] + Lu[1][c], P[c] = Lp[0][c] + Lp[1][c];
#pragma unroll
      for (int off = 1; off < 16; off <<= 1) shfl_add(U, off), shfl_add(P, off);
    } else if (kVK) {
      // Unit bits 0-3 are the lanes, bit 4 the thread's two units.
#pragma unroll
      for (int u = 0; u < kNU; ++u)
#pragma unroll
        for (int off = 1; off < 16; off <<= 1) shfl_add(Lu[u], off), shfl_add(Lp[u], off);
#pragma unroll
      for (int c = 0; c < kNCol; ++c) U[c] = Lu[0][c] + Lu[1][c], P[c] = Lp[0][c] + Lp[1][c];
    } else {
      // [K,V]: the low unit bits are the lanes' row index (lane bits 2-4
      // in bf16, 3-4 in fp32), the next two the warps (through shared
      // memory), and in fp32 the top bit the thread's two units.
      constexpr int first = kBF16 ? 4 : 8;
#pragma unroll
      for (int u = 0; u < kNU; ++u)
#pragma unroll
        for (int off = first; off < 32; off <<= 1) shfl_add(Lu[u], off), shfl_add(Lp[u], off);
      float(&red)[4][kVK ? 1 : kNU * 2][kCols] = st.red[t & 1];
      if (lane < kCols / kVE) {
#pragma unroll
        for (int u = 0; u < kNU; ++u)
#pragma unroll
          for (int c = 0; c < kNCol; ++c) red[w][2 * u][pl.col[c]] = Lu[u][c], red[w][2 * u + 1][pl.col[c]] = Lp[u][c];
      }
      __syncthreads();
#pragma unroll
      for (int c = 0; c < kNCol; ++c) {
        const int col = pl.col[c];
        float su[kNU], sp[kNU];
#pragma unroll
        for (int u = 0; u < kNU; ++u) {
          su[u] = (red[0][2 * u][col] + red[1][2 * u][col]) + (red[2][2 * u][col] + red[3][2 * u][col]);
          sp[u] = (red[0][2 * u + 1][col] + red[1][2 * u + 1][col]) + (red[2][2 * u + 1][col] + red[3][2 * u + 1][col]);
        }
        U[c] = su[0], P[c] = sp[0];
        if (kNU == 2) U[c] = su[0] + su[kNU - 1], P[c] = sp[0] + sp[kNU - 1];
      }
    }

    // delta, o, and the state's update.
    float delta[kNCol], o[kNCol];
#pragma unroll
    for (int c = 0; c < kNCol; ++c) {
      delta[c] = beta * fmaf(-decay, U[c], st.v[t][pl.col[c]]);
      o[c] = sc.scale * fmaf(delta[c], kq, decay * P[c]);
    }
    const long long tok = bos + t;
    uint16_t* orow = p.o + ((size_t)tok * sc.Hv + h) * 128 + v0;
    if (!kVK) {
      if (w == 0 && lane < kCols / kVE) {
        uint32_t pk[kNCol / 2];
#pragma unroll
        for (int c = 0; c < kNCol / 2; ++c) pk[c] = E::pack2(o[2 * c], o[2 * c + 1]);
        // One vector store (the compiler left alone splits it into words).
        if constexpr (kNCol == 8) {
          asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(orow + pl.col[0]), "r"(pk[0]), "r"(pk[1]),
                       "r"(pk[2]), "r"(pk[3])
                       : "memory");
        } else {
          asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(orow + pl.col[0]), "r"(pk[0]), "r"(pk[1]) : "memory");
        }
      }
    } else if ((lane & 15) == 0) {
#pragma unroll
      for (int c = 0; c < kNCol; ++c) orow[pl.col[c]] = E::from_float(o[c]);
    }
#pragma unroll
    for (int u = 0; u < kNU; ++u) {
      const float4 xv = *reinterpret_cast<const float4*>(st.k[t] + pl.kbase[u]);
      const float ke[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
      for (int e = 0; e < 4; ++e)
#pragma unroll
        for (int c = 0; c < kNCol; ++c) {
          float& x = s[reg(u, e, c)];
          x = fmaf(ke[e], delta[c], decay * x);
        }
    }
    if (p.token_states != nullptr) {
      store_state(static_cast<uint8_t*>(p.token_states) + state_off(tok, sc.Hv, h) * (kBF16 ? 2 : 4), pl, s);
    }
  }
  if (slot >= 0) store_state(static_cast<uint8_t*>(p.pool) + state_off(slot, sc.Hv, h) * (kBF16 ? 2 : 4), pl, s);
}
