// gdn_hopper.cu: the Gated DeltaNet core forward for Hopper (sm_90a): TMA
// loads and stores, mbarrier rings, wgmma for every product, and warp
// specialisation.
//
// The state is kept transposed, S^T (value rows x key columns), as the fp32
// accumulator of wgmma in the consumer warpgroups: consumer w owns value
// rows 64w..64w+63, so every product that involves the state takes S^T (or
// something derived from it) straight from registers as its A operand, and
// the consumers never exchange data. Per 64-token chunk (docs/SPEC.md), with
// A2 = A diag(beta) masked to j <= i < len, P = Lower(Q K^T * Gamma) and
// f = e^{g_last - g}:
//
//   U^T  = S^T K^T,  O'^T = S^T (Q diag(e^g))^T
//   Vn^T = (V - diag(e^g) U)^T A2^T                 (= beta (V - e^g U) as A@W)
//   O^T  = scale (O'^T + Vn^T P^T)
//   S^T <- e^{g_last} S^T + (Vn^T diag(f)) K
//
// Warpgroups of one CTA (one CTA per sequence, value head and 64*NC-wide
// value tile):
//   aux (warpgroups 0..kAux-1, each taking every kAux-th chunk) prepares a
//     chunk as soon as its tiles land: P = Q K^T, the gate vectors, A2
//     (written over the chunk's A, which TMA puts where A2 and P go), the
//     gated P, and fp16 operands in place (bf16 inputs are converted: fp16
//     keeps 3 more mantissa bits for every derived operand); then marks the
//     stage ready.
//   converter (warpgroup 1 + NC, kConv: BV 128 with bf16 q and k only)
//     converts K and Q in the aux group's place, once its Q K^T has read
//     them, and marks the stage ready beside it; under kNorm (the full
//     forward's L2 norm) it normalises and converts them as soon as they
//     land instead, and the aux group's Q K^T waits for it. Under kFused
//     (the full forward's whole preparation here) it also builds P, and
//     the aux group builds A2 from K (run_aux_fused); without kNorm both
//     products read the tiles as loaded and the converter converts them
//     after (run_fused_converter).
//   consumers (warpgroups 1..NC) run the chain above, write o through a
//     swizzled staging tile by TMA store (rows past a sequence's end by
//     plain stores) and release the stage; the first consumer's first
//     thread refills it with the chunk kStages ahead during the next
//     chunk's first products.
// How the work splits between them depends on which side bounds a chunk
// (kWide below, docs/PERF.md v12).
//
// Compile-time choices (-D): GDN_FP16 (0: bf16 inputs and output, 1: fp16),
// GDN_QK_FP16 (q and k in fp16 whatever GDN_FP16 says: the full forward's
// normalised copies, which its preparation writes in fp16),
// GDN_NC (consumer warpgroups: 1 or 2, value tile 64 or 128), GDN_QK_NORM
// and GDN_FUSED (the full forward's L2 norm, and its whole preparation, in
// this kernel: below), and the contract defines of kernsrc/hopper.go (sizes,
// offsets, flags), checked.
#include "gdn_hopper.cuh"
#include "gdn_solve.cuh"

#ifndef GDN_FP16
#define GDN_FP16 0
#endif
#ifndef GDN_QK_FP16
#define GDN_QK_FP16 GDN_FP16
#endif
#ifndef GDN_NC
#define GDN_NC 2
#endif
// GDN_TRANSFER builds the transfer pass of a sequence-parallel plan (flag
// kTransfer): no q, no P, no o; only U = K S, Vn and the state update.
#ifndef GDN_TRANSFER
#define GDN_TRANSFER 0
#endif

// GdnHopperParams is the kernel's only parameter, packed byte for byte by
// kernsrc.HopperParams.Pack (kernsrc/hopper.go, the one Go file that mirrors
// this contract): five tensor maps, eight pointers, seven 32-bit fields. The
// defines below come from that file; the static_asserts hold the two sides
// together (sizes fix the offsets: every member is naturally aligned).
struct HopperPtrs {
  const float* g;          // [tokens, Hv] chunk-local cumulative log-gate (GDN_FUSED: the raw log-gate, or a)
  const void* beta;        // [tokens, Hv] fp32 or the input dtype (flag)
  const float* h0;         // [N, Hv, 128, 128] or null
  float* ht;               // [N, Hv, 128, 128] or null
  const void* cu_seqlens;  // [N+1] int32 or int64 (flag), or null
  uint16_t* o;             // [tokens, Hv, 128], for rows TMA must not write
  const float* a_log;      // [Hv], kGateInKernel only
  const float* dt_bias;    // [Hv], kGateInKernel only
};
struct HopperScalars {
  float scale;
  int32_t T;  // tokens per sequence (B*T in all with cu_seqlens)
  int32_t Hq;
  int32_t Hv;
  int32_t N;  // sequences (or segments: grid.y)
  int32_t flags;
  int32_t n_ht;  // ht is written for sequences n < n_ht only
};
struct GdnHopperParams {
  TmaDesc tm_q;  // q [B, T, Hq, 128] as 4-D (128, Hq, T, B), box (64, 1, 64, 1)
  TmaDesc tm_k;  // k, the same
  TmaDesc tm_v;  // v [B, T, Hv, 128] as (128, Hv, T, B), box (64, 1, 64, 1)
  TmaDesc tm_a;  // A [B, T, Hv, 64] as (64, Hv, T, B), box (32, 1, 64, 1) fp32 or (64, 1, 64, 1) bf16
  TmaDesc tm_o;  // o [B, T, Hv, 128] as (128, Hv, T, B), box (64, 1, 64, 1)
  HopperPtrs ptr;
  HopperScalars sc;
};

enum : int32_t {
  kBetaFP32 = 1,      // beta is fp32 (else the input dtype)
  kAFP32 = 2,         // A is fp32 (else bf16)
  kSeqlensInt64 = 4,  // cu_seqlens is int64 (else int32)
  // cu_seqlens holds int32 (begin, end) token pairs, one per n: the
  // segments of a sequence-parallel plan, in any order, gaps allowed.
  kSegPairs = 8,
  // Transfer pass of a sequence-parallel plan: no o is written; grid.x is
  // doubled, the first half computes each segment's end state from zero
  // (B), the second its transfer matrix (M: v read as zero, h0 = I),
  // written at ht + N * Hv * 128 * 128.
  kTransfer = 16,
  // A is A2 already (the full forward's preparation: fp16 A diag(beta), zero
  // above the diagonal, written for each chunk's own rows): no build, only a
  // short chunk's rows past its end are cleared.
  kAPrepared = 32,
  // The transfer pass takes every segment's M CTA before any B CTA
  // (gdn_hopper_fwd).
  kMFirst = 64,
  // GDN_FUSED: g holds the raw input a of the gate, g = -exp(a_log)
  // softplus(a + dt_bias) (FLA's use_gate_in_kernel), not the log-gate.
  kGateInKernel = 128,
  // The transfer pass of a plan whose first segments run their output pass
  // beside it (splitcall.go, "early"): a dependent launch of that pass, so
  // its CTAs take the SMs the early CTAs leave free. It reads nothing the
  // early pass writes, so no CTA waits at its start; its last CTA waits for
  // the early pass at its end, so that the scan after it (which waits for
  // this grid) finds the early pass's states complete too.
  kAfterEarly = 256,
  // The early pass itself (an output pass over each sequence's first
  // segment): only GDN_TEST_EARLY_DELAY reads it.
  kEarlyPass = 512,
};

static_assert(sizeof(TmaDesc) == 128 && alignof(TmaDesc) == 64, "tensor map");
static_assert(sizeof(HopperPtrs) == 64 && sizeof(HopperScalars) == 28, "pointer and scalar blocks");
#ifdef GDN_PARAMS_BYTES
static_assert(sizeof(GdnHopperParams) == GDN_PARAMS_BYTES, "kernsrc.HopperParamsBytes");
static_assert(GDN_OFF_PTRS == 5 * sizeof(TmaDesc) && GDN_OFF_SCALARS == GDN_OFF_PTRS + sizeof(HopperPtrs),
              "kernsrc.HopperOff*");
static_assert(GDN_FLAG_BETA_FP32 == kBetaFP32 && GDN_FLAG_A_FP32 == kAFP32 && GDN_FLAG_SEQLENS_INT64 == kSeqlensInt64 &&
                  GDN_FLAG_SEG_PAIRS == kSegPairs && GDN_FLAG_TRANSFER == kTransfer && GDN_FLAG_A_PREPARED == kAPrepared &&
                  GDN_FLAG_M_FIRST == kMFirst && GDN_FLAG_GATE_IN_KERNEL == kGateInKernel &&
                  GDN_FLAG_AFTER_EARLY == kAfterEarly && GDN_FLAG_EARLY_PASS == kEarlyPass,
              "kernsrc.HopperFlag*");
#endif

