// gdn_hopper.cu: the Gated DeltaNet core forward for Hopper (sm_90a): TMA
// loads and stores, an mbarrier ring of chunk stages, wgmma for every
// product, and warp specialisation (hopper_kernel.cuh: the kernel and how
// its roles meet). The production variants compile this file; the kernel
// template is instantiated per variant through an NVRTC name expression
// that kernsrc/hopper.go writes, e.g.
//
//   gdn_hopper_fwd<HopperCfg<Elt::bf16, Elt::bf16, 2, Pass::forward, Prep::none>>
//
// (hopper_cfg.cuh: the choices, and everything that follows from them).
// Its one parameter is GdnHopperParams (hopper_params.cuh).
#include "hopper_kernel.cuh"
