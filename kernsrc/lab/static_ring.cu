// static_ring.cu: the Hopper kernels that keep their ring's barriers in
// the dynamic block at kOffBars, with them in static shared memory (a
// __shared__ Ring) instead, as the fused kernels have them
// (HopperCfg::kStaticRing): the barriers' addresses then are link-time
// constants (32-bit: a constant plus 8 x the stage) and no 64-bit generic
// pointer to them stays live across a chunk. In the fused kernels that
// removed NVRTC 13's 8 + 8-byte spill; for the others the question is
// only speed (device-run.sh lab:static_ring against production). Outputs
// are the production kernels': only where the barriers live changes. The
// entry below is hopper_kernel.cuh's with that one change (and no test
// switch).
#include "hopper_kernel.cuh"

template <class Cfg, template <class> class Roles = HopperRoles>
__global__ void __launch_bounds__(Cfg::kThreads, 1) gdn_hopper_fwd_static_ring(const __grid_constant__ GdnHopperParams p) {
  static_assert(Cfg::kSmemBytes == GDN_SMEM_BYTES, "kernsrc.HopperSharedBytes disagrees with the layout");
  static_assert(Cfg::kThreads == GDN_THREADS, "kernsrc.HopperThreads disagrees with the warpgroups");
  static_assert(Cfg::kTile == GDN_TMA_BOX_BYTES, "a stage's tile is one TMA box");
  constexpr int kStages = Cfg::kStages;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* const smem = hopper_smem_base(smem_raw);
  // The experiment: the ring in static shared memory, not at kOffBars.
  __shared__ typename Cfg::Ring static_ring;
  typename Cfg::Ring& ring = static_ring;
  // The scan after a transfer pass is a dependent launch: its CTAs may take
  // SMs this grid leaves free once all of this grid's CTAs have started.
  griddep_release();

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
    Roles<Cfg>::converter(smem, ring, w);
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