namespace {

constexpr int kNC = GDN_NC;
constexpr int kBV = 64 * kNC;
// Aux warpgroups: each prepares every kAux-th chunk (the aux work per chunk,
// element-wise and latency-bound, takes longer than the consumers' chain).
#ifndef GDN_AUX
#define GDN_AUX 2
#endif
constexpr int kAux = GDN_AUX;
constexpr bool kConvert = GDN_FP16 == 0;  // bf16 v (kWide: converted to fp16 in place by the aux)
constexpr bool kQKFP16 = GDN_QK_FP16 != 0;  // else q and k are bf16, converted to fp16 in place
static_assert(kQKFP16 || kConvert, "fp16 v with bf16 q and k is not a variant");
constexpr bool kXfer = GDN_TRANSFER != 0;
// A converter warpgroup (GDN_CONV 1: the core forward at BV 128 with bf16
// q and k) converts each chunk's K and Q to fp16 in place once the aux
// group's Q K^T has read them, beside the aux group's gating of P: the
// conversion leaves the aux group's chain, the bound of a BV 128 chunk
// (docs/PERF.md v23-v24), without entering the consumers' (converting
// there, each group its half at the start of a chunk or the next chunk's
// while its last products ran, measured no faster: the consumers' chain
// became the bound).
#ifndef GDN_CONV
#define GDN_CONV 0
#endif
constexpr int kConv = GDN_CONV;
static_assert(kConv == 0 || (kConv == 1 && kNC == 2 && !kQKFP16 && !kXfer), "converter warpgroup: BV 128, bf16 q/k");
constexpr int kThreads = 128 * (kAux + kNC + kConv);
// GDN_QK_NORM 1: the full forward's L2Norm done here rather than by its
// preparation (which then neither reads q nor writes normalised copies):
// the converter normalises each row of K and Q as it converts them, before
// the aux group's Q K^T (then an fp16 product of the normalised rows), with
// the preparation's arithmetic to the bit (l2_normalise, gdn_prep.cu), so
// that the tiles are the copies it would have written. Only with a
// converter (BV 128, bf16 q and k), and A prepared (the full forward's).
#ifndef GDN_QK_NORM
#define GDN_QK_NORM 0
#endif
constexpr bool kNorm = GDN_QK_NORM != 0;
static_assert(!kNorm || kConv == 1, "the L2 norm is the converter's");
// GDN_FUSED 1: the full forward's whole preparation done here, so that it
// needs no kernel before this one: the first consumer warp takes the raw
// log-gates (or the gate's raw input, kGateInKernel) and writes each
// chunk's gate vectors (run_consumer), the converter builds P
// (run_normaliser after its norm under kNorm, run_fused_converter from
// the bf16 tiles without), and the aux group builds A2 itself from K:
// K K^T, L, the inverse by 16 x 16 blocks (run_aux_fused). No A is loaded.
#ifndef GDN_FUSED
#define GDN_FUSED 0
#endif
constexpr bool kFused = GDN_FUSED != 0;

// GDN_WHATIF (timing experiments only: its outputs are wrong, and the
// library never sets it): the fused chunk without some of its producers'
// work, to see what that work costs in time (scripts/device-run.sh
// knobfull:GDN_WHATIF=N@cases times it against the same binary without).
// 1: no inverse (gdn_solve.cuh's steps 2 and 3 in run_aux_fused); 2: no
// P in the converter; 3: no norm in the converter (every kNorm variant's;
// without kNorm under kFused, no conversion of K and Q);
// (4, gate_lower without its exponentials, retired); 5: the aux group
// does nothing past its waits; 6: 2, 3 and 5 together (the consumers, with
// their first warp writing the gate vectors); 7: the gate vectors
// without the gate (softplus) and without the scan (the raw values as
// they are); 8: the core forward's aux group (not kFused) does nothing past
// its waits; 9: 8, and the converter (not under kNorm) does no conversion
// (the consumers' chain and the loads alone); in the same aux group, 10: no A2 build, 11:
// no in-place conversion of the tiles, 12: no P (14: without its product
// alone, 15: without its gating alone); 13: all its work, but its
// arrivals made as soon as the tiles land (does the chunk wait for the aux
// group's latency, or share the SM with its work?); (16, retired); 17: the
// BV 64 chain without Q's tiles by TMA (what the stage's loads cost). At 0
// the kernel is instruction for instruction the same as without these
// lines. docs/PERF.md v27, v28, v32 and v33 have what they measured.
#ifndef GDN_WHATIF
#define GDN_WHATIF 0
#endif
constexpr int kWhatIf = GDN_WHATIF;
// 18: 6, and the gate warp writes no vectors (it only arrives on full);
// 19: 18, and the consumers store no o; 20: no o stored, all else kept;
// the output's store in parts (o wrong): 21 without the TMA store and its
// wait, 22 only its two named barriers, 23 without its proxy fence, 26 O
// times zero staged (the same instructions as 0, zeros for data); O's
// products in parts (o wrong, still staged and stored): 27 without the O'
// product (S^T Q^T), 28 without the P term (Vn^T P^T), 29 without both;
// (30-32 and 34-36, retired: a fifth warpgroup's handoff of O's operands,
// the chain without Vn's product, the gate work out of the kernel, half
// the preparation; what each measured is in docs/PERF.md v38, their code
// in commit 9f9e723.)
// Beware: where O is never read after its products (19, 20, 22), ptxas
// drops the O' and P-term products as dead code (the fused kernel's 44
// HGMMA become 33), so those measure the products too (what v35-v36 of
// docs/PERF.md took for the staging's cost: v37).
// The fused kernel stages each chunk's o at the end of the chunk (the
// stmatrix) but stores it (the proxy fence, the group's barrier and the
// TMA store) in the next chunk, once that chunk's first products are
// issued: off the chain between a chunk's last products and the next
// one's first (1.01-1.04x on the fused rows, docs/PERF.md v36; the core
// variants measured 0.97-1.03x and keep the store at the chunk's end).
constexpr bool kDeferStore = kFused;
constexpr bool kW6 = kWhatIf == 6 || kWhatIf == 18 || kWhatIf == 19;
constexpr bool kWhatIfNoStore = kWhatIf == 19 || kWhatIf == 20;
constexpr bool kWhatIfNoOProducts = kWhatIf == 29;

// GDN_TIMELINE (measurement only; the library never sets it): F + 1 makes
// the fused kernel's first CTA stamp its chunks F .. F + kTlChunks - 1 with
// clock() (32 bits: a window of 13 chunks is far below 2^32 cycles) as each
// warpgroup passes the steps below, and leave the stamps, as raw words,
// over the start of its ht rows (ht is then wrong there): `gdn bench` with
// GDN_JIT_DEFINES=GDN_TIMELINE=F+1 prints them (cmd/gdn/timeline.go). They
// say how far the producers run ahead of the consumers, and where a chunk
// waits. The first sequence needs chunks past the window (F + 13 < its
// chunks): the stamps taken after an arrival on ready reach the reader
// through the next chunk's. The steps:
//   0 converter past full    1 converter's normed arrive   2 converter's ready arrive
//   3 aux past full          4 aux past normed             5 aux's ready arrive
//   6 consumer group 0 past ready                          7 its release of the stage
//   8 the chunk's copies issued (the refill, kStages chunks earlier)
// At 0 the kernel is instruction for instruction the same as without it.
// (printf from the kernel made ptxas serialise the wgmma or spill; stamps
// in a global array spilled the 64-register groups: docs/PERF.md v27.)
#ifndef GDN_TIMELINE
#define GDN_TIMELINE 0
#endif
constexpr int kTlFirst = GDN_TIMELINE - 1, kTlChunks = 13, kTlSteps = 9;
// Without kNorm (q and k given normalised, or not to be), the fused
// preparation's two products read K and Q as loaded, in bf16 (exact
// products), and the converter turns them into fp16 once both have read
// them (run_fused_converter).
static_assert(!kFused || (kConv == 1 && kAux == 1), "the fused preparation needs the converter and one aux group");
// The transfer matrix's early exit (run_consumer). GDN_TRANSFER_NO_EXIT is
// for tests only: the walk to the end that the exit must equal.
#ifdef GDN_TRANSFER_NO_EXIT
constexpr bool kEarlyExit = false;
#else
constexpr bool kEarlyExit = true;
#endif
// For tests only (split_gpu_test.go, TestSplitEarlyWaitsForEarlyPass):
// GDN_TEST_EARLY_DELAY makes the early pass's CTAs spin about a
// millisecond before their work, so that the transfer pass ends long before
// it and the scan's order after the early pass is put to the test.
#ifdef GDN_TEST_EARLY_DELAY
constexpr bool kTestEarlyDelay = true;
#else
constexpr bool kTestEarlyDelay = false;
#endif
// How a chunk's first products are formed (measured, docs/PERF.md v12):
// a CTA with one consumer group is bound by that group's chain of products,
// which runs faster as fewer, wider products: [U | O'] as one m64n128
// product in two halves of d, and Vn with V converted to fp16 in the stage
// by the aux group (kWide). With two consumer groups (and in the transfer
// pass) the aux group is the bound, so the consumers take that work off it:
// V stays as loaded and enters through registers, U and O' are m64n64
// products, and the aux converts only K and Q.
constexpr bool kWide = kNC == 1 && !kXfer;
// (The deferred flush sits in the two-group chain's branch of the first
// products: a kWide chain would never store a chunk but the last.)
static_assert(!kDeferStore || (!kWide && !kXfer), "o's deferred store is the two-group chain's");
// The consumers give O' its factors e^{g_i} (columns of O'^T, after its
// product): the aux group, the bound of a BV 128 chunk, converts Q to fp16
// where it must (bf16 inputs) but never scales it. (Scaling Q's rows in the
// conversion cost the aux group 64 multiplies a thread a chunk against the
// consumers' 32 a group, docs/PERF.md v22.)
typedef Elem<GDN_FP16 != 0> E;

// A packed pair of fp16 (F16) or bf16 values (lo, hi) as two floats.
template <bool F16>
GDN_DEVICE float2 unpack2_of(uint32_t x) {
  if (F16) return make_float2(fp16_to_float((uint16_t)(x & 0xffff)), fp16_to_float((uint16_t)(x >> 16)));
  return make_float2(__uint_as_float(x << 16), __uint_as_float(x & 0xffff0000u));
}
// A packed pair of the input dtype (v's) as two floats.
GDN_DEVICE float2 unpack2(uint32_t x) { return unpack2_of<GDN_FP16 != 0>(x); }

// Register budgets (setmaxnreg). The consumers hold S^T, [U | O'] and half
// of S^T's fp16 copy; the aux groups give up what they can, the converter
// nearly all. The CTA's pool
// is what the launch gave it (the __launch_bounds__ budget: 65536 / threads,
// rounded down to a multiple of 8, per thread), and an increase waits until
// the pool can serve it: asking for more than the decreases free hangs.
constexpr int kLaunchRegs = (65536 / kThreads) / 8 * 8 > 255 ? 255 : (65536 / kThreads) / 8 * 8;
// (176 for the fused consumers, the producers at 80 each, with S's fp16
// copy in two halves, and the converter's norm four row groups at once
// with those 80: measured 1.00x, docs/PERF.md v28.)
constexpr int kConsumerRegs = kNC == 1 ? 208 : 192;
// The least setmaxnreg allows: the converter holds two pieces at a time
// (with kNorm, 48: two row groups at once, each a pair of pieces unpacked
// to floats, so that the second's loads overlap the first's sums).
constexpr int kConvRegs = kFused ? 64 : kNorm ? 48 : 24;
constexpr int kAuxRegs =
    ((kLaunchRegs * kThreads - kConsumerRegs * 128 * kNC - kConvRegs * 128 * kConv) / (128 * kAux)) / 8 * 8;
constexpr bool kSetRegs = kLaunchRegs < kConsumerRegs;
static_assert(!kSetRegs || kAuxRegs * 128 * kAux + kConsumerRegs * 128 * kNC + kConvRegs * 128 * kConv <=
                               kLaunchRegs * kThreads,
              "register pool of the CTA");
static_assert(!kSetRegs || kAuxRegs >= 64, "aux register budget");

// Named barriers: 1..kNC for each consumer group, kBarAux + a for aux group a,
// kBarConsumers for all consumer groups together (the transfer matrix's
// early exit), kBarConv for the converter (kFused).
constexpr int kBarAux = 7;
constexpr int kBarConsumers = 5;
constexpr int kBarConv = 3;  // the converter group (kFused)

// One stage of the ring: the chunk's operands (TMA destinations and what
// the aux group derives), every tile 1024-byte aligned. Offsets in bytes.
// Three stages at either tile width: A lands in the two tiles that A2 and P
// then overwrite (A fp32 is two tiles, bf16 one) instead of a ring of its
// own, which is what lets three fit at BV 128. (Measured: no faster than two
// stages there, docs/PERF.md v11; the copies were not what bounded a chunk.)
constexpr int kStages = 3;
constexpr int kTile = 8192;                   // 64 rows x 128 bytes
constexpr int kOffBQ = 0;                     // 2 half tiles (d blocks) of 128 rows: K rows j, then Q rows i
constexpr int kOffV = kOffBQ + 4 * kTile;     // kNC blocks [64 j][64 v]
constexpr int kOffA2 = kOffV + kNC * kTile;   // fp16 [64 i][64 j]; first A: fp32 [64 i][32 j] x 2 or bf16 [64 i][64 j]
constexpr int kOffP = kOffA2 + kTile;         // fp16 [64 i][64 j]
constexpr int kOffVec = kOffP + kTile;        // floats: g, beta, eg, f [64 each], gamma
constexpr int kStageBytes = kOffVec + 2048;
constexpr int kOffOut = kStages * kStageBytes;     // kNC staging tiles [64 i][64 v]
constexpr int kOffBars = kOffOut + kNC * kTile;    // mbarriers
constexpr int kOffStop = kOffBars + 512;          // int: the transfer matrix's early exit (below)
// kFused: the aux group's scratch for the inverse (run_aux_fused), one for
// all stages (the aux group takes the chunks one at a time): the diagonal
// blocks of diag(beta) L in fp32, transposed, rows of kLdStride floats
// (conflict-free stores from the accumulator layout, 16-byte rows for
// broadcast loads). (The products' factors are all A2's and L's own blocks,
// in the stage.)
constexpr int kOffInv = kOffBars + 1024;
constexpr int kInvLd = 0;  // gdn_solve.cuh's scratch of the diagonal blocks (kLdBytes)
// After it, the raw gates of the consumers' gate warp (run_consumer): fp32
// [2][64], chunk x's at slot x % 2, copied a chunk ahead.
constexpr int kRawGates = kInvLd + kLdBytes;
constexpr int kInvBytes = (kRawGates + 2 * 64 * 4 + 1023) / 1024 * 1024;  // (whole kilobytes)
constexpr int kSmemBytes = kOffInv + (kFused ? kInvBytes : 0) + 1024;  // + alignment slack of the dynamic base

#ifdef GDN_SMEM_BYTES
static_assert(kSmemBytes == GDN_SMEM_BYTES, "kernsrc.HopperSharedBytes disagrees with the layout");
static_assert(kThreads == GDN_THREADS, "kernsrc.HopperThreads disagrees with the warpgroups");
#endif

// mbarriers, at kOffBars: per stage full (TMA bytes), ready (aux and
// converter done), empty (consumers done), qk_read (the converter's go),
// normed (under kNorm, the aux group's).
struct Bars {
  uint64_t full[kStages], ready[kStages], empty[kStages];
  uint64_t qk_read[kStages];  // the aux group is done reading K and Q as loaded (kConv, not kNorm)
  uint64_t normed[kStages];   // kNorm: the converter has normalised K and Q (the aux group's go)
};
static_assert(sizeof(Bars) <= kOffStop - kOffBars, "the stop word follows the mbarriers");
// GDN_TIMELINE's stamps: in the mbarrier block's unused bytes past the stop
// word, kTlChunks x kTlSteps words.
constexpr int kOffTl = kOffStop + 16;
static_assert(kOffTl + kTlChunks * kTlSteps * 4 <= kOffBars + 1024, "the stamps fit the mbarrier block");
GDN_DEVICE unsigned int* tl_stamps(unsigned char* smem) { return reinterpret_cast<unsigned int*>(smem + kOffTl); }
GDN_DEVICE void tl_stamp(unsigned char* smem, int c, int step) {
#if GDN_TIMELINE
  if (blockIdx.x == 0 && blockIdx.y == 0 && (threadIdx.x & 127) == 0 && c >= kTlFirst && c < kTlFirst + kTlChunks)
    tl_stamps(smem)[(c - kTlFirst) * kTlSteps + step] = (unsigned int)clock();
#endif
}

struct Vec {  // at kOffVec of a stage
  float g[64], beta[64], eg[64], f[64], gamma;
};

// Where a CTA runs: its sequence's tokens and TMA coordinates, its heads.
struct Work {
  int64_t bos;   // first token (flat index into the B*T tokens)
  int len;       // tokens of the sequence
  int nch;       // chunks
  int t0, b;     // TMA coordinates of the first token: (t0, b) in (T, B)
  int h, hk, v0; // value head, its query/key head, first value column
  int n;         // grid row: the sequence (or segment)
  bool zero_v;   // transfer matrix: v is zero (not loaded), h0 = I
  bool store_o;  // o is written (not in the transfer pass)
};

GDN_DEVICE int chunk_len(const Work& w, int c) { return min(64, w.len - 64 * c); }

GDN_DEVICE float read_beta(const GdnHopperParams& p, int64_t idx) {
  if (p.sc.flags & kBetaFP32) return static_cast<const float*>(p.ptr.beta)[idx];
  return E::to_float(static_cast<const uint16_t*>(p.ptr.beta)[idx]);
}

// TMA loads of chunk c's q, k, value tiles and A into a stage; one thread.
GDN_DEVICE void issue_loads(unsigned char* st, uint64_t* full, const GdnHopperParams& p, const Work& w, int c) {
  const bool a32 = p.sc.flags & kAFP32;
  // (What-if 17, timing only: the BV 64 chain without Q's two tiles by TMA,
  // 16 of the stage's 48 KB: what the stage's loads cost a chunk.)
  constexpr bool kNoQ = kWhatIf == 17 && kWide;
  mbar_arrive_expect_tx(full, ((kXfer || kNoQ ? 2 : 4) + (w.zero_v ? 0 : kNC) + (kFused ? 0 : a32 ? 2 : 1)) * kTile);
  const int t = w.t0 + 64 * c;
  if (!kFused) {  // (kFused builds A2 itself)
    tma_load_4d(st + kOffA2, &p.tm_a, full, 0, w.h, t, w.b);
    if (a32) tma_load_4d(st + kOffA2 + kTile, &p.tm_a, full, 32, w.h, t, w.b);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    tma_load_4d(st + kOffBQ + 2 * h * kTile, &p.tm_k, full, 64 * h, w.hk, t, w.b);
    if (!kXfer && !kNoQ) tma_load_4d(st + kOffBQ + (2 * h + 1) * kTile, &p.tm_q, full, 64 * h, w.hk, t, w.b);
  }
  if (w.zero_v) return;  // the value tiles stay zero (cleared at the start)
#pragma unroll
  for (int x = 0; x < kNC; ++x) tma_load_4d(st + kOffV + x * kTile, &p.tm_v, full, w.v0 + 64 * x, w.h, t, w.b);
}

// Eight bf16 values (16 bytes) as fp16.
GDN_DEVICE uint4 bf16_to_fp16x8(uint4 x) {
  uint32_t* v = reinterpret_cast<uint32_t*>(&x);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 y = unpack2_of<false>(v[j]);
    v[j] = pack_fp16x2(y.x, y.y);
  }
  return x;
}

