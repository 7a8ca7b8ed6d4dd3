// gdn_scan.cu: the scan of a sequence-parallel plan (phase 2 of 3).
//
// A long sequence is cut into segments of whole chunks. The transfer pass
// (gdn_hopper.cu with the transfer flag) gave every segment but the last of
// each sequence its end state from a zero start, B, and its transfer matrix
// M: a segment entered with state S leaves with M S + B (S indexed [k, v],
// M [k, k'], all fp32). This kernel walks each sequence's segments in order
// from its h0 (or zero) and writes every segment's true start state, which
// the output pass then uses as that segment's h0. The chain is short (the
// segments of one sequence) and keeps fp32 accuracy throughout (fp32 in
// memory, products of about 20 bits): the error of M would otherwise grow
// along it.
//
// Layouts (floats, 128 x 128 per state):
//   bm      [2][P][Hv][128 * 128] B of the P transfer segments ([k][v]), then
//           their M in this kernel's fragment order (element (k, k') at
//           scan_m_index(k, k'), gdn_common.cuh)
//   h0      [N][Hv][128][128]     or null (zero); or the caller's states
//           in another format (flags: [V,K], a bf16 pool, a pool read
//           through slots, as the Hopper kernel's kStateVK, kPoolBF16,
//           kPoolSlots: hopper_state.cuh)
//   starts  [N + P][Hv][128][128] row n < N: the start of sequence n's last
//           segment; row N + p: the start of transfer segment p
//   first   [N + 1]               sequence n's transfer segments are
//           first[n] .. first[n+1] - 1, in token order
//
// Grid (128 / C, Hv, N), 256 threads: a CTA owns C value columns of one
// head of one sequence, C = GDN_SCAN_COLUMNS (8, 16 or 32: three variants,
// kernsrc.ScanVariant). Nothing but the product depends on the previous
// step: M (into shared memory) and B (into registers) of the next segment
// load while this one's product runs. Every CTA of a head reads all of
// each M, and its step's product grows with C (a step with 16 columns
// takes about 1.4 times one with 8, with 32 about 2.4 times), so wider
// CTAs pay only where the 8-column grid would run in more waves than the
// wider one (one CTA an SM: shared memory); the planner picks C (split.go,
// scanColumns).
//
// The product (128 x 128 times 128 x C) runs on the tensor cores as three
// TF32 products of split operands (split_tf32, mma_tf32: about 2^-20 of a
// term, close to fp32 FMA; M and the states stay fp32 in memory). Warp w
// computes the state's rows 16w..16w+15 for all C columns (C / 8 n-tiles,
// each M fragment split once for all of them) over the whole k range (16
// m16n8k8 steps), so no partial sums meet across warps: the step has one
// barrier, after the state is written to shared memory (two buffers, so
// the next step's writes never meet this step's reads). A thread owns the
// accumulator's elements: rows 16w + g and 16w + g + 8, columns 8 nt + 2t
// and 8 nt + 2t + 1 of n-tile nt (g = lane / 4, t = lane % 4). Each
// element's products and sums are the same whatever C: the three variants
// give the same states to the bit.
//
// M comes a step ahead into one of two shared-memory buffers: each warp
// copies its own 8 KB part (its A fragments, contiguous in the order the
// transfer pass stored them, scan_m_index) with one bulk copy onto its own
// mbarrier, and reads a k-step as one 16-byte load: loaded into registers
// instead, the next step's loads sink below the products (ptxas) and the
// step waits for them.

#include "sm90_sync.cuh"
#include "sm90_tma.cuh"

#ifndef GDN_SCAN_COLUMNS
#define GDN_SCAN_COLUMNS 8
#endif
// The states variants (kernsrc.ScanStatesVariant) read h0 in the format its
// flags give; the others have none of that code and ignore the flags.
#ifndef GDN_SCAN_STATES
#define GDN_SCAN_STATES 0
#endif

namespace {
constexpr int kCols = GDN_SCAN_COLUMNS;  // value columns per CTA
static_assert(kCols == 8 || kCols == 16 || kCols == 32, "kernsrc.ScanColumnChoices");
constexpr int kNT = kCols / 8;  // n-tiles of the product
constexpr int kLd = 132;        // row stride (in float pairs) of the state's split copy in shared memory
constexpr int kWarps = 8;
constexpr int kWarpM = 16 * 32;  // float4s of M one warp reads (its 16 rows, all 128 columns)
constexpr int kMBytes = 2 * kWarps * kWarpM * 16;  // two buffers of M
constexpr int kStBytes = 2 * kCols * kLd * 8;      // two buffers of the state's split copy
// The flags of h0's format (kernsrc.ScanFlag*; 0: fp32 [K,V], one state a
// sequence).
enum : int { kScanVK = 1, kScanBF16 = 2, kScanSlots = 4 };
}  // namespace

#ifdef GDN_SCAN_SMEM_BYTES
static_assert(GDN_SCAN_SMEM_BYTES == kMBytes + kStBytes, "kernsrc.ScanSharedBytes");
#endif
#ifdef GDN_SCAN_THREADS
static_assert(GDN_SCAN_THREADS == kWarps * 32, "kernsrc.ScanThreads");
#endif

