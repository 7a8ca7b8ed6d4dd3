// gdn_prep.cu: the steps of the full forward (FLA's chunk_gated_delta_rule)
// that come before the core forward, in one kernel (gdn_prep_chunk), per
// chunk and value head: the L2 normalisation of q and k (when asked), the
// per-token log-gate (from the raw gate inputs, when asked), its
// chunk-local cumulative sum, and A, the inverse of the gated, beta-scaled
// K K^T of the chunk (K K^T on the tensor cores, the inverse by
// gdn_solve.cuh's 16 x 16 blocks: the fused core kernel's arithmetic),
// written as A2 = A diag(beta) in fp16 (beta from its logits when asked:
// gdn_beta.cuh).
//
// Chunks are listed by the host as int32 (begin, end) token pairs (flat
// indices into the B*T tokens): every sequence's 64-token chunks, the last
// one possibly shorter, no chunk across two sequences.
//
// Defines: GDN_FP16 (q and k are fp16, else bf16).
#include "gdn_beta.cuh"
#include "gdn_solve.cuh"

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
  // With kL2Norm: the core kernel normalises q and k itself (Prep::norm),
  // so no copies are written and q is not read; k is still normalised here
  // for K K^T.
  kNormInCore = 8,
  kBetaLogits = 16,  // beta holds logits b: beta = sigmoid(b) (beta_of)
  kNegEigval = 32,   // with kBetaLogits: beta = 2 sigmoid(b)
};

#ifdef GDN_PREP_FLAG_GATE
static_assert(GDN_PREP_FLAG_GATE == kGateInKernel && GDN_PREP_FLAG_BETA_FP32 == kBetaFP32 &&
                  GDN_PREP_FLAG_L2NORM == kL2Norm && GDN_PREP_FLAG_NORM_IN_CORE == kNormInCore &&
                  GDN_PREP_FLAG_BETA_LOGITS == kBetaLogits && GDN_PREP_FLAG_NEG_EIGVAL == kNegEigval,
              "kernsrc.Prep*");
#endif

// softplus as FLA's gate takes it: log(1 + e^x), x itself above 20.
__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(__expf(x)); }
}  // namespace