// A[i][j] of a stage, two adjacent columns (j even); A32: A is fp32 (else
// bf16).
template <bool A32>
GDN_DEVICE float2 read_a2(const unsigned char* a, int i, int j) {
  if (A32) return *reinterpret_cast<const float2*>(a + (j >> 5) * kTile + swz128(i, (j & 31) * 4));
  const uint32_t x = *reinterpret_cast<const uint32_t*>(a + swz128(i, j * 2));
  return make_float2(bf16_to_float((uint16_t)(x & 0xffff)), bf16_to_float((uint16_t)(x >> 16)));
}

// A2 = A diag(beta), masked to j <= i < len (columns past the chunk may
// hold anything, SPEC, and 0 * NaN would poison the products), fp16, rows
// 16 warp + gq (+8), columns 16 ks + 2 tq (+1, +8, +9), for warp `warp` of
// an aux group. A2 is written over A, in place and without a barrier of
// the group: each warp reads and writes only its own 16 rows (a row keeps
// its 128 bytes in every tile), and A2's k-step ks covers bytes of A that
// only k-steps up to ks read (fp32: its 16-byte chunks 2ks, 2ks+1 of the
// first tile hold A's columns 8ks..8ks+7; bf16: the same columns), so a
// warp barrier between the reads and the store of each k-step suffices.
// A's dtype is a template parameter so that each chunk runs one loop of
// loads rather than both, predicated.
template <bool A32>
GDN_DEVICE void build_a2(unsigned char* st, const Vec& vec, int len, int warp, int lane) {
  const int gq = lane >> 2, tq = lane & 3;
  const int r0 = 16 * warp + gq, r1 = r0 + 8;
  const int m = lane >> 3, srow = 16 * warp + 8 * (m & 1) + (lane & 7);
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    uint32_t a2[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = (q & 1) ? r1 : r0;
      const int j = 16 * ks + 2 * tq + 8 * (q >> 1);
      float2 x = read_a2<A32>(st + kOffA2, i, j);
      const float2 b = *reinterpret_cast<const float2*>(&vec.beta[j]);
      const bool in = i < len;
      x.x = (in && j <= i) ? x.x * b.x : 0.f;
      x.y = (in && j + 1 <= i) ? x.y * b.y : 0.f;
      a2[q] = pack_fp16x2(x.x, x.y);
    }
    __syncwarp();
    stmatrix_x4(smem_addr(st + kOffA2) + swz128(srow, 16 * (2 * ks + (m >> 1))), a2[0], a2[1], a2[2], a2[3]);
  }
}

// Token t's entries of the gate vectors the consumers take, from its
// chunk-local cumulative log-gate g and the chunk's last, g_last: e^{g_t}
// and e^{g_last - g_t}, 0 past the chunk's len tokens.
GDN_DEVICE void write_gate_entries(Vec& vec, float g, float g_last, int t, int len) {
  vec.eg[t] = t < len ? __expf(g) : 0.f;
  vec.f[t] = t < len ? __expf(g_last - g) : 0.f;
}

// The gate vectors the consumers take, once vec.g holds the chunk's
// cumulative log-gates (g: thread t's, t < 64): write_gate_entries' and
// e^{g_last}.
GDN_DEVICE void write_gate_vectors(Vec& vec, float g, int t, int len) {
  const float g_last = vec.g[len - 1];
  if (t < 64) write_gate_entries(vec, g, g_last, t, len);
  if (t == 0) vec.gamma = __expf(g_last);
}