extern "C" __global__ void __launch_bounds__(256, 1) gdn_scan_states(const float* __restrict__ bm,
                                                                      const float* __restrict__ h0,
                                                                      float* __restrict__ starts,
                                                                      const int* __restrict__ first, int P, int Hv,
                                                                      int N, int flags,
                                                                      const int* __restrict__ slots,
                                                                      int pool_slots) {
  // Mb[buf][w]: warp w's part of an M, its A fragments in the order the
  // transfer pass stored them (scan_m_index): float4 (ks * 32 + lane) holds
  // M's elements (16 w + g + 8 (j & 1), 8 ks + t + 4 (j >> 1)), j = 0..3.
  extern __shared__ __align__(128) float4 Mb[];
  // The state, split into its TF32 pairs, transposed: St[buf][column][row]
  // = (hi, lo), after M's buffers. B fragment loads (row 8 ks + t (+ 4),
  // column 8 nt + g) are 8-byte pairs in distinct banks across a half-warp.
  float2(*const St)[kCols][kLd] = reinterpret_cast<float2(*)[kCols][kLd]>(Mb + kMBytes / 16);
  __shared__ __align__(8) uint64_t mfull[kWarps][2];  // warp w's part of buffer b landed
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int h = blockIdx.y, n = blockIdx.z;
  const int v0 = blockIdx.x * kCols + 2 * t;  // this thread's columns v0 + 8 nt, v0 + 8 nt + 1
  const int r0 = 16 * w + g;                  // ... and rows r0, r0 + 8
  const size_t plane = 128 * 128;
  // This thread's pair of a state `row` (sequence or segment) of head h at
  // row r0 + 8 i, n-tile nt (float2: columns v0 + 8 nt, v0 + 8 nt + 1).
#define AT(row, nt, i) (((size_t)(row) * Hv + h) * plane + (r0 + 8 * (i)) * 128 + v0 + 8 * (nt))
#define MAT(p) (bm + ((size_t)(P + (p)) * Hv + h) * plane)
#define PAIR(ptr, row, nt, i) (*reinterpret_cast<float2*>((ptr) + AT(row, nt, i)))
#define CPAIR(ptr, row, nt, i) (*reinterpret_cast<const float2*>((ptr) + AT(row, nt, i)))

  // Each warp copies its own part of each M (8 KB, contiguous in the
  // fragment order) with one bulk copy onto its own barrier, and reads only
  // that part: no warp waits for another's copy, and a buffer is free again
  // once the warp itself has passed its reads (__syncwarp).
  if (lane == 0) {
    mbar_init(&mfull[w][0], 1);
    mbar_init(&mfull[w][1], 1);
    mbar_fence_init();
  }
  __syncwarp();
  // Warp w's copy of segment p's M into buffer b.
  auto fetch_m = [&](int p, int b) {
    if (lane == 0) {
      mbar_arrive_expect_tx(&mfull[w][b], kWarpM * 16);
      bulk_load(Mb + (b * kWarps + w) * kWarpM, MAT(p) + w * kWarpM * 4, kWarpM * 16, &mfull[w][b]);
    }
  };

  // A dependent launch (splitcall.go): the output pass may be placed now,
  // and nothing is read before the transfer pass has finished.
  griddep_release();
  griddep_wait();

  // S[nt][i]: the state's elements (r0 + 8 i, v0 + 8 nt) and (r0 + 8 i,
  // v0 + 8 nt + 1), the accumulator layout of n-tile nt (c[2 i], c[2 i + 1]).
  float2 S[kNT][2];
  if (GDN_SCAN_STATES && flags != 0) {
    // The caller's states in another format: entry (k, v) = (r0 + 8 i,
    // v0 + 8 nt (+ 1)) of row n, or of slot slots[n] (negative: zero).
    int64_t row = n;
    if (flags & kScanSlots) row = slots[n] < pool_slots ? slots[n] : -1;
    const bool vk = flags & kScanVK, bf = flags & kScanBF16;
    const size_t at = ((size_t)(row < 0 ? 0 : row) * Hv + h) * plane;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int k = r0 + 8 * i, v = v0 + 8 * nt;
        const size_t a0 = at + (vk ? (size_t)v * 128 + k : (size_t)k * 128 + v);
        const size_t a1 = a0 + (vk ? 128 : 1);
        float2 x = make_float2(0.f, 0.f);
        if (h0 != nullptr && row >= 0) {
          const uint16_t* b = reinterpret_cast<const uint16_t*>(h0);
          x = bf ? make_float2(bf16_to_float(b[a0]), bf16_to_float(b[a1])) : make_float2(h0[a0], h0[a1]);
        }
        S[nt][i] = x;
      }
  } else {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int i = 0; i < 2; ++i) S[nt][i] = h0 != nullptr ? CPAIR(h0, n, nt, i) : make_float2(0.f, 0.f);
  }

  const int p0 = first[n], p1 = first[n + 1];
  // M and B of a segment are requested a step ahead: their round trips
  // would otherwise stall the product's first step.
  float2 Bn[kNT][2];
  if (p0 < p1) {
    fetch_m(p0, 0);
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int i = 0; i < 2; ++i) Bn[nt][i] = CPAIR(bm, p0, nt, i);
  }
  for (int p = p0; p < p1; ++p) {
    // Segment p's start is S; S becomes M S + B.
    const int j = p - p0, b = j & 1;
    const bool next = p + 1 < p1;
    // Buffer b ^ 1 was read in step j - 1: every lane of this warp is past
    // those reads (they fed the products that made S).
    __syncwarp();
    if (next) fetch_m(p + 1, b ^ 1);
    float2(*st)[kLd] = St[b];
    float2 acc[kNT][2];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        PAIR(starts, N + p, nt, i) = S[nt][i];
        uint32_t hi, lo;
        split_tf32(S[nt][i].x, hi, lo);
        st[8 * nt + 2 * t][r0 + 8 * i] = make_float2(__uint_as_float(hi), __uint_as_float(lo));
        split_tf32(S[nt][i].y, hi, lo);
        st[8 * nt + 2 * t + 1][r0 + 8 * i] = make_float2(__uint_as_float(hi), __uint_as_float(lo));
        acc[nt][i] = Bn[nt][i];
        if (next) Bn[nt][i] = CPAIR(bm, p + 1, nt, i);
      }
    __syncthreads();  // the state's split copy visible to all warps
    mbar_wait(&mfull[w][b], (j >> 1) & 1);
    const float4* m = Mb + (b * kWarps + w) * kWarpM + lane;
    // Per n-tile, four accumulators of hi hi (a quarter of k each) and two
    // of the cross terms (even and odd k-steps): the tensor cores' fp32
    // accumulation truncates, and in one chain of 16 steps that bias grew
    // to about 7x fp32 FMA's error (ref.TestScanTF32Precision); short
    // chains also give the dependent mma more independent work between them.
    float big[kNT][4][4] = {}, small[kNT][2][4] = {};
