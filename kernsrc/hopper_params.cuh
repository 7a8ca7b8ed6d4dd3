// hopper_params.cuh: the contract between Go and the Hopper core forward:
// its only kernel parameter, GdnHopperParams, packed byte for byte by
// kernsrc.HopperParams.Pack (kernsrc/hopper.go, the one Go file that
// mirrors it), and its flags. The GDN_* defines come from that file; the
// static_asserts hold the two sides together (sizes fix the offsets: every
// member is naturally aligned).
#pragma once
#include "sm90_tma.cuh"

struct HopperPtrs {
  const float* g;          // [tokens, Hv] chunk-local cumulative log-gate (fused: the raw log-gate, or a)
  const void* beta;        // [tokens, Hv] fp32 or the input dtype (flag)
  const float* h0;         // [N, Hv, 128, 128] or null; the pool [S, Hv, 128, 128] under kPoolSlots
  float* ht;               // [N, Hv, 128, 128] or null; the pool under kPoolSlots
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
  int32_t pool_slots;  // S, under kPoolSlots: a slot at or past it is treated as negative
  int32_t ck_chunks;   // chunks between checkpoints (checkpoint_every / 64); 0: no checkpoints
  int32_t ck_rows;     // checkpoint rows R: a row past them is never written
};
// The serving layer's pointers (after the scalars, so that the members
// before them keep their offsets).
struct HopperStatePtrs {
  const int32_t* slots;  // [N] each sequence's pool slot (kPoolSlots), or null
  void* ckpt;            // [R, Hv, 128, 128] checkpoints in the caller's state format, or null
  // Per grid row, start * ck_chunks + c0: the first checkpoint row of the
  // row's sequence (start) and the row's first chunk within it (c0), for
  // the passes of a split plan. Null: grid row n is sequence n, and the
  // kernel sums its start from cu_seqlens (hopper_state.cuh).
  const int32_t* ckpt_rows;
};
struct GdnHopperParams {
  TmaDesc tm_q;  // q [B, T, Hq, 128] as 4-D (128, Hq, T, B), box (64, 1, 64, 1)
  TmaDesc tm_k;  // k, the same
  TmaDesc tm_v;  // v [B, T, Hv, 128] as (128, Hv, T, B), box (64, 1, 64, 1)
  TmaDesc tm_a;  // A [B, T, Hv, 64] as (64, Hv, T, B), box (32, 1, 64, 1) fp32 or (64, 1, 64, 1) bf16
  TmaDesc tm_o;  // o [B, T, Hv, 128] as (128, Hv, T, B), box (64, 1, 64, 1)
  HopperPtrs ptr;
  HopperScalars sc;
  HopperStatePtrs st;
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
  // (hopper_cta_work).
  kMFirst = 64,
  // The fused preparation: g holds the raw input a of the gate, g =
  // -exp(a_log) softplus(a + dt_bias) (FLA's use_gate_in_kernel), not the
  // log-gate.
  kGateInKernel = 128,
  // The transfer pass of a plan whose first segments run their output pass
  // beside it (the "early" pass): a dependent launch of that pass, so its
  // CTAs take the SMs the early CTAs leave free. It reads nothing the early
  // pass writes, so no CTA waits at its start; its last CTA waits for the
  // early pass at its end, so that the scan after it (which waits for this
  // grid) finds the early pass's states complete too.
  kAfterEarly = 256,
  // The early pass itself (an output pass over each sequence's first
  // segment): the kernel does nothing of its own with it; the host sets it
  // so that a test build can tell the early pass's CTAs apart.
  kEarlyPass = 512,
  // The caller's states (h0, ht or the pool, checkpoints) are [V,K]: entry
  // (k, v) at v * 128 + k (else [K,V]: k * 128 + v).
  kStateVK = 4096,
  // The caller's states are a bf16 pool's (and its checkpoints):
  // widened as read, rounded to nearest even once as written.
  kPoolBF16 = 8192,
  // h0 and ht are one pool: grid row n's state is slot st.slots[n]
  // (negative: a zero start and no store).
  kPoolSlots = 16384,
  // h0 is the plan's own fp32 [K,V] states, one per grid row (a split
  // plan's output pass), not the caller's: the three flags above leave it.
  kH0Own = 32768,
  // ht is the plan's own states (a split plan's early pass), likewise.
  kHtOwn = 65536,
};

static_assert(sizeof(TmaDesc) == 128 && alignof(TmaDesc) == 64, "tensor map");
static_assert(sizeof(HopperPtrs) == 64 && sizeof(HopperScalars) == 40 && sizeof(HopperStatePtrs) == 24, "pointer and scalar blocks");
static_assert(sizeof(GdnHopperParams) == GDN_PARAMS_BYTES, "kernsrc.HopperParamsBytes");
static_assert(GDN_OFF_PTRS == 5 * sizeof(TmaDesc) && GDN_OFF_SCALARS == GDN_OFF_PTRS + sizeof(HopperPtrs) &&
                  GDN_OFF_STATE == GDN_OFF_SCALARS + sizeof(HopperScalars),
              "kernsrc.HopperOff*");
static_assert(GDN_FLAG_BETA_FP32 == kBetaFP32 && GDN_FLAG_A_FP32 == kAFP32 && GDN_FLAG_SEQLENS_INT64 == kSeqlensInt64 &&
                  GDN_FLAG_SEG_PAIRS == kSegPairs && GDN_FLAG_TRANSFER == kTransfer && GDN_FLAG_A_PREPARED == kAPrepared &&
                  GDN_FLAG_M_FIRST == kMFirst && GDN_FLAG_GATE_IN_KERNEL == kGateInKernel &&
                  GDN_FLAG_AFTER_EARLY == kAfterEarly && GDN_FLAG_EARLY_PASS == kEarlyPass &&
                  GDN_FLAG_STATE_VK == kStateVK && GDN_FLAG_POOL_BF16 == kPoolBF16 &&
                  GDN_FLAG_POOL_SLOTS == kPoolSlots && GDN_FLAG_H0_OWN == kH0Own && GDN_FLAG_HT_OWN == kHtOwn,
              "kernsrc.HopperFlag*");
// Every TMA box is one tile: 64 token rows of 128 bytes.
static_assert(GDN_TMA_BOX_BYTES == 64 * 128, "kernsrc.HopperBoxBytes");
