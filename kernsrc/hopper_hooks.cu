// hopper_hooks.cu: test builds of the Hopper core forward, never compiled
// by the library: the production kernel (hopper_kernel.cuh) with one of
// its configuration's test switches turned (kernsrc.HopperHooked names
// them; the GPU tests of the sequence-parallel plan run them).
//   WalkToEnd<Cfg>: the transfer pass without its early exit, walking every
//     segment to its end: what the exit must leave unchanged.
//   DelayEarlyPass<Cfg>: the early pass's CTAs wait about a millisecond
//     before their work, so that the transfer pass beside it ends first
//     and the scan's wait for the early pass is put to the test.
#include "hopper_kernel.cuh"

template <class Cfg>
struct WalkToEnd : Cfg {
  static constexpr bool kEarlyExit = false;
};

template <class Cfg>
struct DelayEarlyPass : Cfg {
  static constexpr bool kDelayEarlyPass = true;
};
