// sm90_tma.cuh: the copy engine. Tiles move between global and shared
// memory by TMA (bulk tensor copies through a tensor map the host encodes),
// completing on an mbarrier (loads) or a bulk group (stores); plain byte
// ranges by bulk copies; single words by cp.async.
#pragma once
#include "gdn_common.cuh"

// A tensor map: a 128-byte, 64-byte-aligned kernel parameter
// (__grid_constant__) encoded by the host (cuTensorMapEncodeTiled).
struct alignas(64) TmaDesc {
  uint64_t raw[16];
};

// Loads the 4-D box at coordinates (c0..c3) into shared memory; completion is
// counted (in bytes) on bar. Out-of-bounds elements arrive as zeros.
GDN_DEVICE void tma_load_4d(void* dst, const TmaDesc* map, uint64_t* bar, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
      "%6}], [%2];" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// Stores a shared-memory box to the 4-D tensor at (c0..c3); elements outside
// the tensor are not written. Completion through bulk groups.
GDN_DEVICE void tma_store_4d(const TmaDesc* map, const void* src, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
GDN_DEVICE void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Waits until the committed stores have finished reading shared memory.
GDN_DEVICE void tma_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// Waits until the committed stores are complete.
GDN_DEVICE void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

GDN_DEVICE void tma_prefetch_desc(const TmaDesc* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Copies bytes (a multiple of 16, 16-byte aligned at both ends) from global
// src to shared dst, no tensor map: completion is counted (in bytes) on bar.
GDN_DEVICE void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}

// Copies 4 bytes from global src to shared dst asynchronously (cp.async),
// or writes 4 zero bytes there when !valid (src then not read). Completion
// through cp.async groups: cp_async_commit, then cp_async_wait_all by the
// same thread before it reads dst.
GDN_DEVICE void cp_async4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(valid ? 4 : 0)
               : "memory");
}
GDN_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
GDN_DEVICE void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