// (gate_lower, the gating of P and L: gdn_solve.cuh.)

// ---- An aux warpgroup: everything about a chunk that does not need the
// state.
// P = Q K^T of a stage's K and Q tiles (m64n64, k-steps of 16 along d; d
// 0..63 in half tile 0), issued and committed: bf16 operands (the tiles as
// loaded from bf16 inputs: exact products) or fp16.
template <bool BF16>
GDN_DEVICE void issue_qk(float* P, const DescBase& sd) {
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    const int half = ks >> 2, off = (ks & 3) * 32;
    const uint64_t da = sd.at(kOffBQ + (2 * half + 1) * kTile + off, 16, 1024);
    const uint64_t db = sd.at(kOffBQ + 2 * half * kTile + off, 16, 1024);
    if (BF16)
      wgmma_ss_n64_bf16<0, 0>(P, da, db, ks > 0);
    else
      wgmma_ss_n64<0, 0>(P, da, db, ks > 0);
  }
  wgmma_commit();
}

GDN_DEVICE void run_aux(unsigned char* smem, Bars& bars, const GdnHopperParams& p, const Work& w, int aw) {
  const int t = threadIdx.x & 127, warp = t >> 5, lane = t & 31;
  const int bar = kBarAux + aw;
  const int gq = lane >> 2, tq = lane & 3;
  const bool a32 = p.sc.flags & kAFP32;

  if (aw == 0 && t == 0) {
    tma_prefetch_desc(&p.tm_q);
    tma_prefetch_desc(&p.tm_k);
    tma_prefetch_desc(&p.tm_v);
    tma_prefetch_desc(&p.tm_a);
    tma_prefetch_desc(&p.tm_o);
    for (int c = 0; c < min(kStages, w.nch); ++c) issue_loads(smem + c * kStageBytes, &bars.full[c], p, w, c);
  }

  // g and beta of a chunk (one token per thread) are plain loads, strided
  // by Hv: issued two of this group's chunks ahead. One chunk ahead was not
  // enough: under the kernel's own HBM traffic the aux group still stalled
  // on them at every chunk (ncu: 16% of its stall samples at their first
  // use; two ahead made the BV 128 rows 8-15% faster, docs/PERF.md v14).
  // beta only builds A2: a prepared A2 needs none.
  const bool need_beta = !(p.sc.flags & kAPrepared);
  auto load_gates = [&](int c, float& gv, float& bv) {
    gv = bv = 0.f;
    const int64_t tok = w.bos + 64 * c + t;
    if (c < w.nch && t < chunk_len(w, c)) {
      gv = p.ptr.g[tok * p.sc.Hv + w.h];
      if (need_beta) bv = read_beta(p, tok * p.sc.Hv + w.h);
    }
  };
  float g_next, b_next, g_next2, b_next2;
  load_gates(aw, g_next, b_next);
  load_gates(aw + kAux, g_next2, b_next2);

  for (int c = aw; c < w.nch; c += kAux) {
    const int s = c % kStages, use = c / kStages;
    unsigned char* st = smem + s * kStageBytes;
    const DescBase sd(st);  // the stage's wgmma descriptors
    Vec& vec = *reinterpret_cast<Vec*>(st + kOffVec);
    const int len = chunk_len(w, c);
    const float gv = g_next, bv = b_next;
    g_next = g_next2, b_next = b_next2;
    load_gates(c + 2 * kAux, g_next2, b_next2);
    // With two aux groups the stage's previous phase (chunk c - kStages)
    // is the other group's, and it may still be pending when this group
    // gets here: a parity wait on full[s] would then pass at once (the
    // pending phase has the other parity), and this group would prepare
    // chunk c from the tiles of chunk c - kStages, or before they land.
    // Seen as a hang or NaN in about 2% of short split runs at BV 64. The
    // other group's arrival on ready[s] for that chunk proves the phase
    // complete, and ready's phase before it was this group's own arrival,
    // so that wait is unambiguous. (kernsrc/pipeline_model_test.go models
    // the ring's waits and arrivals: change it with them.)
    static_assert(kAux == 1 || (kAux == 2 && kStages % 2 == 1), "chunk c - kStages belongs to the other aux group");
    if (kAux > 1 && c >= kStages) mbar_wait(&bars.ready[s], (use - 1) & 1);
    mbar_wait(&bars.full[s], use & 1);
    if (kNorm) mbar_wait(&bars.normed[s], use & 1);
    // A transfer matrix that ended early (run_consumer): the chunks from
    // the stop on were never loaded; their phase of full was completed by
    // hand so that this group would see the stop.
    // (A vote, so that ptxas keeps the chunk index uniform: run_consumer.)
    if (kXfer && __all_sync(0xffffffffu, c >= *reinterpret_cast<volatile const int*>(smem + kOffStop))) break;
    if (kWhatIf == 8 || kWhatIf == 9) {
      if (kConv && !kNorm) mbar_arrive(&bars.qk_read[s]);
      mbar_arrive(&bars.ready[s]);
      continue;
    }
    if (kWhatIf == 13) {
      if (kConv && !kNorm) mbar_arrive(&bars.qk_read[s]);
      mbar_arrive(&bars.ready[s]);
    }

    if (t < 64) vec.g[t] = gv, vec.beta[t] = bv;
    // P = Q K^T from the tiles as they arrived (the input dtype: exact
    // products), before the conversion below rewrites them.
    float P[32];
    if (!kXfer && kWhatIf != 12 && kWhatIf != 14) issue_qk<!kQKFP16 && !kNorm>(P, sd);
    named_sync(bar, 128);
    write_gate_vectors(vec, gv, t, len);

    // A2 over A (see build_a2), or A2 as the preparation wrote it: rows past
    // a short chunk's end hold the next sequence's (or are TMA's zero fill
    // at the end of the tensor), and are cleared. A row keeps its 128 bytes
    // under the swizzle, so the rows from len on are the tile's bytes from
    // 128 len on.
    if (kWhatIf == 10) {
    } else if (kNorm || (p.sc.flags & kAPrepared)) {
      for (int q = 8 * len + t; q < 512; q += 128) *reinterpret_cast<uint4*>(st + kOffA2 + 16 * q) = make_uint4(0, 0, 0, 0);
    } else if (a32) {
      build_a2<true>(st, vec, len, warp, lane);
    } else {
      build_a2<false>(st, vec, len, warp, lane);
    }

    // The operands the consumers take from the stage as fp16, converted in
    // place from bf16 once every warp's part of Q K^T has read Q and K: K
    // and Q (by the converter where there is one: it waits for qk_read),
    // and V where the consumer reads it from the stage (kWide; else the
    // consumers read it into registers as loaded and convert there).
    if (!kXfer) wgmma_wait<0>();
    if (kConv && !kNorm && kWhatIf != 13) mbar_arrive(&bars.qk_read[s]);
    named_sync(bar, 128);
    // Unrolled, so that a tile's loads overlap the tile before's conversion.
#pragma unroll
    for (int x = 0; x < (kWide ? 4 + kNC : 4); ++x) {
      // Tiles 0, 2: K's d halves; 1, 3: Q's; then the value tiles, which
      // only the one-consumer chain takes from the stage (kWide).
      // The tile's dtype: q's and k's (x < 4) or v's (a constant unless
      // the two differ, GDN_QK_FP16).
      const bool isq = x < 4 && (x & 1), f16 = x < 4 ? kQKFP16 : !kConvert;
      // fp16 tiles stay as loaded, and the transfer pass has no Q. (Until
      // v32 the kWide chain's fp16 Q was rewritten as it was: without that
      // copy ptxas had serialised the fp16 BV 64 kernel's wgmma, v12. The
      // ptxas of CUDA 12.4 and 13 keep them pipelined without it now, and
      // the copy's shared-memory traffic cost the full forward's BV 64 rows
      // 1-3%: docs/PERF.md v32.)
      if (kConv && x < 4) continue;  // the converter's
      if (kWhatIf == 11) continue;
      if (f16 || (isq && kXfer)) continue;
      unsigned char* tile = st + kOffBQ + x * kTile;
      uint4 y[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) y[u] = *reinterpret_cast<const uint4*>(tile + (t + 128 * u) * 16);
#pragma unroll
      for (int u = 0; u < 4; ++u)
        *reinterpret_cast<uint4*>(tile + (t + 128 * u) * 16) = bf16_to_fp16x8(y[u]);
    }

    if (kXfer) {
      fence_async_smem();
      if (kWhatIf != 13) mbar_arrive(&bars.ready[s]);
      continue;
    }
    if (kWhatIf != 12) {
      reg_fence(P, 32);
      if (kWhatIf != 15) gate_lower<true>(P, vec.g, len, warp, lane);
      store_acc_fp16(st + kOffP, P, 8, 0, warp, lane);
    }

    fence_async_smem();
    if (kWhatIf != 13) mbar_arrive(&bars.ready[s]);
  }
}


// softplus as FLA's gate takes it (gdn_prep.cu's, to the bit): log(1 + e^x),
// x itself above 20.
GDN_DEVICE float gate_softplus(float x) { return x > 20.f ? x : log1pf(__expf(x)); }

// The gate's parameters under kGateInKernel: g = ga softplus(a + gb), ga =
// -e^{A_log} (gdn_prep_chunk's product, to the bit).
struct GateParams {
  bool on;
  float ga, gb;
};
GDN_DEVICE GateParams gate_params(const GdnHopperParams& p, const Work& w) {
  GateParams g{(p.sc.flags & kGateInKernel) != 0, 0.f, 0.f};
  if (g.on) g.ga = -__expf(p.ptr.a_log[w.h]), g.gb = p.ptr.dt_bias[w.h];
  return g;
}