// A 128-vector held by a half-warp, eight 16-bit values (16 bytes) a lane,
// L2-normalised: x / sqrt(sum(x^2) + 1e-6) (FLA's l2norm), rounded to fp16
// whatever the input dtype (a unit vector's entries are at most 1, where
// fp16 keeps three more bits than bf16: the core forward then takes the
// copies as fp16, kernsrc.CoreBF16FP16QK, and K K^T here sees the very rows
// its products take). Every lane of the warp takes part (the two halves hold
// two vectors); a zero vector stays zero. The inverse norm is rsqrt_ftz
// (rsqrtf to the bit here; FLA's form too): its error of a few fp32 ulps
// vanishes in the 16-bit rounding, and it is one MUFU where 1 / sqrtf is a
// square root and a division with their slow paths.
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
// of one key head does all of that chunk's preparation for them; steps 0-2
// once (step 1 for all heads at once), 3-5 for each head in turn:
//   0. with L2Norm, the chunk's k rows normalised as they arrive (every CTA
//      of the key head, for its own K K^T), and the CTA of the key head's
//      first value head writes them, and the chunk's normalised q rows, to
//      kn and qn for the core forward (a memory-bound pass folded into a
//      compute-bound kernel rather than two passes of their own), unless
//      the core normalises them itself (kNormInCore);
//   1. the log-gate of each token (from the raw input when asked) and its
//      chunk-local cumulative sum, by a warp scan, written to gcum;
//   2. K K^T of the chunk's k rows on the tensor cores (one m64n64 wgmma
//      of the CTA's warpgroup, as the fused core kernel forms it: exact
//      16-bit products, fp32 sums; warp w holds rows 16w..16w+15), kept for
//      every head;
//   3-5. A2 = (I + diag(beta) L)^-1 diag(beta) with L = StrictLower(K K^T
//      * Gamma), Gamma_ij = exp(g_i - g_j) (one exponential of the
//      difference: exp(-g_j) alone overflows under strong decay), zero from
//      row len on: gdn_solve.cuh's steps in a 64 x 64 fp16 tile T (L, then
//      the diagonal blocks' inverses by forward substitution in fp32, then
//      the blocks below them as fp16 products with fp32 sums), the fused
//      core kernel's arithmetic to the operation; then T's rows < len to A2,
//      the operand the core kernel's products take
//      (kernsrc.HopperFlagAPrepared), each warp its own 16 rows.
//   Barriers a head: the diagonal blocks', merge_blocks' two and the one
//   after it (the gates of every head come before the head loop, and each
//   warp copies out its own rows of A2, so that no more are needed).
// Shared memory, from a base aligned to 1024 bytes, in two phases: the k
// rows (steps 0-2, in wgmma's swizzled tiles), then T, the diagonal
// blocks' fp32 scratch and, with several heads, K K^T kept in its
// accumulator layout for each head's L (kept in registers, it spills); g
// and beta of every head and the warp totals after both. About 18 KB (26
// KB for several heads) and 64 registers a thread (__launch_bounds__
// holds it there), so eight CTAs fit an SM: the kernel's instruction
// count, not memory, bounds it.
// Dynamic shared memory: kernsrc.PrepChunkSharedBytes.
namespace {
// The chunk's k rows as wgmma takes them: two tiles (d 0-63, 64-127) of 64
// rows of 128 bytes, swizzled by swz128 (16-byte chunk c of row i at c ^ (i
// % 8)), each 1024-byte aligned.
constexpr int kKsTile = 64 * 128;
constexpr int kKsBytes = 2 * kKsTile;
constexpr int kTBytes = 64 * 128;  // T: fp16 [64][64], 128-byte rows swizzled by swz128
// K K^T for several heads: warp w's n-tiles 0 .. 2w + 1 (those that reach
// the diagonal), a float4 a lane each, tile n of warp w at w (w + 1) + n.
constexpr int kKKBytes = kHeads > 1 ? 20 * 32 * 16 : 0;
constexpr int kPhase2Bytes = kTBytes + kLdBytes + kKKBytes;
constexpr int kVecOff = kKsBytes > kPhase2Bytes ? kKsBytes : kPhase2Bytes;  // g, beta, the warp total
// g and beta of every head, the warp totals; then the slack that aligns
// the dynamic base to 1024 bytes (the swizzle of Ks's tiles).
constexpr int kPrepChunkSmem = kVecOff + 2 * 64 * 4 * kHeads + 16 + 1024;
static_assert(kHeads <= 4, "the warp totals' 16 bytes; the gates' two heads a thread");
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
  const uint32_t raw_addr = smem_addr(smem_raw);
  unsigned char* const base = reinterpret_cast<unsigned char*>(smem_raw) + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  unsigned char* const Ks = base;  // steps 0-2: two swizzled tiles (kKsTile)
  unsigned char* const T = base;                     // steps 3-5: A2 of the head
  float* const ld = reinterpret_cast<float*>(base + kTBytes);        // gdn_solve.cuh's scratch
  float4* const KK = reinterpret_cast<float4*>(base + kTBytes + kLdBytes);  // kHeads > 1
  float* gv = reinterpret_cast<float*>(base + kVecOff);  // [kHeads][64]
  float* bv = gv + 64 * kHeads;                          // [kHeads][64]
  float* wsum = bv + 64 * kHeads;                        // [kHeads]
  const int c = blockIdx.x, h0 = kHeads * blockIdx.y, hk = h0 / (Hv / Hq);
  int t = threadIdx.x, warp = t >> 5, lane = t & 31, gq = lane >> 2, tq = lane & 3;  // see the head loop
  const int b = chunks[2 * c], len = chunks[2 * c + 1] - b;

