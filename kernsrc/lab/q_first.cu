// q_first.cu: the fused kernels without the norm, whose converter turns
// Q to fp16 as soon as its own Q K^T has read it, and only K after the
// aux group's K K^T has (qk_read). Production's converter converts both
// after qk_read, though only K is the aux group's to read.
//
// On the H100 without copies, production's converter waits 28.1% of its
// time at qk_read (docs/perf/v48.md). Its chunk's tail after that wait is
// on the chunk's path: the merge added there made the chunk 3% slower
// (`noloads_merge_in_converter`, v49), while the same merge taken off the
// aux group's end changed nothing (`noloads_nomerge`). This lab moves half
// of that tail, Q's 8 of the 16 pieces a thread, into the wait. The same
// conversions of the same pieces, so production's outputs bit for bit.
// Two forms: q_first (production's copies) and noloads_q_first (noloads').
// The program is fused_consumers.cu, noloads.cu, then this file.
#include "hopper_kernel.cuh"

// The stage's K pieces (kQ false) or Q pieces (kQ true) from bf16 to fp16
// in place, by one warpgroup: of thread t's pieces t + 128 u (convert_qk's),
// tiles u / 4 = 0 and 2 are K's two d halves, 1 and 3 Q's.
template <bool kQ>
GDN_DEVICE void convert_k_or_q(uint4* st, int t) {
#pragma unroll 2
  for (int i = 0; i < 8; i += 2) {
    const int u = (i & 3) + 8 * (i >> 2) + (kQ ? 4 : 0);
    const uint4 a = st[t + 128 * u], b = st[t + 128 * (u + 1)];
    st[t + 128 * u] = bf16_to_fp16x8(a);
    st[t + 128 * (u + 1)] = bf16_to_fp16x8(b);
  }
}

template <class Cfg>
struct QFirst : HopperRoles<Cfg> {
  static_assert(Cfg::kFused && !Cfg::kNorm, "the fused kernels without the norm");
  using Ring = typename Cfg::Ring;

  // run_fused_converter's chunk with Q's conversion moved ahead of the
  // wait on qk_read (the aux group's K K^T reads K only).
  static GDN_DEVICE void converter(unsigned char* smem, Ring& ring, const GdnHopperParams&, const Work& w) {
    const int tid = threadIdx.x & 127;
    for (int c = 0; c < w.nch; ++c) {
      const Slot sl = ring.slot(c);
      unsigned char* stage = smem + sl.s * Cfg::kStageBytes;
      uint4* st = reinterpret_cast<uint4*>(stage + Cfg::kOffBQ);
      ring.wait(kFull, sl);
      build_fused_p<Cfg>(stage, *reinterpret_cast<Vec*>(stage + Cfg::kOffVec), chunk_len(w, c), tid);
      // Every warp's part of Q K^T has read Q and K.
      named_sync(Cfg::kBarConv, 128);
      convert_k_or_q<true>(st, tid);
      ring.wait(kQKRead, sl);
      convert_k_or_q<false>(st, tid);
      fence_async_smem();
      ring.arrive(kReady, sl);
    }
  }
};

template <class Cfg>
struct NoLoadsQFirst : ConsumersWith<Cfg, QFirst<Cfg>, NoLoads<NoTurns>> {};