// Chunk x's raw gates (lane's token and token lane + 32, 0 past the
// chunk; x < w.nch) into raw[64 (x % 2) ..] by cp.async, then a commit:
// one warp.
GDN_DEVICE void fetch_raw_gates(float* raw, const GdnHopperParams& p, const Work& w, int lane, int x) {
  const int len = chunk_len(w, x);
  const int64_t tok = w.bos + 64 * x + lane;
  float* const d = raw + (x & 1) * 64;
  cp_async4(d + lane, p.ptr.g + (lane < len ? tok * p.sc.Hv + w.h : 0), lane < len);
  cp_async4(d + lane + 32, p.ptr.g + (lane + 32 < len ? (tok + 32) * p.sc.Hv + w.h : 0), lane + 32 < len);
  cp_async_commit();
}
// A chunk's gate vectors (vec: g, eg, f and gamma, as write_gate_vectors
// leaves them), one warp, from the raw gates of lane's token (a) and of
// token lane + 32 (b), 0 past the chunk: g the chunk-local cumulative
// log-gates, gdn_prep_chunk's to the bit (an inclusive warp scan of each
// half of the chunk, the second half then adding the first's total: its
// two warps' order of additions).
GDN_DEVICE void write_chunk_gates(Vec& vec, float a, float b, int lane, int len, const GateParams& gp) {
  if (kWhatIf != 7 && gp.on) {
    if (lane < len) a = gp.ga * gate_softplus(a + gp.gb);
    if (lane + 32 < len) b = gp.ga * gate_softplus(b + gp.gb);
  }
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float u = __shfl_up_sync(0xffffffffu, a, o), v = __shfl_up_sync(0xffffffffu, b, o);
    if (lane >= o) a += u, b += v;
  }
  b += __shfl_sync(0xffffffffu, a, 31);
  const int last = (len - 1) & 31;
  const float last_a = __shfl_sync(0xffffffffu, a, last), last_b = __shfl_sync(0xffffffffu, b, last);
  const float g_last = len > 32 ? last_b : last_a;
  vec.g[lane] = a;
  vec.g[lane + 32] = b;
  write_gate_entries(vec, a, g_last, lane, len);
  write_gate_entries(vec, b, g_last, lane + 32, len);
  if (lane == 0) vec.gamma = __expf(g_last);
}

// ---- The aux warpgroup of the fused full forward (kFused): per chunk, A2
// from the stage's tiles (with the gate vectors, on full), under kNorm once
// the converter has normalised K (normed), without it as soon as the tiles
// land (the converter builds P beside this chain, run_normaliser or
// run_fused_converter: docs/PERF.md v26, v35): beta of the chunk's tokens
// into the stage (loaded two chunks ahead), K K^T (wgmma from the
// normaliser's fp16 K, or from K as loaded, then qk_read: the converter's
// go), then gdn_solve.cuh's steps over the stage's A2 tile: L, the diagonal
// blocks' inverses, the blocks below them (gdn_prep_chunk does the same
// per chunk and value head where the preparation is a kernel).
GDN_DEVICE void run_aux_fused(unsigned char* smem, Bars& bars, const GdnHopperParams& p, const Work& w) {
  const int tid = threadIdx.x & 127;
  const int bar = kBarAux;
  unsigned char* const inv = smem + kOffInv;
  const int t = tid;

  if (t == 0) {
    tma_prefetch_desc(&p.tm_q);
    tma_prefetch_desc(&p.tm_k);
    tma_prefetch_desc(&p.tm_v);
    tma_prefetch_desc(&p.tm_o);
    for (int c = 0; c < min(kStages, w.nch); ++c) issue_loads(smem + c * kStageBytes, &bars.full[c], p, w, c);
  }

  // beta of token t < 64 (0 past the chunk), two chunks ahead as run_aux's
  // gates (the gates are the converter's).
  auto load_beta = [&](int c) {
    int t = tid;
    asm volatile("" : "+r"(t));
    return c < w.nch && t < chunk_len(w, c) ? read_beta(p, (w.bos + 64 * c + t) * p.sc.Hv + w.h) : 0.f;
  };
  float b_next = load_beta(0), b_next2 = load_beta(1);

  for (int c = 0; c < w.nch; ++c) {
    // The thread's indices anew in each chunk, hidden from the optimiser:
    // hoisted, the addresses derived from them stay live across the loop
    // and spill (gdn_prep_chunk does the same).
    int t = tid;
    asm volatile("" : "+r"(t));
    const int warp = t >> 5, lane = t & 31, gq = lane >> 2, tq = lane & 3;
    float* const ld = warp_ld(reinterpret_cast<float*>(inv + kInvLd), warp);
    const int s = c % kStages, use = c / kStages;
    unsigned char* st = smem + s * kStageBytes;
    unsigned char* a2 = st + kOffA2;
    const DescBase sd(st);
    Vec& vec = *reinterpret_cast<Vec*>(st + kOffVec);
    const int len = chunk_len(w, c);
    const float bv = b_next;
    b_next = b_next2;
    b_next2 = load_beta(c + 2);

    // 1. beta (the gates' sums are the converter's, in the stage with K).
    mbar_wait(&bars.full[s], use & 1);
    tl_stamp(smem, c, 3);
    if (kNorm) mbar_wait(&bars.normed[s], use & 1);
    tl_stamp(smem, c, 4);
    if (kWhatIf == 5 || kW6) {
      if (!kNorm) mbar_arrive(&bars.qk_read[s]);
      mbar_arrive(&bars.ready[s]);
      continue;
    }

    // 2. K K^T, both operands the stage's K rows (k-steps of 16 along d):
    // the normaliser's fp16 K under kNorm, else K as loaded (bf16), which
    // the converter rewrites in fp16 once this group has read it (qk_read).
    float KK[32];
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      const uint64_t dk = sd.at(kOffBQ + (ks >> 2) * 2 * kTile + (ks & 3) * 32, 16, 1024);
      if (kNorm)
        wgmma_ss_n64<0, 0>(KK, dk, dk, ks > 0);
      else
        wgmma_ss_n64_bf16<0, 0>(KK, dk, dk, ks > 0);
    }
    wgmma_commit();
    if (t < 64) vec.beta[t] = bv;
    named_sync(bar, 128);
    wgmma_wait<0>();
    if (!kNorm) mbar_arrive(&bars.qk_read[s]);
    reg_fence(KK, 32);
    gate_lower<false>(KK, vec.g, len, warp, lane);
    store_l_and_diag(a2, ld, KK, vec.beta, warp, lane, gq, tq);
    if (kWhatIf == 1) {
      named_sync(bar, 128);
      fence_async_smem();
      mbar_arrive(&bars.ready[s]);
      continue;
    }
    invert_diag_block(a2, ld, vec.beta, warp, lane);
    named_sync(bar, 128);  // every diagonal block written
    merge_blocks(a2, warp, lane, bar);

    fence_async_smem();
    mbar_arrive(&bars.ready[s]);
    tl_stamp(smem, c, 5);
  }
}

// The sum of squares of eight bf16 values, in the order l2_normalise
// (gdn_prep.cu) takes them.
GDN_DEVICE float sum_squares8(uint4 x) {
  const uint32_t* v = reinterpret_cast<const uint32_t*>(&x);
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 y = unpack2_of<false>(v[j]);
    ss = fmaf(y.x, y.x, ss);
    ss = fmaf(y.y, y.y, ss);
  }
  return ss;
}

// Eight bf16 values times s, as fp16.
GDN_DEVICE uint4 scale_to_fp16x8(uint4 x, float s) {
  uint32_t* v = reinterpret_cast<uint32_t*>(&x);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 y = unpack2_of<false>(v[j]);
    v[j] = pack_fp16x2(y.x * s, y.y * s);
  }
  return x;
}

// The fused preparation's P (the converter's): Q K^T from the stage's
// tiles (fp16 under kNorm, the normaliser's; else bf16 as loaded: exact
// products), gated and stored in the stage's P tile as fp16. Every warp of
// the group has waited for its part of the product when this returns.
GDN_DEVICE void build_fused_p(unsigned char* stage, const Vec& vec, int len, int tid) {
  int tt = tid;
  asm volatile("" : "+r"(tt));
  const int warp = tt >> 5, lane = tt & 31;
  const DescBase sd(stage);
  float P[32];
  issue_qk<!kNorm>(P, sd);
  wgmma_wait<0>();
  reg_fence(P, 32);
  gate_lower<true>(P, vec.g, len, warp, lane);
  store_acc_fp16(stage + kOffP, P, 8, 0, warp, lane);
}

// ---- The converter warpgroup under kNorm: each chunk's K and Q rows
// L2-normalised and converted to fp16 in place as soon as they land, then
// the aux group's go (normed). The 16-byte pieces t + 128 u (u < 16) of
// thread t lie in rows t / 8 + 16 (u % 4) of tile u / 4 (K, Q, K, Q: d
// halves 0, 0, 1, 1), at position t % 8 of the row's eight (swizzled: the
// piece holds the row's values 8 ((t % 8) ^ (row % 8)) ..). So a thread
// has the same piece of both d halves of eight rows (K's u = 0..3, Q's
// 4..7), and the eight lanes t ^ 1, 2, 4 the rest of them: the sums
// pair the two halves first and then lanes 4, 2, 1 apart, which is
// l2_normalise's order of additions, so every row's inverse norm, and with
// it every fp16 value, is the preparation's to the bit.
// Under kFused this group also builds P after the norm: P beside the aux
// group's chain (A2) measured 1.11-1.15x the fused kernel with both in the
// aux group (docs/PERF.md v26). (It also wrote the gate vectors, before
// the norm, until v28 gave them to the consumers.)
GDN_DEVICE void run_normaliser(unsigned char* smem, Bars& bars, const GdnHopperParams& p, const Work& w) {
  const int tid = threadIdx.x & 127;
  const int t = tid;
  for (int c = 0; c < w.nch; ++c) {
    const int s = c % kStages, use = c / kStages;
    uint4* st = reinterpret_cast<uint4*>(smem + s * kStageBytes + kOffBQ);
    mbar_wait(&bars.full[s], use & 1);
    tl_stamp(smem, c, 0);
    // Row group r: pieces r and r + 8 (the two d halves of the same rows).
#pragma unroll 2
    for (int r = 0; r < 8; ++r) {
      if (kWhatIf == 3 || kW6) break;
      const uint4 a = st[t + 128 * r], b = st[t + 128 * (r + 8)];
      float ss = sum_squares8(a) + sum_squares8(b);
      ss += __shfl_xor_sync(0xffffffffu, ss, 4);
      ss += __shfl_xor_sync(0xffffffffu, ss, 2);
      ss += __shfl_xor_sync(0xffffffffu, ss, 1);
      const float inv = rsqrt_ftz(ss + 1e-6f);
      st[t + 128 * r] = scale_to_fp16x8(a, inv);
      st[t + 128 * (r + 8)] = scale_to_fp16x8(b, inv);
    }
    fence_async_smem();
    mbar_arrive(&bars.normed[s]);
    tl_stamp(smem, c, 1);
    if (kFused) {
      // The fused preparation's P, beside the aux group's A2: Q K^T, gated
      // and stored; then this group's half of ready.
      unsigned char* stage = smem + s * kStageBytes;
      Vec& vec = *reinterpret_cast<Vec*>(stage + kOffVec);
      const int len = chunk_len(w, c);
      // Q K^T reads rows every warp of this group normalised: their fences
      // are each thread's own, so the group meets before its wgmma (the aux
      // group's wait on normed is that meeting for its K K^T).
      named_sync(kBarConv, 128);
      if (kWhatIf == 2 || kW6) {
        mbar_arrive(&bars.ready[s]);
        continue;
      }
      build_fused_p(stage, vec, len, tid);
      fence_async_smem();
      mbar_arrive(&bars.ready[s]);
      tl_stamp(smem, c, 2);
    }
  }
}

