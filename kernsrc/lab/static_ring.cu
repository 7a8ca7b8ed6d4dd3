// static_ring.cu: the Hopper kernels that keep their ring's barriers in
// the dynamic block at kOffBars, with them in static shared memory (a
// __shared__ Ring) instead, as the fused kernels have them
// (HopperCfg::kStaticRing): the barriers' addresses then are link-time
// constants (32-bit: a constant plus 8 x the stage) and no 64-bit generic
// pointer to them stays live across a chunk. In the fused kernels that
// removed NVRTC 13's 8 + 8-byte spill; for the others the question is
// only speed (device-run.sh lab:static_ring against production). Outputs
// are the production kernels': only where the barriers live changes, so
// the experiment is the production kernel on a configuration that says
// so.
#include "hopper_kernel.cuh"

template <class Cfg>
struct StaticRing : Cfg {
  static constexpr bool kStaticRing = true;
};