  // The gate inputs of every head, loaded first (step 1 below), so that
  // their round trip overlaps step 0: thread t takes token 32 (warp % 2) +
  // lane of heads warp / 2 + 2 r (r = 0, 1; those below kHeads).
  const int gtok = 32 * (warp & 1) + lane;
  float x[2] = {0.f, 0.f}, bb[2] = {0.f, 0.f};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int vh = (warp >> 1) + 2 * r;
    if (vh < kHeads && gtok < len) {
      const long long at = (long long)(b + gtok) * Hv + h0 + vh;
      x[r] = g[at];
      bb[r] = beta_of((flags & kBetaFP32) ? static_cast<const float*>(beta)[at]
                                          : E::to_float(static_cast<const uint16_t*>(beta)[at]),
                      flags & kBetaLogits, flags & kNegEigval);
    }
  }

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
      *reinterpret_cast<uint4*>(Ks + (part >> 3) * kKsTile + swz128(i, 16 * (part & 7))) = xk[u];
      if (writer) {
        xq[u] = l2_normalise(xq[u]);
        if (i < len) {
          reinterpret_cast<uint4*>(kn + row)[part] = xk[u];
          reinterpret_cast<uint4*>(qn + row)[part] = xq[u];
        }
      }
    }
  }

  // 1. Gates of every head at once: each thread's token of (up to) two
  // heads, two inclusive warp scans side by side, then the odd warps add the even
  // warps' totals (the same sums, in the same order, as one head at a time).
  // gv and bv are complete after the barrier that ends K K^T (step 2).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int vh = (warp >> 1) + 2 * r;
    if (vh < kHeads && gtok < len && (flags & kGateInKernel))
      x[r] = -__expf(a_log[h0 + vh]) * softplus(x[r] + dt_bias[h0 + vh]);
  }
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float y = __shfl_up_sync(0xffffffffu, x[r], o);
      if (lane >= o) x[r] += y;
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int vh = (warp >> 1) + 2 * r;
    if (vh < kHeads) {
      if (!(warp & 1) && lane == 31) wsum[vh] = x[r];
      bv[64 * vh + gtok] = bb[r];
    }
  }
  fence_async_smem();  // step 0's stores of Ks, before the wgmma reads them
  __syncthreads();     // the even warps' totals; step 0's k rows complete

  // 2. K K^T on the tensor cores: one m64n64 wgmma of the CTA's warpgroup,
  // both operands Ks (k-steps of 16 along d), in the dtype the rows have;
  // warp w's accumulators are rows 16w.. in the m16n8 tiles' layout
  // (acc[4 n + e]: gdn_solve.cuh). The tiles right of the diagonal come
  // out too (K K^T is symmetric); gate_lower masks them. The gates'
  // second half runs while it does.
  float acc[32];
  {
    const DescBase sd(Ks);
    wgmma_fence();
    if (GDN_FP16 != 0 || l2) {  // fp16 rows: the input's, or normalised (l2_normalise)
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        const uint64_t dk = sd.at((ks >> 2) * kKsTile + (ks & 3) * 32, 16, 1024);
        wgmma_ss_n64<0, 0>(acc, dk, dk, ks > 0);
      }
    } else {
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        const uint64_t dk = sd.at((ks >> 2) * kKsTile + (ks & 3) * 32, 16, 1024);
        wgmma_ss_n64_bf16<0, 0>(acc, dk, dk, ks > 0);
      }
    }
    wgmma_commit();
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int vh = (warp >> 1) + 2 * r;
    if (vh < kHeads) {
      if (warp & 1) x[r] += wsum[vh];
      gv[64 * vh + gtok] = x[r];
      if (gtok < len) gcum[(long long)(b + gtok) * Hv + h0 + vh] = x[r];
    }
  }
  wgmma_wait<0>();
  reg_fence(acc, 32);
  __syncthreads();  // gv complete; every warp's wgmma done with the k rows (T and K K^T's copy replace them)

  // With several value heads, K K^T is kept for each head's L: each
  // warp's n-tiles that reach the diagonal (L is zero right of them: the
  // head loop reads zeros there), a float4 a lane (conflict-free 16-byte
  // accesses).
  if (kHeads > 1) {
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      if (n > 2 * warp + 1) break;
      KK[(warp * (warp + 1) + n) * 32 + lane] = make_float4(acc[4 * n], acc[4 * n + 1], acc[4 * n + 2], acc[4 * n + 3]);
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
    // No barrier of the CTA before a head: gv and bv hold every head's
    // vectors (read only), and each warp writes T's rows, the diagonal block
    // and the ld scratch of its own 16 rows, which after the previous head's
    // last barrier only this warp reads (its step 5 below, then a warp
    // barrier).
    const float* const gh = gv + 64 * vh;
    const float* const bh = bv + 64 * vh;

    // 3-4 (of 3-5 above). gdn_solve.cuh's steps over T: L and the
    // diagonal blocks' scratch, their inverses, then the blocks below them.
    float X[32];
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      const float4 v = kHeads == 1            ? make_float4(acc[4 * n], acc[4 * n + 1], acc[4 * n + 2], acc[4 * n + 3])
                       : n <= 2 * warp + 1 ? KK[(warp * (warp + 1) + n) * 32 + lane]
                                           : make_float4(0.f, 0.f, 0.f, 0.f);
      X[4 * n] = v.x, X[4 * n + 1] = v.y, X[4 * n + 2] = v.z, X[4 * n + 3] = v.w;
    }
    float* const ldw = warp_ld(ld, warp);
    gate_lower<false>(X, gh, len, warp, lane);
    store_l_and_diag(T, ldw, X, bh, warp, lane, gq, tq);
    invert_diag_block(T, ldw, bh, warp, lane);
    __syncthreads();  // every diagonal block written
    merge_blocks(T, warp, lane, 0);  // (barrier 0 of the CTA's 128 threads: __syncthreads)
    __syncthreads();

    // 5. The warp's own rows of A2 (T's rows < len), 16 bytes a lane a
    // step: the eight lanes of a row write its 128 contiguous bytes.
