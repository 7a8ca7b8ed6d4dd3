// hopper_kernel.cuh: the Hopper core forward as a composition of its
// roles. gdn_hopper_fwd<Cfg> finds the CTA's work
// (sequence, value head and tile), sets up the ring's barriers, and hands
// each warpgroup its role:
//   warpgroups 0 .. kAux-1          aux (hopper_aux.cuh; kFused: hopper_aux_fused.cuh)
//   warpgroups kAux .. kAux+kNC-1   consumers (hopper_consumer.cuh)
//   warpgroup kAux+kNC (kConv)      converter (hopper_converter.cuh)
#pragma once
#include "hopper_aux.cuh"
#include "hopper_aux_fused.cuh"
#include "hopper_consumer.cuh"
#include "hopper_converter.cuh"

// The roles of the warpgroups, one static function each: HopperRoles are
// the production kernel's. A lab kernel (kernsrc/lab) passes its own as
// the kernel's second template argument, deriving from HopperRoles and
// replacing the roles it studies.
template <class Cfg>
struct HopperRoles {
  using Ring = typename Cfg::Ring;
  static GDN_DEVICE void aux(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w, int aw) {
    run_aux<Cfg>(smem, ring, p, w, aw);
  }
  static GDN_DEVICE void aux_fused(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w) {
    run_aux_fused<Cfg>(smem, ring, p, w);
  }
  static GDN_DEVICE void consumer(unsigned char* smem, Ring& ring, const GdnHopperParams& p, const Work& w, int cw) {
    run_consumer<Cfg>(smem, ring, p, w, cw);
  }
  static GDN_DEVICE void converter(unsigned char* smem, Ring& ring, const GdnHopperParams&, const Work& w) {
    run_converter<Cfg>(smem, ring, w);
  }
};

// The 1024-byte-aligned base of the dynamic shared memory: swizzled tiles
// need it, the dynamic base promises less (the launch gives 1 KB of slack).
GDN_DEVICE unsigned char* hopper_smem_base(unsigned char* smem_raw) {
  return smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
}