// A stage's K and Q tiles (st: their 2048 16-byte pieces) from bf16 to
// fp16 in place, by one warpgroup: thread t takes the pieces t + 128 u, two
// at a time, U pairs an iteration (the core's converter 1, in 24
// registers; the fused one 2).
template <int U>
GDN_DEVICE void convert_qk(uint4* st, int t) {
#pragma unroll U
  for (int u = 0; u < 16; u += 2) {
    const uint4 a = st[t + 128 * u], b = st[t + 128 * (u + 1)];
    st[t + 128 * u] = bf16_to_fp16x8(a);
    st[t + 128 * (u + 1)] = bf16_to_fp16x8(b);
  }
}

// ---- The converter warpgroup of the fused preparation without the L2
// norm (kFused, not kNorm): per chunk, as soon as its tiles land (and the
// consumers' gate warp has written the gate vectors, both on full), P from
// Q and K as loaded (bf16: build_fused_p), beside the aux group's K K^T
// of the same tiles; then, once the aux group has read K too (qk_read),
// K and Q converted to fp16 in place for the consumers, and this group's
// half of ready. (Under kNorm both products wait for the normaliser's pass
// over the tiles instead: docs/PERF.md v35.)
GDN_DEVICE void run_fused_converter(unsigned char* smem, Bars& bars, const GdnHopperParams& p, const Work& w) {
  const int tid = threadIdx.x & 127;
  for (int c = 0; c < w.nch; ++c) {
    const int s = c % kStages, use = c / kStages;
    unsigned char* stage = smem + s * kStageBytes;
    uint4* st = reinterpret_cast<uint4*>(stage + kOffBQ);
    mbar_wait(&bars.full[s], use & 1);
    tl_stamp(smem, c, 0);
    if (kWhatIf != 2 && !kW6) build_fused_p(stage, *reinterpret_cast<Vec*>(stage + kOffVec), chunk_len(w, c), tid);
    // Every warp's part of Q K^T has read Q and K, and the aux group's
    // K K^T has read K: the tiles may be rewritten.
    named_sync(kBarConv, 128);
    mbar_wait(&bars.qk_read[s], use & 1);
    tl_stamp(smem, c, 1);
    if (kWhatIf != 3 && !kW6) convert_qk<2>(st, tid);
    fence_async_smem();
    mbar_arrive(&bars.ready[s]);
    tl_stamp(smem, c, 2);
  }
}

// ---- The converter warpgroup (kConv): each chunk's K and Q tiles from bf16
// to fp16 in place, once the aux group has read them (qk_read), then its
// half of the stage's ready. Each thread takes every 128th of the 2048
// 16-byte pieces, two at a time (24 registers).
GDN_DEVICE void run_converter(unsigned char* smem, Bars& bars, const GdnHopperParams& p, const Work& w) {
  const int t = threadIdx.x & 127;
  if (kNorm) {
    run_normaliser(smem, bars, p, w);
    return;
  }
  if (kFused) {
    run_fused_converter(smem, bars, p, w);
    return;
  }
  for (int c = 0; c < w.nch; ++c) {
    const int s = c % kStages, use = c / kStages;
    uint4* st = reinterpret_cast<uint4*>(smem + s * kStageBytes + kOffBQ);
    mbar_wait(&bars.qk_read[s], use & 1);
    if (kWhatIf != 9) convert_qk<1>(st, t);
    fence_async_smem();
    mbar_arrive(&bars.ready[s]);
  }
}

// ---- A consumer warpgroup: value rows 64 cw .. 64 cw + 63 of the tile.
GDN_DEVICE void run_consumer(unsigned char* smem, Bars& bars, const GdnHopperParams& p, const Work& w, int cw) {
  const int t = threadIdx.x & 127, warp = t >> 5, lane = t & 31;
  const int gq = lane >> 2, tq = lane & 3;
  const int vb = w.v0 + 64 * cw;  // first value column of this group
  unsigned char* out = smem + kOffOut + cw * kTile;
  // The transfer matrix of a segment goes after the B states of all.
  const int64_t state = ((int64_t)w.n * p.sc.Hv + w.h) * 128 * 128 +
                        (w.zero_v ? (int64_t)p.sc.N * p.sc.Hv * 128 * 128 : 0);
  // Where lane's row of the value tile's 8x8 blocks starts for ldmatrix
  // (block m = lane / 8: rows j + 8 (m / 2), columns v + 8 (m % 2)).
  const int vm = lane >> 3, vrow = 8 * (vm >> 1) + (lane & 7), vbyte = 2 * (16 * warp + 8 * (vm & 1));

  // As the output pass of a split (a dependent launch after the scan), the
  // start state is the scan's result: nothing before this point reads or
  // writes what the scan touches, and everything after it may. (The aux
  // group never waits: it reads only the call's inputs.)
  // kFused: each chunk's gate vectors (Vec's g, eg, f and gamma) come from
  // this group's first warp, two chunks ahead, at the top of a chunk while
  // the consumers wait for ready anyway (the fused chunk is bound by its
  // producers; the converter, which wrote them before its norm, spent
  // about 850 of a chunk's 6000 cycles on it: docs/PERF.md v28). Its 32
  // lanes arrive on the stage's full beside the copies' bytes, so the
  // producers find the vectors with the tiles. Chunks 0 and 1 are written
  // here; chunk c + 2 at the top of chunk c, after the refill of the same
  // stage (both once chunk c - 1, its last user, is released by both
  // groups). The raw gates come a chunk ahead by cp.async into kRawGates:
  // held in registers across the chunk they spilled.
  const bool gate_warp = kFused && cw == 0 && warp == 0;
  GateParams gp{};
  float* const raw = reinterpret_cast<float*>(smem + kOffInv + kRawGates);
  auto write_gates = [&](int x, float a, float b) {
    Vec& v = *reinterpret_cast<Vec*>(smem + (x % kStages) * kStageBytes + kOffVec);
    if (kWhatIf != 18 && kWhatIf != 19) write_chunk_gates(v, a, b, lane, chunk_len(w, x), gp);
    mbar_arrive(&bars.full[x % kStages]);
  };
  if (gate_warp) {
    gp = gate_params(p, w);
    if (w.nch > 0) fetch_raw_gates(raw, p, w, lane, 0);
    if (w.nch > 1) fetch_raw_gates(raw, p, w, lane, 1);
    cp_async_wait_all();
    for (int x = 0; x < 2 && x < w.nch; ++x) write_gates(x, raw[64 * x + lane], raw[64 * x + lane + 32]);
    if (w.nch > 2) fetch_raw_gates(raw, p, w, lane, 2);
  }
  // (A transfer pass after an early pass must not wait here: gdn_hopper_fwd.)
  if (!kXfer || !(p.sc.flags & kAfterEarly)) griddep_wait();

  // S^T: rows v = vb + 16 warp + gq (+8), columns k = 8 j + 2 tq (+1).
  float S[64];
  float decay = 1.f;  // the product of the chunks' gammas so far (early exit)
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int v = vb + 16 * warp + gq + 8 * (e >> 1), k = 8 * j + 2 * tq + (e & 1);
      S[4 * j + e] = w.zero_v ? (k == v ? 1.f : 0.f) : p.ptr.h0 != nullptr ? p.ptr.h0[state + (int64_t)k * 128 + v] : 0.f;
    }

  // Releases chunk c's stage once every wgmma that read it is done.
  auto release = [&](int c) { mbar_arrive(&bars.empty[c % kStages]); };
  // Refills chunk c's stage with the chunk kStages ahead once every
  // consumer has released it: the first consumer's first thread, called
  // one chunk later, while its group waits for products anyway (its first;
  // the kWide chain's Vn, where ptxas keeps the products pipelined).
  // (Issued at the release, the copies held up the other three warps of
  // that group at its next barrier: 8% of the consumers' stall samples on
  // q35_4kx8, docs/PERF.md v22.) Under kFused, at the top of the chunk
  // (below).
  auto refill = [&](int c) {
    if (cw == 0 && t == 0 && c >= 0 && c + kStages < w.nch) {
      const int s = c % kStages, use = c / kStages;
      mbar_wait(&bars.empty[s], use & 1);
      issue_loads(smem + s * kStageBytes, &bars.full[s], p, w, c + kStages);
      tl_stamp(smem, c + kStages, 8);
    }
  };
  // The early exit after chunk c (one thread): the aux groups prepare the
  // chunks whose copies are in flight (up to c + 2: refill(c - 1) ran in
  // chunk c), so that none is left landing when the CTA ends, and stop at
  // the first chunk from c + 3 on, whose phase of full this thread
  // completes by hand (an arrival with no bytes). Where the stage's chunk
  // before was not consumed (c + 1, under two aux groups), only once it is
  // prepared: its group is then past its wait on full, which completing
  // the next phase early would leave two phases behind, waiting forever.
  // (kernsrc/pipeline_model_test.go models this and found that hang.)
  auto stop_after = [&](int c) {
    *reinterpret_cast<volatile int*>(smem + kOffStop) = c + 3;
    for (int k = 0; k < kAux; ++k) {
      const int cc = c + 3 + k, prev = cc - kStages;
      if (cc >= w.nch) break;
      if (prev > c) mbar_wait(&bars.ready[prev % kStages], (prev / kStages) & 1);
      mbar_arrive(&bars.full[cc % kStages]);
    }
  };
  // O^T of chunk c -> o[i][v] through the staging tile (stmatrix .trans
  // writes rows i): stage_o writes the tile (once the store before has
  // read it), flush_o stores it (len rows). Under kDeferStore a whole
  // chunk's flush waits for the next chunk's first products to be issued
  // (or the loop's end); the next stage_o's wait and barrier still come
  // after it, so the tile is never overwritten before its store read it.
  auto stage_o = [&](const float* O) {
    if (t == 0 && kWhatIf != 21 && kWhatIf != 22) tma_store_wait_read();
    named_sync(1 + cw, 128);
    if (kWhatIf != 22) {
      const int m = lane >> 3, r = lane & 7;
      const float sc = kWhatIf == 26 ? 0.f * p.sc.scale : p.sc.scale;
#pragma unroll
      for (int jb = 0; jb < 8; jb += 2) {
        const int i = 8 * (jb + (m >> 1)) + r;
        const int chunk = 2 * warp + (m & 1);
        stmatrix_x4_trans(smem_addr(out) + swz128(i, 16 * chunk), E::pack2(sc * O[4 * jb], sc * O[4 * jb + 1]),
                          E::pack2(sc * O[4 * jb + 2], sc * O[4 * jb + 3]),
                          E::pack2(sc * O[4 * jb + 4], sc * O[4 * jb + 5]),
                          E::pack2(sc * O[4 * jb + 6], sc * O[4 * jb + 7]));
      }
    }
  };
  auto flush_o = [&](int c, int len) {
    if (kWhatIf != 22 && kWhatIf != 23) fence_async_smem();
    named_sync(1 + cw, 128);
    if (kWhatIf == 21 || kWhatIf == 22) {
    } else if (len == 64) {
      if (t == 0) {
        tma_store_4d(&p.tm_o, out, vb, w.h, w.t0 + 64 * c, w.b);
        tma_store_commit();
      }
    } else {
      // The chunk ends inside the tile: rows past it belong to the next
      // sequence (or lie past the tensor), so only len rows are written.
      const int64_t tok = w.bos + 64 * c;
      for (int q = t; q < len * 8; q += 128) {
        const int i = q >> 3, ch = q & 7;
        *reinterpret_cast<uint4*>(p.ptr.o + (tok + i) * p.sc.Hv * 128 + w.h * 128 + vb + 8 * ch) =
            *reinterpret_cast<const uint4*>(out + swz128(i, 16 * ch));
      }
    }
  };
  // (Only a whole chunk's TMA store is deferred: with the partial chunk's
  // row copy inlined into the loop's flush as well, its address arithmetic
  // held registers across the first products and ptxas spilled.)
  auto store_o = [&](int c, const float* O) {
    const int len = chunk_len(w, c);
    stage_o(O);
    if (!kDeferStore || len < 64) flush_o(c, len);
  };
  // The deferred flush of chunk c - 1, in chunk c right after its U and O'
  // products are issued, or after the loop (c = nch). (Where in the chunk
  // it goes measured the same: at the top, once U and O' are in, or in
  // Vn's shadow, 0.96x-1.01x: docs/PERF.md v37.)
  auto flush_prev = [&](int c) {
    if (kDeferStore && w.store_o && !kWhatIfNoStore && c > 0 && chunk_len(w, c - 1) == 64) flush_o(c - 1, 64);
  };

  for (int c = 0; c < w.nch; ++c) {
    const int s = c % kStages, use = c / kStages;
    unsigned char* st = smem + s * kStageBytes;
    const DescBase sd(st);  // the stage's wgmma descriptors
    const Vec& vec = *reinterpret_cast<const Vec*>(st + kOffVec);
    // Under kFused the refill goes first, at the top of the chunk: behind
    // the gate work and the first products, the copies were late enough
    // for the converter to wait on full (docs/PERF.md v28).
    if (kFused) refill(c - 1);
    if (gate_warp && c + 2 < w.nch) {
      if (c >= 1) mbar_wait(&bars.empty[(c - 1) % kStages], ((c - 1) / kStages) & 1);
      cp_async_wait_all();
      const float* const r = raw + ((c + 2) & 1) * 64;
      write_gates(c + 2, r[lane], r[lane + 32]);
      if (c + 3 < w.nch && !kDeferStore) fetch_raw_gates(raw, p, w, lane, c + 3);
    }
    mbar_wait(&bars.ready[s], use & 1);
    if (cw == 0) tl_stamp(smem, c, 6);

    // U^T = S^T K^T into acc[0..31], S^T Q^T into acc[32..63], whose
    // columns then take their factors e^{g_i}: O'^T.
    float acc[64];
    float* U = acc;
    float* O = acc + 32;
    // O' takes its factors e^{g_i} (columns of O'^T) once its products are in.
    auto scale_o = [&] {
#pragma unroll
      for (int jb = 0; jb < 8; ++jb) {
        const int i = 8 * jb + 2 * tq;
        const float e0 = vec.eg[i], e1 = vec.eg[i + 1];
        O[4 * jb] *= e0, O[4 * jb + 1] *= e1, O[4 * jb + 2] *= e0, O[4 * jb + 3] *= e1;
      }
    };
    if (kWide) {
      // One m64n128 product against [K; Q], in two halves of d so that only
      // half of S^T's fp16 copy is held at a time.
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = 0.f;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        uint32_t sa[4][4];
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) acc_to_a(sa[ks], S, 4 * half + ks);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
          wgmma_rs_n128<0>(acc, sa[ks], sd.at(kOffBQ + half * 2 * kTile + ks * 32, 16, 1024));
        wgmma_commit();
        wgmma_wait<0>();
      }
      reg_fence(acc, 64);
      // O' gets its factors e^{g_i} here (the aux group leaves Q unscaled
      // for this chain: measured, ptxas serialises the products otherwise).
      // (Written out, not scale_o: through the lambda ptxas serialised the
      // fp16 BV 64 variant's products.)
