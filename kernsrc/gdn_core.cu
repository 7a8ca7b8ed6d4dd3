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
// One CTA owns one (sequence, value head, value tile of BV columns) and walks
// its chunks in order. Only the products that involve the state S must wait
// for the previous chunk; everything else about a chunk (loading it,
// converting q and k to fp16, the decayed keys, A, the gated Q K^T) does not.
// So the CTA is two warp groups that run side by side:
//
//   prep  (warps 4-11 at BV 32, 4-7 at BV 64) builds chunk c+1's operands into a slot while the
//         copies of chunk c+2 are in flight into the next one, and
//   chain (warps 0-3) runs chunk c from its slot: K@S and Q@S, W, A@W, the
//         output and the state update. The fp32 state tile (128 x BV) lives
//         in the chain warps' accumulators (warp w: rows 32w..32w+31).
//
// The slots (three for BV 32, two for BV 64, as shared memory allows) form a
// ring. The groups hand them over with named barriers: FULL[s] (prep arrives
// when slot s is ready, chain waits) and EMPTY[s] (chain arrives when it is
// done with slot s, prep waits before refilling it). Timing experiments
// (docs/PERF.md) showed the preparation, not the chain, bounding v4, with its
// loads waited on in place: here they are issued a chunk ahead. Each group orders its own
// phases with a barrier of its 128 threads. Every matrix product runs on the
// tensor cores (mma.sync m16n8k16, fp32 accumulate, fp16 operands) from
// padded shared memory (no bank conflicts for ldmatrix).
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
constexpr int kGroup = 128;    // threads of the chain group (four warps)
// The prep group: twice the chain's warps where the 32-wide tile leaves room
// in the register file (it bounds v5, docs/PERF.md), as many at BV 64.
constexpr int kPrepWarps = kBV == 32 ? 8 : 4;
constexpr int kPrepThreads = 32 * kPrepWarps;
constexpr int kThreads = kGroup + kPrepThreads;
constexpr int kRowThreads = kPrepThreads / 64;  // prep threads per chunk row
constexpr int kLdD = kD + 8;   // padded leading dimensions (16 bytes) for conflict-free ldmatrix
constexpr int kLdC = kC + 8;
constexpr int kLdV = kBV + 8;
constexpr int kNT = kBV / 8;   // n-tiles of 8 across a value tile

constexpr int kSlots = kBV == 32 ? 3 : 2;

// Named barriers (0 is __syncthreads).
constexpr int kBarFull = 1;    // + slot
constexpr int kBarEmpty = 4;   // + slot
constexpr int kBarChain = 7;   // the chain group's own phases
constexpr int kBarPrep = 8;    // the prep group's own phases

// E is the input/output dtype. Every tensor-core operand, whatever E, is
// fp16: q and k convert exactly, and the intermediates (the state copy, W,
// Vn, A, P, the decayed keys) keep 3 more mantissa bits than bf16 would, which
// is 8x less rounding error in o and ht at no cost. Values must stay within
// fp16's range (|x| < 65504): true of normalised q and k, unit-scale v and
// the state of the delta rule, which beta <= 1 keeps bounded by the values
// it stores.
typedef Elem<GDN_FP16 != 0> E;
constexpr bool kConvert = GDN_FP16 == 0;  // bf16 q and k need converting

// One chunk's operands, written by the prep group, read by the chain group.
struct Slot {
  uint16_t q[kC * kLdD];    // fp16 (loaded in the input dtype, converted in place)
  uint16_t k[kC * kLdD];    // fp16
  uint16_t v[kC * kLdV];    // the value tile, input dtype (read as floats)
  uint16_t a[kC * kLdC];    // A in fp16, masked to its lower triangle and the chunk
  uint16_t p[kC * kLdC];    // P = Lower(Q K^T * Gamma) in fp16
  float g[kC];              // zero past the chunk
  float beta[kC];
  float eg[kC];             // exp(g), zero past the chunk
  float f[kC];              // exp(g_last - g), zero past the chunk
};