// The kernel. Its body stays in the entry itself (not in a device function
// it calls): the optimiser's order of passes over the entry and its
// callees shapes the code ptxas gets.
template <class Cfg, template <class> class Roles = HopperRoles>
__global__ void __launch_bounds__(Cfg::kThreads, 1) gdn_hopper_fwd(const __grid_constant__ GdnHopperParams p) {
  static_assert(Cfg::kSmemBytes == GDN_SMEM_BYTES, "kernsrc.HopperSharedBytes disagrees with the layout");
  static_assert(Cfg::kThreads == GDN_THREADS, "kernsrc.HopperThreads disagrees with the warpgroups");
  static_assert(Cfg::kTile == GDN_TMA_BOX_BYTES, "a stage's tile is one TMA box");
  constexpr int kStages = Cfg::kStages;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* const smem = hopper_smem_base(smem_raw);
  // The ring's barriers: in the dynamic block at kOffBars, or in static
  // shared memory (Cfg::kStaticRing).
  __shared__ typename Cfg::Ring static_ring;
  typename Cfg::Ring& ring =
      Cfg::kStaticRing ? static_ring : *reinterpret_cast<typename Cfg::Ring*>(smem + Cfg::kOffBars);
  // The scan after a transfer pass is a dependent launch: its CTAs may take
  // SMs this grid leaves free once all of this grid's CTAs have started.
  griddep_release();
  // A test build's early pass waits about a millisecond before its work
  // (Cfg::kDelayEarlyPass), so that the transfer pass beside it ends first.
  if (Cfg::kDelayEarlyPass && (p.sc.flags & kEarlyPass))
    for (const long long t0 = clock64(); clock64() - t0 < 2000000;) {
    }

  // The CTA's work: its sequence (or segment) and tokens, value head and
  // value tile.
  Work w;
  constexpr int tiles = 128 / Cfg::kBV;
  int x = blockIdx.x, n = blockIdx.y;
  w.store_o = !(p.sc.flags & kTransfer);
  if (Cfg::kXfer && !w.store_o && (p.sc.flags & kMFirst)) {
    // The transfer pass (grid.x = 2 * half: B CTAs, then M CTAs) takes its
    // CTAs in the order every segment's M, then every segment's B: CTAs
    // start in linear block order, and the M CTAs of decaying heads end
    // early (the consumers' early exit). Longest first: every M CTA that
    // cannot stop (a head that barely decays) starts in the first wave,
    // and the B CTAs left over take the SMs the stopped ones free. Only
    // where the plan sets kMFirst, a grid of more than one wave; in one
    // wave the order changes nothing, and the plain order keeps each
    // segment's B and M CTAs side by side.
    const int half = p.sc.Hv * tiles, lin = blockIdx.x + gridDim.x * blockIdx.y;
    const int b = lin >= half * (int)gridDim.y, l = lin - b * half * gridDim.y;
    x = l % half + (1 - b) * half;
    n = l / half;
  }
  w.zero_v = !w.store_o && x >= p.sc.Hv * tiles;
  if (w.zero_v) x -= p.sc.Hv * tiles;
  w.h = x / tiles;
  w.v0 = (x % tiles) * Cfg::kBV;
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
      // tiles.
      mbar_init(&ring.at[kFull][s], 1 + (Cfg::kFused ? 32 : 0));
      // The aux group, and the converter but under kNorm without kFused
      // (where it hands its tiles to the aux group instead).
      mbar_init(&ring.at[kReady][s], 128 * (1 + (Cfg::kConv && (!Cfg::kNorm || Cfg::kFused))));
      if (Cfg::kConv && !Cfg::kNorm) mbar_init(&ring.at[kQKRead][s], 128);  // the aux group
      if (Cfg::kNorm) mbar_init(&ring.at[kNormed][s], 128);                 // the converter
      mbar_init(&ring.at[kEmpty][s], 128 * Cfg::kNC);                       // the consumer groups
    }
    mbar_fence_init();
    *reinterpret_cast<volatile int*>(smem + Cfg::kOffStop) = w.nch;  // no early exit yet
  }
  if (w.zero_v) {
    // The transfer matrix reads v as zero: its tiles are cleared once and
    // never loaded (the in-place conversion keeps zeros zero).
    for (int s = 0; s < kStages; ++s)
      for (int q = threadIdx.x; q < Cfg::kNC * Cfg::kTile / 16; q += Cfg::kThreads)
        reinterpret_cast<uint4*>(smem + s * Cfg::kStageBytes + Cfg::kOffV)[q] = make_uint4(0, 0, 0, 0);
    fence_async_smem();
  }
  __syncthreads();

  const int wg = threadIdx.x >> 7;
  if (wg < Cfg::kAux) {
    if (Cfg::kSetRegs) regs_dealloc<Cfg::kAuxRegs>();
    if (Cfg::kFused)
      Roles<Cfg>::aux_fused(smem, ring, p, w);
    else
      Roles<Cfg>::aux(smem, ring, p, w, wg);
  } else if (!Cfg::kConv || wg < Cfg::kAux + Cfg::kNC) {
    // (Without a converter this is the plain else: a test of wg here took
    // the transfer pass's chunk loop off ptxas's uniform datapath.)
    if (Cfg::kSetRegs) regs_alloc<Cfg::kConsumerRegs>();
    Roles<Cfg>::consumer(smem, ring, p, w, wg - Cfg::kAux);
  } else {
    regs_dealloc<Cfg::kConvRegs>();
    Roles<Cfg>::converter(smem, ring, p, w);
  }
  // kAfterEarly: the grid's last CTA (CTAs start in linear order) holds the
  // grid open until the early pass has completed and its writes are
  // visible; every other CTA leaves as soon as its work is done. (The PTX
  // ISA promises only the prerequisite grid's completion to the scan that
  // follows, so the wait stays: one thread of one CTA.)
  if (Cfg::kXfer && (p.sc.flags & kAfterEarly) && threadIdx.x == 0 && blockIdx.x == gridDim.x - 1 &&
      blockIdx.y == gridDim.y - 1)
    griddep_wait();
}
