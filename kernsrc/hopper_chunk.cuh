// hopper_chunk.cuh: what every role of the Hopper core forward knows about
// a chunk: where the CTA's sequence lies (Work), the gate vectors a stage
// carries (Vec), the stage's tiles as wgmma operands, the TMA loads that
// fill a stage, and the element conversions the roles share.
#pragma once
#include "hopper_cfg.cuh"
#include "hopper_params.cuh"

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

// The stage's tiles as wgmma operands (sm90_tile.cuh): K and Q rows
// (K-major along d, the two d blocks 2 tiles apart), K along its tokens
// (N-major: the state update's B), value tile x (M-major), A2 and P
// (K-major along j).
template <class Cfg>
struct StageTiles {
  static GDN_DEVICE KMajor k_rows(const DescBase& sd) { return {sd, Cfg::kOffBQ, 2 * Cfg::kTile}; }
  static GDN_DEVICE KMajor q_rows(const DescBase& sd) { return {sd, Cfg::kOffBQ + Cfg::kTile, 2 * Cfg::kTile}; }
  static GDN_DEVICE MNMajor k_tokens(const DescBase& sd) { return {sd, Cfg::kOffBQ, 2 * Cfg::kTile}; }
  static GDN_DEVICE MNMajor v_tokens(const DescBase& sd, int x) {
    return {sd, Cfg::kOffV + x * Cfg::kTile, Cfg::kTile};
  }
  static GDN_DEVICE KMajor a2_rows(const DescBase& sd) { return {sd, Cfg::kOffA2, Cfg::kTile}; }
  static GDN_DEVICE KMajor p_rows(const DescBase& sd) { return {sd, Cfg::kOffP, Cfg::kTile}; }
};

template <class Cfg>
GDN_DEVICE float read_beta(const GdnHopperParams& p, int64_t idx) {
  if (p.sc.flags & kBetaFP32) return static_cast<const float*>(p.ptr.beta)[idx];
  return Cfg::E::to_float(static_cast<const uint16_t*>(p.ptr.beta)[idx]);
}

// TMA loads of chunk c's q, k, value tiles and A into a stage; one thread.
template <class Cfg>
GDN_DEVICE void issue_loads(unsigned char* st, uint64_t* full, const GdnHopperParams& p, const Work& w, int c) {
  constexpr int kTile = Cfg::kTile, kNC = Cfg::kNC;
  const bool a32 = p.sc.flags & kAFP32;
  mbar_arrive_expect_tx(full, ((Cfg::kXfer ? 2 : 4) + (w.zero_v ? 0 : kNC) + (Cfg::kFused ? 0 : a32 ? 2 : 1)) * kTile);
  const int t = w.t0 + 64 * c;
  if (!Cfg::kFused) {  // (kFused builds A2 itself)
    tma_load_4d(st + Cfg::kOffA2, &p.tm_a, full, 0, w.h, t, w.b);
    if (a32) tma_load_4d(st + Cfg::kOffA2 + kTile, &p.tm_a, full, 32, w.h, t, w.b);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    tma_load_4d(st + Cfg::kOffBQ + 2 * h * kTile, &p.tm_k, full, 64 * h, w.hk, t, w.b);
    if (!Cfg::kXfer) tma_load_4d(st + Cfg::kOffBQ + (2 * h + 1) * kTile, &p.tm_q, full, 64 * h, w.hk, t, w.b);
  }
  if (w.zero_v) return;  // the value tiles stay zero (cleared at the start)
#pragma unroll
  for (int x = 0; x < kNC; ++x) tma_load_4d(st + Cfg::kOffV + x * kTile, &p.tm_v, full, w.v0 + 64 * x, w.h, t, w.b);
}

// A packed pair of fp16 (F16) or bf16 values (lo, hi) as two floats.
template <bool F16>
GDN_DEVICE float2 unpack2_of(uint32_t x) {
  if (F16) return make_float2(fp16_to_float((uint16_t)(x & 0xffff)), fp16_to_float((uint16_t)(x >> 16)));
  return make_float2(__uint_as_float(x << 16), __uint_as_float(x & 0xffff0000u));
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

// P = Q K^T of a stage's K and Q tiles (m64n64, k-steps of 16 along d),
// issued and committed: bf16 operands (the tiles as loaded from bf16
// inputs: exact products) or fp16.
template <class Cfg, bool BF16>
GDN_DEVICE void issue_qk(float* P, const DescBase& sd) {
  using T = StageTiles<Cfg>;
  wgmma_fence();
  gemm_ss<64, BF16, 0, 0, 8>(P, T::q_rows(sd), T::k_rows(sd));
  wgmma_commit();
}