// Shared memory of one CTA, in 16-bit elements unless said otherwise.
struct Smem {
  Slot slot[kSlots];
  uint16_t s[kD * kLdV];    // the state tile rounded to fp16, operand of K@S and Q@S
  uint16_t w[kC * kLdV];    // W  = beta * (V - exp(g) * U)
  uint16_t vn[kC * kLdV];   // Vn = A @ W
  uint16_t vnf[kC * kLdV];  // exp(g_last - g) * Vn, the state update's operand
};

// The host sizes the dynamic shared memory from its own formula
// (kernsrc.CoreSharedBytes) and passes it here, so a layout change that
// forgets the Go side fails to compile instead of overrunning at run time.
#ifdef GDN_SMEM_BYTES
static_assert(sizeof(Smem) == GDN_SMEM_BYTES, "kernsrc.CoreSharedBytes disagrees with struct Smem");
#endif

// Named-barrier wait and arrive for count threads (a multiple of 32). Like
// __syncthreads they order the shared-memory accesses before them.
GDN_DEVICE void bar_sync(int id, int count) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory"); }
GDN_DEVICE void bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

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

// Where a CTA's chain runs: its sequence, heads and value columns.
struct Chain {
  int64_t bos, eos;  // token range of the sequence
  int nch;           // chunks
  int h, hk, v0;     // value head, its query/key head, first value column
};

// The prep group's share of one chunk. t is the thread's index in the group
// (0..127), warp its warp in the group (0..3). A chunk goes through
// issue_copies (q, k and the value tile by cp.async, A's rows, g and beta
// into registers), then, one chunk later, write_staged (A, g and beta into
// the slot) and build (fp16 conversion, gate factors, P).
struct Staged {
  float a[64 / kRowThreads];  // part of a row of A: row t/kRowThreads
  float g, beta;
};

GDN_DEVICE int chunk_len(const Chain& ch, int c) { return (int)min((int64_t)kC, ch.eos - ch.bos - (int64_t)kC * c); }

GDN_DEVICE void issue_copies(Slot& sl, Staged& st, const GdnCoreParams& p, const Chain& ch, int c, int t) {
  const int64_t cs = ch.bos + (int64_t)kC * c;
  const int len = chunk_len(ch, c);
  const int64_t qk_stride = (int64_t)p.Hq * kD, v_stride = (int64_t)p.Hv * kD;
  const uint16_t* q = p.q + cs * qk_stride + ch.hk * kD;
  const uint16_t* k = p.k + cs * qk_stride + ch.hk * kD;
#pragma unroll
  for (int i = t; i < kC * kD / 8; i += kPrepThreads) {
    const int r = i / (kD / 8), col = (i % (kD / 8)) * 8;
    const bool in = r < len;
    cp_async16(sl.q + r * kLdD + col, in ? q + r * qk_stride + col : p.q, in);
    cp_async16(sl.k + r * kLdD + col, in ? k + r * qk_stride + col : p.k, in);
  }
  const uint16_t* v = p.v + cs * v_stride + ch.h * kD + ch.v0;
#pragma unroll
  for (int i = t; i < kC * kBV / 8; i += kPrepThreads) {
    const int r = i / (kBV / 8), col = (i % (kBV / 8)) * 8;
    const bool in = r < len;
    cp_async16(sl.v + r * kLdV + col, in ? v + r * v_stride + col : p.v, in);
  }
  cp_async_commit();

  constexpr int kACols = 64 / kRowThreads;
  const int ar = t / kRowThreads, a0 = kACols * (t % kRowThreads);
  const bool in = ar < len;
  const int64_t row = ((cs + ar) * p.Hv + ch.h) * kC + a0;
  if (p.flags & kAFP32) {
    const float4* src = reinterpret_cast<const float4*>(static_cast<const float*>(p.A) + row);
#pragma unroll
    for (int j = 0; j < kACols / 4; ++j) {
      const float4 x = in ? src[j] : make_float4(0.f, 0.f, 0.f, 0.f);
      st.a[4 * j] = x.x, st.a[4 * j + 1] = x.y, st.a[4 * j + 2] = x.z, st.a[4 * j + 3] = x.w;
    }
  } else {
    const uint4* src = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.A) + row);
