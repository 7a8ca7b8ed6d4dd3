// sm90_sync.cuh: how the threads of a Hopper CTA wait for each other and
// for the copy engine: mbarriers (phase-parity waits, transaction bytes),
// named barriers over some warps, the generic-to-async proxy fence, and
// setmaxnreg's register reallocation between warpgroups. Inline PTX, so
// that NVRTC needs no CUDA header.
#pragma once
#include "gdn_common.cuh"

GDN_DEVICE void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

// Makes the initialised barriers visible to the async proxy (TMA).
GDN_DEVICE void mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

GDN_DEVICE void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Arrives and announces bytes that TMA copies will complete on this barrier.
GDN_DEVICE void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

// Waits until the barrier's phase with the given parity has completed.
GDN_DEVICE void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// Named barriers (0 is __syncthreads): count threads, a multiple of 32.
GDN_DEVICE void named_sync(int id, int count) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory"); }
// Arrives on named barrier id without waiting (bar.arrive): a signal to the
// threads that sync on it. count is all of the phase's threads, those that
// arrive and those that sync; a thread must not arrive again before the
// phase it arrived in has completed.
GDN_DEVICE void named_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}
// Named barrier id over count threads that also returns whether any of them
// passed true (bar.red.or.pred).
GDN_DEVICE bool named_sync_or(int id, int count, bool v) {
  uint32_t r;
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.or.pred q, %2, %3, p;\nselp.u32 %0, 1, 0, q;\n}"
      : "=r"(r)
      : "r"((uint32_t)v), "r"(id), "r"(count)
      : "memory");
  return r != 0;
}

// The named barrier of a group of warps (a role's warpgroup, or several
// roles together): every thread of the group calls sync.
struct NamedBarrier {
  int id, count;
  GDN_DEVICE void sync() const { named_sync(id, count); }
  // sync, and whether any thread of the group passed true.
  GDN_DEVICE bool sync_or(bool v) const { return named_sync_or(id, count, v); }
};

// Orders this thread's generic-proxy shared-memory writes before later
// async-proxy accesses (wgmma operand reads, TMA stores) of any thread that
// synchronises with it.
GDN_DEVICE void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Register budget of a warpgroup (multiples of 8, 24..256).
template <int N>
GDN_DEVICE void regs_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N>
GDN_DEVICE void regs_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