#pragma unroll
      for (int jb = 0; jb < 8; ++jb) {
        const int i = 8 * jb + 2 * tq;
        const float e0 = vec.eg[i], e1 = vec.eg[i + 1];
        O[4 * jb] *= e0, O[4 * jb + 1] *= e1, O[4 * jb + 2] *= e0, O[4 * jb + 3] *= e1;
      }
    } else {
      uint32_t sa[8][4];
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) acc_to_a(sa[ks], S, ks);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 8; ++ks)
        wgmma_rs_n64<0>(U, sa[ks], sd.at(kOffBQ + (ks >> 2) * 2 * kTile + (ks & 3) * 32, 16, 1024),
                        ks > 0);
      if (!kXfer && kWhatIf != 27 && !kWhatIfNoOProducts) {
#pragma unroll
        for (int ks = 0; ks < 8; ++ks)
          wgmma_rs_n64<0>(O, sa[ks],
                          sd.at(kOffBQ + (ks >> 2) * 2 * kTile + kTile + (ks & 3) * 32, 16, 1024), ks > 0);
      }
      if (kWhatIf == 27 || kWhatIfNoOProducts) {
#pragma unroll
        for (int i = 0; i < 32; ++i) O[i] = 0.f;
      }
      wgmma_commit();
      flush_prev(c);
      // (The gate warp's next raw gates after the flush, whose proxy fence
      // would otherwise wait for those copies.)
      if (kDeferStore && gate_warp && c + 3 < w.nch) fetch_raw_gates(raw, p, w, lane, c + 3);
      if (!kFused) refill(c - 1);
      wgmma_wait<0>();
      reg_fence(acc, kXfer ? 32 : 64);
      if (!kXfer) scale_o();
    }

    // Vn^T = (V - diag(e^g) U)^T A2^T, into acc[0..31] (the transfer
    // matrix's value tiles are zero).
    float* Vn = U;
    if (kWide) {
      // V^T A2^T with V fp16 in the stage (read M-major: rows j, columns
      // v), then -(U^T diag(e^g)) A2^T from registers.
      uint32_t ua[4][4];
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        const int j0 = 16 * ks + 2 * tq;
        const float e0 = -vec.eg[j0], e1 = -vec.eg[j0 + 1], e8 = -vec.eg[j0 + 8], e9 = -vec.eg[j0 + 9];
        ua[ks][0] = pack_fp16x2(U[8 * ks + 0] * e0, U[8 * ks + 1] * e1);
        ua[ks][1] = pack_fp16x2(U[8 * ks + 2] * e0, U[8 * ks + 3] * e1);
        ua[ks][2] = pack_fp16x2(U[8 * ks + 4] * e8, U[8 * ks + 5] * e9);
        ua[ks][3] = pack_fp16x2(U[8 * ks + 6] * e8, U[8 * ks + 7] * e9);
      }
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        wgmma_ss_n64<1, 0>(Vn, sd.at(kOffV + cw * kTile + ks * 2048, kTile, 1024),
                           sd.at(kOffA2 + ks * 32, 16, 1024), ks > 0);
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) wgmma_rs_n64<0>(Vn, ua[ks], sd.at(kOffA2 + ks * 32, 16, 1024));
    } else {
      // V^T's A fragments straight from the value tile (rows j, columns
      // v, the input dtype); the difference in fp32, rounded to fp16 once.
      uint32_t wa[4][4], vr[4][4];
      const unsigned char* vt = st + kOffV + cw * kTile;
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        ldmatrix_x4_trans(vr[ks], reinterpret_cast<const uint16_t*>(vt + swz128(16 * ks + vrow, vbyte)));
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        const int j0 = 16 * ks + 2 * tq;
        const float e0 = vec.eg[j0], e1 = vec.eg[j0 + 1], e8 = vec.eg[j0 + 8], e9 = vec.eg[j0 + 9];
        const float2 v0 = unpack2(vr[ks][0]), v1 = unpack2(vr[ks][1]), v2 = unpack2(vr[ks][2]), v3 = unpack2(vr[ks][3]);
        wa[ks][0] = pack_fp16x2(fmaf(-e0, U[8 * ks + 0], v0.x), fmaf(-e1, U[8 * ks + 1], v0.y));
        wa[ks][1] = pack_fp16x2(fmaf(-e0, U[8 * ks + 2], v1.x), fmaf(-e1, U[8 * ks + 3], v1.y));
        wa[ks][2] = pack_fp16x2(fmaf(-e8, U[8 * ks + 4], v2.x), fmaf(-e9, U[8 * ks + 5], v2.y));
        wa[ks][3] = pack_fp16x2(fmaf(-e8, U[8 * ks + 6], v3.x), fmaf(-e9, U[8 * ks + 7], v3.y));
      }
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        wgmma_rs_n64<0>(Vn, wa[ks], sd.at(kOffA2 + ks * 32, 16, 1024), ks > 0);
    }
    wgmma_commit();
    if (kWide) refill(c - 1);
    wgmma_wait<0>();
    reg_fence(Vn, 32);

    // Vn^T as A operands: as is (for P) and with the column factors f (for
    // the state update).
    uint32_t va[4][4], vf[4][4];
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      acc_to_a(va[ks], Vn, ks);
      const int j0 = 16 * ks + 2 * tq;
      const float f0 = vec.f[j0], f1 = vec.f[j0 + 1], f8 = vec.f[j0 + 8], f9 = vec.f[j0 + 9];
      vf[ks][0] = pack_fp16x2(Vn[8 * ks + 0] * f0, Vn[8 * ks + 1] * f1);
      vf[ks][1] = pack_fp16x2(Vn[8 * ks + 2] * f0, Vn[8 * ks + 3] * f1);
      vf[ks][2] = pack_fp16x2(Vn[8 * ks + 4] * f8, Vn[8 * ks + 5] * f9);
      vf[ks][3] = pack_fp16x2(Vn[8 * ks + 6] * f8, Vn[8 * ks + 7] * f9);
    }
    const float gamma = vec.gamma;
    if (kXfer && kEarlyExit) decay *= gamma;