#pragma unroll
    for (int j = 0; j < kACols / 8; ++j) {
      const uint4 x = in ? src[j] : make_uint4(0, 0, 0, 0);
      const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        st.a[8 * j + 2 * e] = bf16_to_float((uint16_t)(w[e] & 0xffff));
        st.a[8 * j + 2 * e + 1] = bf16_to_float((uint16_t)(w[e] >> 16));
      }
    }
  }
  st.g = st.beta = 0.f;
  if (t < len) {
    st.g = p.g[(cs + t) * p.Hv + ch.h];
    st.beta = read_beta(p, (cs + t) * p.Hv + ch.h);
  }
}

GDN_DEVICE void write_staged(Slot& sl, const Staged& st, int len, int t) {
  constexpr int kACols = 64 / kRowThreads;
  const int ar = t / kRowThreads, a0 = kACols * (t % kRowThreads);
  // A kept where col <= row < len: columns past the chunk may hold anything
  // (SPEC), and 0 * NaN would poison the product.
#pragma unroll
  for (int j = 0; j < kACols / 2; ++j) {
    const int col = a0 + 2 * j;
    const float x0 = (ar < len && col <= ar) ? st.a[2 * j] : 0.f;
    const float x1 = (ar < len && col + 1 <= ar) ? st.a[2 * j + 1] : 0.f;
    *reinterpret_cast<uint32_t*>(sl.a + ar * kLdC + col) = pack_fp16x2(x0, x1);
  }
  if (t < kC) {
    sl.g[t] = st.g;
    sl.beta[t] = st.beta;
  }
}