#pragma unroll
    for (int e = lane; e < 128; e += 32) {
      const int i = 16 * warp + (e >> 3), part = e & 7;
      if (i < len)
        reinterpret_cast<uint4*>(A2 + ((long long)(b + i) * Hv + h) * 64)[part] =
            *reinterpret_cast<const uint4*>(T + swz128(i, 16 * part));
    }
    // The warp's lanes read rows other lanes of it write next (the next
    // head's L and diagonal block): a warp barrier orders them.
    __syncwarp();
  }
}

// The kernel's parameters as Go packs them (kernsrc.PrepParams): the
// kernel takes these members, in order (pointers, then scalars: every one
// naturally aligned, so the sizes fix the offsets Go writes).
struct PrepPtrs {
  const uint16_t* q;
  const uint16_t* k;
  uint16_t* qn;
  uint16_t* kn;
  const void* beta;
  const float* g;
  const float* a_log;
  const float* dt_bias;
  float* gcum;
  uint16_t* A2;
  const int* chunks;
};
struct PrepScalars {
  int Hq, Hv, flags;
};
using PrepKernel = void(decltype(PrepPtrs::q), decltype(PrepPtrs::k), decltype(PrepPtrs::qn), decltype(PrepPtrs::kn),
                        decltype(PrepPtrs::beta), decltype(PrepPtrs::g), decltype(PrepPtrs::a_log),
                        decltype(PrepPtrs::dt_bias), decltype(PrepPtrs::gcum), decltype(PrepPtrs::A2),
                        decltype(PrepPtrs::chunks), decltype(PrepScalars::Hq), decltype(PrepScalars::Hv),
                        decltype(PrepScalars::flags));
static_assert(SameType<decltype(gdn_prep_chunk), PrepKernel>::value, "gdn_prep_chunk takes PrepPtrs, then PrepScalars");
#ifdef GDN_PREP_PARAMS_BYTES
static_assert(sizeof(PrepPtrs) == GDN_PREP_OFF_HQ && sizeof(PrepPtrs) + sizeof(PrepScalars) == GDN_PREP_PARAMS_BYTES,
              "kernsrc.PrepParams");
#endif