#pragma unroll
    for (int i = 0; i < 64; ++i) S[i] *= gamma;
    // O^T += Vn^T P^T and S^T <- gamma S^T + (Vn^T diag(f)) K (K read
    // N-major: rows j, columns d; the two d blocks are BQ's halves). The
    // kWide chain issues O's product first and stores o while the state
    // update runs; with two consumer groups the state update goes first
    // (the orders each measured best, and that ptxas of CUDA 12.4 and 13
    // both keep pipelined).
    auto update_state = [&] {
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        wgmma_rs_n128<1>(S, vf[ks], sd.at(kOffBQ + ks * 2048, 2 * kTile, 1024));
      wgmma_commit();
    };
    auto p_term = [&] {
      if (kWhatIf != 28 && !kWhatIfNoOProducts) {
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) wgmma_rs_n64<0>(O, va[ks], sd.at(kOffP + ks * 32, 16, 1024));
      }
      wgmma_commit();
    };
    wgmma_fence();
    if (kWide) {
      p_term();
      update_state();
      wgmma_wait<1>();
      reg_fence(O, 32);
      if (w.store_o && !kWhatIfNoStore) store_o(c, O);
      wgmma_wait<0>();
      reg_fence(S, 64);
      release(c);
      if (cw == 0) tl_stamp(smem, c, 7);
    } else {
      update_state();
      if (!kXfer) p_term();
      wgmma_wait<0>();
      reg_fence(S, 64);
      release(c);
      if (cw == 0) tl_stamp(smem, c, 7);
      if (!kXfer) {
        reg_fence(O, 32);
        if (w.store_o && !kWhatIfNoStore) store_o(c, O);
      }
    }
    // A transfer matrix whose state is exactly zero stays zero (v is zero:
    // every later product is of zeros), so its CTA may stop: the values of
    // walking on, for finite inputs (a zero's sign aside; an infinity met
    // later, 0 * inf, would have made NaN). Decaying heads get there once
    // e^{sum g} underflows, often early in a segment; checked every four
    // chunks by all consumer groups together, once the gates' product
    // (the same in every group) says the state may be near zero: a head
    // that barely decays never pays for the barrier. (With unit keys and
    // beta in [0, 2] the state's entries are at most that product; other
    // keys only make the look come earlier or later, never change the
    // result.)
    // Both tests go through a warp vote: the same in every thread, but
    // only a vote's result is one ptxas treats as uniform; a branch out of
    // the loop on anything else made the chunk index, and with it every
    // wgmma descriptor, per-thread values (32 more R2UR a chunk, 5% slower).
    if (kXfer && kEarlyExit && w.zero_v && (c & 3) == 3 && c + 1 < w.nch &&
        __all_sync(0xffffffffu, decay < 0x1p-100f)) {
      bool nonzero = false;
#pragma unroll
      for (int i = 0; i < 64; ++i) nonzero |= S[i] != 0.f;
      if (__all_sync(0xffffffffu, !named_sync_or(kBarConsumers, 128 * kNC, nonzero))) {
        if (cw == 0 && t == 0) stop_after(c);
        break;
      }
    }
  }
  // The last chunk's deferred flush (the last staged is nch - 1: the fused
  // chain has no early exit).
  flush_prev(w.nch);
  if (t == 0) tma_store_wait_all();

  if (p.ptr.ht != nullptr && w.n < p.sc.n_ht) {
    // A transfer matrix (zero_v: its "value" index is M's column k') is
    // stored in the scan's fragment order (scan_m_index, gdn_common.cuh):
    // each scan thread then loads its part of M as 16-byte rows.
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int v = vb + 16 * warp + gq + 8 * (e >> 1), k = 8 * j + 2 * tq + (e & 1);
        const int at = kXfer && w.zero_v ? scan_m_index(k, v) : k * 128 + v;
        p.ptr.ht[state + at] = S[4 * j + e];
      }
  }
#if GDN_TIMELINE
  // The first CTA's stamps over the start of group 0's ht rows (slot i at
  // row i / 60, column i % 60), once both groups have stored theirs.
  named_sync(kBarConsumers, 128 * kNC);
  if (kFused && cw == 0 && t == 0 && blockIdx.x == 0 && blockIdx.y == 0 && p.ptr.ht != nullptr && w.n < p.sc.n_ht)
    for (int i = 0; i < kTlChunks * kTlSteps; ++i)
      reinterpret_cast<unsigned int*>(p.ptr.ht)[state + (i / 60) * 128 + i % 60] = tl_stamps(smem)[i];
#endif
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1) gdn_hopper_fwd(const __grid_constant__ GdnHopperParams p) {
  extern __shared__ unsigned char smem_raw[];
  // Swizzled tiles need 1024-byte alignment; the dynamic base promises less.
  unsigned char* smem =
      smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  Bars& bars = *reinterpret_cast<Bars*>(smem + kOffBars);

  // The scan after a transfer pass is a dependent launch: its CTAs may take
  // SMs this grid leaves free once all of this grid's CTAs have started.
  griddep_release();
  if (kTestEarlyDelay && (p.sc.flags & kEarlyPass))
    for (const long long t0 = clock64(); clock64() - t0 < 2000000;) {
    }

  Work w;
  constexpr int tiles = 128 / kBV;
  int x = blockIdx.x, n = blockIdx.y;
  w.store_o = !(p.sc.flags & kTransfer);
  if (kXfer && !w.store_o && (p.sc.flags & kMFirst)) {
    // The transfer pass (grid.x = 2 * half: B CTAs, then M CTAs) takes its
    // CTAs in the order every segment's M, then every segment's B: CTAs
    // start in linear block order, and the M CTAs of decaying heads end
    // early (run_consumer). Longest first: every M CTA that cannot stop
    // (a head that barely decays) starts in the first wave, and the B
    // CTAs left over take the SMs the stopped ones free. (B first measured
    // slower: an M CTA of a slow head started late ran a whole segment
    // after everyone else.) Only where the plan sets kMFirst, a grid of
    // more than one wave; in one wave the order changes nothing, and the
    // plain order keeps each segment's B and M CTAs side by side.
    const int half = p.sc.Hv * tiles, lin = blockIdx.x + gridDim.x * blockIdx.y;
    const int b = lin >= half * (int)gridDim.y, l = lin - b * half * gridDim.y;
    x = l % half + (1 - b) * half;
    n = l / half;
  }
  w.zero_v = !w.store_o && x >= p.sc.Hv * tiles;
  if (w.zero_v) x -= p.sc.Hv * tiles;
  w.h = x / tiles;
  w.v0 = (x % tiles) * kBV;
  w.hk = w.h / (p.sc.Hv / p.sc.Hq);
  w.n = n;
  if (p.sc.flags & kSegPairs) {
    const int32_t* pr = static_cast<const int32_t*>(p.ptr.cu_seqlens) + 2 * n;
    const int b = min(max(pr[0], 0), p.sc.T), e = min(max(pr[1], b), p.sc.T);
    w.bos = b;
    w.len = e - b;
    w.t0 = b;
    w.b = 0;
  } else if (p.ptr.cu_seqlens == nullptr) {
    w.bos = (int64_t)n * p.sc.T;
    w.len = p.sc.T;
    w.t0 = 0;
    w.b = n;
  } else {
    int64_t b, e;
    if (p.sc.flags & kSeqlensInt64) {
      b = static_cast<const int64_t*>(p.ptr.cu_seqlens)[n];
      e = static_cast<const int64_t*>(p.ptr.cu_seqlens)[n + 1];
    } else {
      b = static_cast<const int32_t*>(p.ptr.cu_seqlens)[n];
      e = static_cast<const int32_t*>(p.ptr.cu_seqlens)[n + 1];
    }
    // The host validated its copy of cu_seqlens; the device copy is trusted
    // only as far as the tokens go (B = 1 here, so T counts them all).
    e = min(max(e, (int64_t)0), (int64_t)p.sc.T);
    b = min(max(b, (int64_t)0), e);
    w.bos = b;
    w.len = (int)(e - b);
    w.t0 = (int)b;
    w.b = 0;
  }
  w.nch = (w.len + 63) / 64;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      // The TMA issuer, plus bytes; under kFused also the consumers' gate
      // warp's 32 lanes, whose gate vectors the producers find with the
      // tiles (run_consumer).
      mbar_init(&bars.full[s], 1 + (kFused ? 32 : 0));
      // The aux group, and the converter but under kNorm without kFused
      // (where it hands its tiles to the aux group instead).
      mbar_init(&bars.ready[s], 128 * (1 + (kConv && (!kNorm || kFused))));
      if (kConv && !kNorm) mbar_init(&bars.qk_read[s], 128);  // the aux group
      if (kNorm) mbar_init(&bars.normed[s], 128);             // the converter
      mbar_init(&bars.empty[s], 128 * kNC);    // the consumer groups
    }
    mbar_fence_init();
    *reinterpret_cast<volatile int*>(smem + kOffStop) = w.nch;  // no early exit yet
  }
  if (w.zero_v) {
    // The transfer matrix reads v as zero: its tiles are cleared once and
    // never loaded (the in-place conversion keeps zeros zero).
    for (int s = 0; s < kStages; ++s)
      for (int q = threadIdx.x; q < kNC * kTile / 16; q += kThreads)
        reinterpret_cast<uint4*>(smem + s * kStageBytes + kOffV)[q] = make_uint4(0, 0, 0, 0);
    fence_async_smem();
  }
  __syncthreads();

  const int wg = threadIdx.x >> 7;
  if (wg < kAux) {
    if (kSetRegs) regs_dealloc<kAuxRegs>();
    if (kFused)
      run_aux_fused(smem, bars, p, w);
    else
      run_aux(smem, bars, p, w, wg);
  } else if (!kConv || wg < kAux + kNC) {
    // (Without a converter this is the plain else: a test of wg here took
    // the transfer pass's chunk loop off ptxas's uniform datapath.)
    if (kSetRegs) regs_alloc<kConsumerRegs>();
    run_consumer(smem, bars, p, w, wg - kAux);
  } else {
    regs_dealloc<kConvRegs>();
    run_converter(smem, bars, p, w);
  }
  // kAfterEarly: the grid's last CTA (CTAs start in linear order) holds the
  // grid open until the early pass has completed and its writes are
  // visible; every other CTA leaves as soon as its work is done. (On the
  // H200 with driver 580 the scan's own wait was measured to cover the
  // early pass without this: docs/PERF.md v34. The PTX ISA promises only
  // the prerequisite grid's completion, so the wait stays: one thread of
  // one CTA.)
  if (kXfer && (p.sc.flags & kAfterEarly) && threadIdx.x == 0 && blockIdx.x == gridDim.x - 1 &&
      blockIdx.y == gridDim.y - 1)
    griddep_wait();
}