// Runs once the slot's copies have landed and write_staged is visible to the
// group: gate factors, q and k to fp16 in place, then P.
GDN_DEVICE void build(Slot& sl, int len, int t, int warp, int lane) {
  {
    const float g_last = sl.g[len - 1];
    const int r = t / kRowThreads, part = t % kRowThreads;
    if (part == 0) {
      sl.eg[r] = r < len ? __expf(sl.g[r]) : 0.f;
      sl.f[r] = r < len ? __expf(g_last - sl.g[r]) : 0.f;
    }
    if (kConvert) {
#pragma unroll
      for (int j = 0; j < 16 / kRowThreads; ++j) {
        const int col = (128 / kRowThreads) * part + 8 * j;
        uint4* k = reinterpret_cast<uint4*>(sl.k + r * kLdD + col);
        uint4* q = reinterpret_cast<uint4*>(sl.q + r * kLdD + col);
        *k = to_fp16x8(*k);
        *q = to_fp16x8(*q);
      }
    }
  }
  bar_sync(kBarPrep, kPrepThreads);

  // P = Lower(Q K^T * Gamma): warp w computes rows [16 (w%4), +16), columns
  // [n0, n0 + 8 kPN).
  constexpr int kPN = 8 * 4 / kPrepWarps;  // n-tiles of P per warp
  const int m0 = 16 * (warp & 3), n0 = 8 * kPN * (warp >> 2), gid = lane >> 2, tig = lane & 3;
  float P[kPN][4];
#pragma unroll
  for (int nt = 0; nt < kPN; ++nt) P[nt][0] = P[nt][1] = P[nt][2] = P[nt][3] = 0.f;
#pragma unroll 2
  for (int ks = 0; ks < kD / 16; ++ks) {
    uint32_t a[4], b[4];
    load_a(a, sl.q, kLdD, m0, 16 * ks, lane);
#pragma unroll
    for (int np = 0; np < kPN / 2; ++np) {
      load_bt_pair(b, sl.k, kLdD, 16 * ks, n0 + 16 * np, lane);
      mma_16816<true>(P[2 * np], a, b[0], b[1]);
      mma_16816<true>(P[2 * np + 1], a, b[2], b[3]);
    }
  }
  const int r_lo = m0 + gid, r_hi = r_lo + 8;
  const float g_lo = sl.g[r_lo], g_hi = sl.g[r_hi];
#pragma unroll
  for (int nt = 0; nt < kPN; ++nt) {
    const int col = n0 + 8 * nt + 2 * tig;
    float pm[4];
    // Gamma only where it multiplies a kept entry: exp of a difference,
    // never of -g alone (it would overflow under strong decay).
    pm[0] = (col <= r_lo && col < len) ? P[nt][0] * __expf(g_lo - sl.g[col]) : 0.f;
    pm[1] = (col + 1 <= r_lo && col + 1 < len) ? P[nt][1] * __expf(g_lo - sl.g[col + 1]) : 0.f;
    pm[2] = (col <= r_hi && col < len) ? P[nt][2] * __expf(g_hi - sl.g[col]) : 0.f;
    pm[3] = (col + 1 <= r_hi && col + 1 < len) ? P[nt][3] * __expf(g_hi - sl.g[col + 1]) : 0.f;
    store_tile(sl.p, kLdC, m0, col - 2 * tig, pm, lane);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1) gdn_core_fwd(const GdnCoreParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);

  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int gid = lane >> 2, tig = lane & 3;

  Chain ch;
  const int tiles = kD / kBV;
  ch.h = blockIdx.x / tiles;
  ch.v0 = (blockIdx.x % tiles) * kBV;
  ch.hk = ch.h / (p.Hv / p.Hq);
  const int n = blockIdx.y;  // sequence
  if (p.cu_seqlens == nullptr) {
    ch.bos = (int64_t)n * p.T;
    ch.eos = ch.bos + p.T;
  } else {
    int64_t b, e;
    if (p.flags & kSeqlensInt64) {
      b = static_cast<const int64_t*>(p.cu_seqlens)[n];
      e = static_cast<const int64_t*>(p.cu_seqlens)[n + 1];
    } else {
      b = static_cast<const int32_t*>(p.cu_seqlens)[n];
      e = static_cast<const int32_t*>(p.cu_seqlens)[n + 1];
    }
    // The host validated its copy of cu_seqlens; the device copy is trusted
    // only as far as the tokens go (B = 1 here, so T counts them all).
    ch.eos = min(max(e, (int64_t)0), (int64_t)p.T);
    ch.bos = min(max(b, (int64_t)0), ch.eos);
  }
  ch.nch = (int)((ch.eos - ch.bos + kC - 1) / kC);

  if (warp >= 4) {
    // ---- The prep group. With three slots, chunk c+1's copies fly while
    // chunk c is built (the slot they fill was freed by chunk c-2, which the
    // chain has finished while we built c-1). With two, that slot is the
    // one the chain is still reading, so the copies wait until chunk c is
    // built and handed over.
    const int t = tid - kGroup, pw = warp - 4;
    Staged st;
    if (ch.nch > 0) issue_copies(sm.slot[0], st, p, ch, 0, t);
    for (int c = 0; c < ch.nch; ++c) {
      const int s = c % kSlots, len = chunk_len(ch, c);
      const bool next = c + 1 < ch.nch;
      const int s1 = (c + 1) % kSlots;
#ifndef GDN_EXPERIMENT_NO_PREP  // timing experiment: the chain alone (wrong results)
      write_staged(sm.slot[s], st, len, t);
#endif
      if (kSlots >= 3 && next) {
        if (c + 1 >= kSlots) bar_sync(kBarEmpty + s1, kThreads);  // the chain is done with chunk c+1-kSlots
        issue_copies(sm.slot[s1], st, p, ch, c + 1, t);
        asm volatile("cp.async.wait_group 1;" ::: "memory");  // chunk c's copies (not c+1's) have landed
      } else {
        cp_async_wait_all();
      }
      bar_sync(kBarPrep, kPrepThreads);
#ifndef GDN_EXPERIMENT_NO_PREP
      build(sm.slot[s], len, t, pw, lane);
#endif
      bar_arrive(kBarFull + s, kThreads);
      if (kSlots < 3 && next) {
        if (c + 1 >= kSlots) bar_sync(kBarEmpty + s1, kThreads);
        issue_copies(sm.slot[s1], st, p, ch, c + 1, t);
      }
    }
    return;
  }

  // ---- The chain group. Warp w holds state rows [32w, 32w+32) as two m16
  // tiles; in the 64-row products it works on rows [16w, 16w+16).
  float S[2][kNT][4];
  const int64_t state_base = ((int64_t)n * p.Hv + ch.h) * kD * kD + ch.v0;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const int r = 32 * warp + 16 * mt + gid, col = 8 * nt + 2 * tig;
      if (p.h0 != nullptr) {
        const float2 lo = *reinterpret_cast<const float2*>(p.h0 + state_base + (int64_t)r * kD + col);
        const float2 hi = *reinterpret_cast<const float2*>(p.h0 + state_base + (int64_t)(r + 8) * kD + col);
        S[mt][nt][0] = lo.x, S[mt][nt][1] = lo.y, S[mt][nt][2] = hi.x, S[mt][nt][3] = hi.y;
      } else {
        S[mt][nt][0] = S[mt][nt][1] = S[mt][nt][2] = S[mt][nt][3] = 0.f;
      }
    }

  const int64_t v_stride = (int64_t)p.Hv * kD;
  const int m0 = 16 * warp;
  const int r_lo = m0 + gid, r_hi = r_lo + 8;
  for (int c = 0; c < ch.nch; ++c) {
    const int s = c % kSlots;
    const Slot& sl = sm.slot[s];
    const int64_t cs = ch.bos + (int64_t)kC * c;
    const int len = (int)min((int64_t)kC, ch.eos - cs);
    bar_sync(kBarFull + s, kThreads);  // chunk c's operands are ready
#ifdef GDN_EXPERIMENT_NO_CHAIN  // timing experiment: the prep group alone (wrong results)
    if (c + kSlots < ch.nch) bar_arrive(kBarEmpty + s, kThreads);
    continue;
#endif

    // The 16-bit state operand. Its readers of the previous chunk passed
    // two chain barriers since.
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) store_tile(sm.s, kLdV, 32 * warp + 16 * mt, 8 * nt, S[mt][nt], lane);
    bar_sync(kBarChain, kGroup);

    // U = K@S -> W = beta (V - exp(g) U); Q@S starts O.
    float O[kNT][4];
    {
      float U[kNT][4];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        U[nt][0] = U[nt][1] = U[nt][2] = U[nt][3] = 0.f;
        O[nt][0] = O[nt][1] = O[nt][2] = O[nt][3] = 0.f;
      }