#pragma unroll
    for (int ks = 0; ks < 16; ++ks) {
      const float4 a = m[ks * 32];
      const float af[4] = {a.x, a.y, a.z, a.w};
      uint32_t ah[4], al[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) split_tf32(af[q], ah[q], al[q]);
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const float2 b0 = st[8 * nt + g][8 * ks + t], b1 = st[8 * nt + g][8 * ks + t + 4];
        const uint32_t bh0 = __float_as_uint(b0.x), bl0 = __float_as_uint(b0.y);
        const uint32_t bh1 = __float_as_uint(b1.x), bl1 = __float_as_uint(b1.y);
        mma_tf32(small[nt][ks & 1], al, bh0, bh1);
        mma_tf32(small[nt][ks & 1], ah, bl0, bl1);
        mma_tf32(big[nt][ks >> 2], ah, bh0, bh1);
      }
    }
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float hh = (big[nt][0][e] + big[nt][1][e]) + (big[nt][2][e] + big[nt][3][e]);
        const float x = small[nt][0][e] + small[nt][1][e];
        float& out = e & 1 ? S[nt][e >> 1].y : S[nt][e >> 1].x;
        out = hh + (x + (e & 1 ? acc[nt][e >> 1].y : acc[nt][e >> 1].x));
      }
  }
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int i = 0; i < 2; ++i) PAIR(starts, n, nt, i) = S[nt][i];
#undef AT
#undef MAT
#undef PAIR
#undef CPAIR
}

// The kernel's parameters as Go packs them (kernsrc.ScanParams): the
// kernel takes these members, in order (every one naturally aligned, with
// no gap, so the sizes fix the offsets Go writes).
struct ScanParams {
  const float* bm;
  const float* h0;
  float* starts;
  const int* first;
  int P, Hv, N, flags;
  const int* slots;
  int pool_slots;
};
using ScanKernel = void(decltype(ScanParams::bm), decltype(ScanParams::h0), decltype(ScanParams::starts),
                        decltype(ScanParams::first), decltype(ScanParams::P), decltype(ScanParams::Hv),
                        decltype(ScanParams::N), decltype(ScanParams::flags), decltype(ScanParams::slots),
                        decltype(ScanParams::pool_slots));
static_assert(SameType<decltype(gdn_scan_states), ScanKernel>::value, "gdn_scan_states takes ScanParams' members");
#ifdef GDN_SCAN_PARAMS_BYTES
// (Four pointers, four ints, a pointer and an int: no member needs padding.)
static_assert(4 * sizeof(const float*) == GDN_SCAN_OFF_P &&
                  4 * sizeof(const float*) + 4 * sizeof(int) + sizeof(const int*) + sizeof(int) == GDN_SCAN_PARAMS_BYTES,
              "kernsrc.ScanParams");
static_assert(GDN_SCAN_FLAG_VK == kScanVK && GDN_SCAN_FLAG_BF16 == kScanBF16 && GDN_SCAN_FLAG_SLOTS == kScanSlots,
              "kernsrc.ScanFlag*");
#endif
