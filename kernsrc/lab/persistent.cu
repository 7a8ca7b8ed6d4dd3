// persistent.cu: persistent CTAs (the many-heads model's (d)) as one walk
// over several sequences. Under a launch of packed sequences of one
// length L, a multiple of 64, the CTAs of the first dn grid rows (dn =
// the SMs over the value heads) each take dn-th of the sequences, a run
// of neighbours, and walk them as one: in the packed layout their tokens
// follow each other, and no chunk crosses from one to the next, so the
// producers, the copies and the ring see one long sequence (production's
// roles, given a Work for the run). Only the state knows the difference:
// at the top of each sequence's first chunk the consumers store the
// state as the sequence before's ht and load the next one's h0
// (NoTurns::top). The CTAs of the other rows end at once. So the next
// sequence's first chunks are loaded and prepared under the last chunks
// of the one before, instead of in a wave of their own. The same products
// in the same order: production's outputs bit for bit.
//
// Bounded by timing its shape (docs/perf/v48.md): q35_1kx8 1.08x, q35_4kx8
// and q397_4kx8 2-3%, less the h0 loads between sequences, which all CTAs
// make at about the same time.
//
// Any other launch (unequal lengths, lengths not a multiple of 64, no
// cu_seqlens, more than 64 sequences, a grid of at most one wave) runs
// production's walk. dn counts %nsmid, which may exceed the SMs present,
// at most 132 (the H100's and H200's, the cards the lab is timed on). The
// fused kernels without the norm, fp32 [K,V] states (not the states
// variants).
#include "hopper_kernel.cuh"

// The CTA's run of sequences: first .. last - 1, each nchs chunks.
struct Span {
  bool on;    // the launch is walked in runs
  bool idle;  // ... and this CTA has none
  int first, last, nchs;
};

GDN_DEVICE int64_t seq_start(const GdnHopperParams& p, int i) {
  if (p.sc.flags & kSeqlensInt64) return static_cast<const int64_t*>(p.ptr.cu_seqlens)[i];
  return static_cast<const int32_t*>(p.ptr.cu_seqlens)[i];
}

// The same in every thread of the CTA (and its on in every CTA).
GDN_DEVICE Span span_of(const GdnHopperParams& p) {
  Span s{false, false, 0, 0, 0};
  const int n = gridDim.y, heads = gridDim.x;
  if (p.ptr.cu_seqlens == nullptr || (p.sc.flags & kSegPairs) || n > 64) return s;
  unsigned sms;
  asm("mov.u32 %0, %%nsmid;" : "=r"(sms));
  const int dn = max(1, (int)min(sms, 132u) / heads);
  if (dn >= n) return s;
  const int64_t len = seq_start(p, 1) - seq_start(p, 0);
  if (len <= 0 || len % 64 != 0 || seq_start(p, 0) < 0 || seq_start(p, n) > p.sc.T) return s;
  for (int i = 1; i < n; ++i)
    if (seq_start(p, i + 1) - seq_start(p, i) != len) return s;
  s.on = true;
  const int y = blockIdx.y;
  s.idle = y >= dn;
  s.first = y * n / dn;
  s.last = (y + 1) * n / dn;
  s.nchs = (int)(len / 64);
  return s;
}

// The run as one sequence: its tokens, TMA coordinates and chunks; n, the
// first sequence (whose h0 production's consumers load).
GDN_DEVICE Work span_work(const GdnHopperParams& p, const Work& w, const Span& s) {
  Work r = w;
  r.bos = seq_start(p, s.first);
  r.len = (int)(seq_start(p, s.last) - r.bos);
  r.nch = r.len / 64;
  r.t0 = (int)r.bos;
  r.b = 0;
  r.n = s.first;
  return r;
}

// The consumers' policy: production's, with the run's state rows and the
// state handed over at each sequence's first chunk.
struct SpanStates : NoTurns {
  int first, last, nchs;
  GDN_DEVICE int first_row(const Work&) const { return first; }
  GDN_DEVICE int last_row(const Work&) const { return last - 1; }
  template <class Cfg>
  GDN_DEVICE void top(const GdnHopperParams& p, const Work& w, int c, float* S, int vb, int warp, int lane) {
    // Two chunks before a sequence's first, the first consumer thread asks
    // L2 for its h0 (64 KB, one head's: contiguous), so that the loads
    // below find it there rather than in DRAM. (The bulk prefetch wants
    // 16-byte alignment, which the host checks only to 8: an h0 that
    // lacks it goes without.)
    if (warp == 0 && lane == 0 && vb == w.v0 && p.ptr.h0 != nullptr && (c + 2) % nchs == 0 && c + 2 < w.nch) {
      const float* h0 = p.ptr.h0 + ((int64_t)(first + (c + 2) / nchs) * p.sc.Hv + w.h) * 128 * 128;
      if ((reinterpret_cast<unsigned long long>(h0) & 15) == 0)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], 65536;" ::"l"(h0) : "memory");
    }
    if (c == 0 || c % nchs != 0) return;
    const int next = first + c / nchs, prev = next - 1;
    // Thread's entries (k, v) = (8 j + 2 tq + e % 2, vb + 16 warp + gq +
    // 8 (e / 2)) lie at constant offsets 1024 j + 128 (e % 2) + 8 (e / 2)
    // from its first: one address a state, held only here.
    const int64_t mine = (int64_t)(2 * (lane & 3)) * 128 + vb + 16 * warp + (lane >> 2);
    if (p.ptr.ht != nullptr && prev < p.sc.n_ht) {
      float* const out = p.ptr.ht + ((int64_t)prev * p.sc.Hv + w.h) * 128 * 128 + mine;
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) out[1024 * j + 128 * (e & 1) + 8 * (e >> 1)] = S[4 * j + e];
    }
    if (p.ptr.h0 == nullptr) {
#pragma unroll
      for (int i = 0; i < 64; ++i) S[i] = 0.f;
      return;
    }
    const float* const in = p.ptr.h0 + ((int64_t)next * p.sc.Hv + w.h) * 128 * 128 + mine;
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) S[4 * j + e] = in[1024 * j + 128 * (e & 1) + 8 * (e >> 1)];
  }
};

template <class Cfg>
struct Persistent : HopperRoles<Cfg> {
  static_assert(Cfg::kFused && !Cfg::kNorm && !Cfg::kStates && Cfg::kNC == 2, "the fused BV 128 kernels without the norm");
  using Ring = typename Cfg::Ring;

  static GDN_DEVICE void aux_fused(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w) {
    const Span s = span_of(p);
    if (!s.idle) run_aux_fused<Cfg>(smem, ring, p, s.on ? span_work(p, w, s) : w);
  }
  static GDN_DEVICE void converter(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w) {
    const Span s = span_of(p);
    if (!s.idle) run_converter<Cfg>(smem, ring, s.on ? span_work(p, w, s) : w);
  }
  static GDN_DEVICE void consumer(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w, int cw) {
    const Span s = span_of(p);
    if (s.idle) return;
    if (!s.on) {
      run_consumer<Cfg>(smem, ring, p, w, cw);
      return;
    }
    SpanStates st;
    st.first = s.first, st.last = s.last, st.nchs = s.nchs;
    run_consumer<Cfg>(smem, ring, p, span_work(p, w, s), cw, st);
  }
};