#pragma unroll 2
      for (int ks = 0; ks < kD / 16; ++ks) {
        uint32_t aq[4], ak[4], b[4];
        load_a(ak, sl.k, kLdD, m0, 16 * ks, lane);
        load_a(aq, sl.q, kLdD, m0, 16 * ks, lane);
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          load_b_pair(b, sm.s, kLdV, 16 * ks, 16 * np, lane);
          mma_16816<true>(U[2 * np], ak, b[0], b[1]);
          mma_16816<true>(U[2 * np + 1], ak, b[2], b[3]);
          mma_16816<true>(O[2 * np], aq, b[0], b[1]);
          mma_16816<true>(O[2 * np + 1], aq, b[2], b[3]);
        }
      }
      const float eg_lo = sl.eg[r_lo], eg_hi = sl.eg[r_hi];
      const float b_lo = sl.beta[r_lo], b_hi = sl.beta[r_hi];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int col = 8 * nt + 2 * tig;
        float w[4];
        w[0] = b_lo * (E::to_float(sl.v[r_lo * kLdV + col]) - eg_lo * U[nt][0]);
        w[1] = b_lo * (E::to_float(sl.v[r_lo * kLdV + col + 1]) - eg_lo * U[nt][1]);
        w[2] = b_hi * (E::to_float(sl.v[r_hi * kLdV + col]) - eg_hi * U[nt][2]);
        w[3] = b_hi * (E::to_float(sl.v[r_hi * kLdV + col + 1]) - eg_hi * U[nt][3]);
        store_tile(sm.w, kLdV, m0, 8 * nt, w, lane);
        O[nt][0] *= eg_lo, O[nt][1] *= eg_lo, O[nt][2] *= eg_hi, O[nt][3] *= eg_hi;
      }
    }
    bar_sync(kBarChain, kGroup);

    // Vn = A @ W, and exp(g_last - g) Vn for the state update.
    {
      float Vn[kNT][4];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) Vn[nt][0] = Vn[nt][1] = Vn[nt][2] = Vn[nt][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks) {
        uint32_t a[4], b[4];
        load_a(a, sl.a, kLdC, m0, 16 * ks, lane);
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          load_b_pair(b, sm.w, kLdV, 16 * ks, 16 * np, lane);
          mma_16816<true>(Vn[2 * np], a, b[0], b[1]);
          mma_16816<true>(Vn[2 * np + 1], a, b[2], b[3]);
        }
      }
      const float f_lo = sl.f[r_lo], f_hi = sl.f[r_hi];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        store_tile(sm.vn, kLdV, m0, 8 * nt, Vn[nt], lane);
        const float vf[4] = {f_lo * Vn[nt][0], f_lo * Vn[nt][1], f_hi * Vn[nt][2], f_hi * Vn[nt][3]};
        store_tile(sm.vnf, kLdV, m0, 8 * nt, vf, lane);
      }
    }
    bar_sync(kBarChain, kGroup);

    // O += P @ Vn, written out; S = exp(g_last) S + K^T @ (exp(g_last - g) Vn).
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks) {
      uint32_t a[4], b[4];
      load_a(a, sl.p, kLdC, m0, 16 * ks, lane);
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        load_b_pair(b, sm.vn, kLdV, 16 * ks, 16 * np, lane);
        mma_16816<true>(O[2 * np], a, b[0], b[1]);
        mma_16816<true>(O[2 * np + 1], a, b[2], b[3]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const int col = ch.v0 + 8 * nt + 2 * tig;
      if (r_lo < len)
        *reinterpret_cast<uint32_t*>(p.o + (cs + r_lo) * v_stride + ch.h * kD + col) =
            E::pack2(p.scale * O[nt][0], p.scale * O[nt][1]);
      if (r_hi < len)
        *reinterpret_cast<uint32_t*>(p.o + (cs + r_hi) * v_stride + ch.h * kD + col) =
            E::pack2(p.scale * O[nt][2], p.scale * O[nt][3]);
    }
    const float decay = __expf(sl.g[len - 1]);
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
        load_a_trans(a, sl.k, kLdD, 32 * warp + 16 * mt, 16 * ks, lane);
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          load_b_pair(b, sm.vnf, kLdV, 16 * ks, 16 * np, lane);
          mma_16816<true>(S[mt][2 * np], a, b[0], b[1]);
          mma_16816<true>(S[mt][2 * np + 1], a, b[2], b[3]);
        }
      }
    }
    // Done with the slot; the prep group may refill it (only if it will).
    if (c + kSlots < ch.nch) bar_arrive(kBarEmpty + s, kThreads);
  }

  if (p.ht != nullptr) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int r = 32 * warp + 16 * mt + gid, col = 8 * nt + 2 * tig;
        *reinterpret_cast<float2*>(p.ht + state_base + (int64_t)r * kD + col) =
            make_float2(S[mt][nt][0], S[mt][nt][1]);
        *reinterpret_cast<float2*>(p.ht + state_base + (int64_t)(r + 8) * kD + col) =
            make_float2(S[mt][nt][2], S[mt][nt][3]);
      }
  }
}
