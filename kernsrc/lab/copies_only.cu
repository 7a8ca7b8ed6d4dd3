// copies_only.cu: the fused kernels' copies alone: every role keeps the
// ring's protocol (each wait and arrival) and production's copies (the
// q, k and v tiles by TMA, o's tile stored by TMA each chunk) but does no
// work, so the time is what the card takes to move a chunk's bytes in
// this pattern (64-token boxes of one head, rows a head count apart) and
// with this ring (a stage refilled once both consumer groups release it).
// Beside fused_consumers (the consumers' chain with those copies) and
// noloads_consumers (the chain without them), it says whether the copies
// are held back by their pattern or by when the chain issues them: on the
// H100 the consumers alone move about 2.1 TB/s, 62% of the card's peak,
// and the copies alone 2.87, 86% (docs/perf/v49.md): not the pattern. Outputs are wrong by design (o is the staging
// tile's stale bytes). The program is fused_consumers.cu, then this file.
#include "hopper_kernel.cuh"

template <class Cfg>
struct CopiesOnly : PassAlong<Cfg, false> {
  using Ring = typename Cfg::Ring;

  // A consumer group: per chunk, the refill of the stage released a chunk
  // before (the first group's first thread, as run_consumer's under
  // kFused), the gate warp's arrival on full two chunks ahead (without
  // its vectors), the wait on ready, o's store, and the release.
  static GDN_DEVICE void consumer(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w, int cw) {
    constexpr int kStages = Cfg::kStages;
    const int t = threadIdx.x & 127, warp = t >> 5;
    const bool gate_warp = cw == 0 && warp == 0;
    unsigned char* out = smem + Cfg::kOffOut + cw * Cfg::kTile;
    if (gate_warp)
      for (int x = 0; x < 2 && x < w.nch; ++x) mbar_arrive(ring.bar(kFull, x % kStages));
    griddep_wait();
    for (int c = 0; c < w.nch; ++c) {
      const Slot sl = ring.slot(c);
      if (cw == 0 && t == 0 && c >= 1 && c - 1 + kStages < w.nch) {
        const Slot prev = ring.slot(c - 1);
        ring.wait(kEmpty, prev);
        issue_loads<Cfg>(smem + prev.s * Cfg::kStageBytes, ring.bar(kFull, prev.s), p, w, c - 1 + kStages);
      }
      if (gate_warp && c + 2 < w.nch) {
        if (c >= 1) mbar_wait(ring.bar(kEmpty, (c - 1) % kStages), ((c - 1) / kStages) & 1);
        mbar_arrive(ring.bar(kFull, (c + 2) % kStages));
      }
      ring.wait(kReady, sl);
      if (w.store_o && t == 0) {
        tma_store_wait_read();
        tma_store_4d(&p.tm_o, out, w.v0 + 64 * cw, w.h, w.t0 + 64 * c, w.b);
        tma_store_commit();
      }
      ring.arrive(kEmpty, sl);
    }
    if (t == 0) tma_store_wait_all();
  }
};
