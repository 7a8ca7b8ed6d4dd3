// hopper_fused_gates.cuh: the gate vectors of the fused full forward,
// written by the first warp of the first consumer group (the gate warp),
// two chunks ahead, at the top of a chunk while the consumers wait for
// ready anyway: the fused chunk is bound by its producers, and the gate
// work is latency the producers would otherwise add to it. Its 32 lanes
// arrive on the stage's full beside the copies' bytes, so the producers
// find the vectors with the tiles. The raw gates come a chunk ahead by
// cp.async into kRawGates (held in registers across the chunk, they
// spilled).
#pragma once
#include "hopper_chunk.cuh"

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

// A chunk's cumulative log-gates, one warp: lane's token's (a) and token
// lane + 32's (b), and the chunk's last (last), from their raw gates (0
// past the chunk): chunk-local, gdn_prep_chunk's to the bit (an inclusive
// warp scan of each half of the chunk, the second half then adding the
// first's total: its two warps' order of additions).
struct ChunkGates {
  float a, b, last;
};
GDN_DEVICE ChunkGates scan_chunk_gates(float a, float b, int lane, int len, const GateParams& gp) {
  if (gp.on) {
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
  return ChunkGates{a, b, len > 32 ? last_b : last_a};
}

// A chunk's gate vectors (vec: g, eg, f and gamma, as write_gate_vectors
// leaves them), one warp, from the raw gates of lane's token (a) and of
// token lane + 32 (b): scan_chunk_gates' log-gates and their factors.
GDN_DEVICE void write_chunk_gates(Vec& vec, float a, float b, int lane, int len, const GateParams& gp) {
  const ChunkGates g = scan_chunk_gates(a, b, lane, len, gp);
  vec.g[lane] = g.a;
  vec.g[lane + 32] = g.b;
  write_gate_entries(vec, g.a, g.last, lane, len);
  write_gate_entries(vec, g.b, g.last, lane + 32, len);
  if (lane == 0) vec.gamma = __expf(g.last);
}
