// gdn_hopper.cuh: the Hopper (sm_90a) machinery gdn's kernels are built from,
// as inline PTX so that NVRTC needs no CUDA header: mbarriers, TMA (bulk
// tensor copies), the 128-byte shared-memory swizzle, wgmma descriptors and
// instructions, stmatrix, named barriers and setmaxnreg.
//
// Tiles in shared memory are rows of 128 bytes (64 16-bit values), 8-row
// groups of 1024 bytes, with the 16-byte chunks of row r permuted by r % 8
// (XOR): the layout TMA writes with CU_TENSOR_MAP_SWIZZLE_128B, and the one
// wgmma reads with swizzle mode 1. A tile wider than 64 values is stored as
// 64-wide column blocks ("half tiles"), each of its own rows x 128 bytes.
// Every tile starts at a multiple of 1024 bytes.
#pragma once
#include "gdn_common.cuh"

// Byte offset of (row, byte) in a swizzled tile of 128-byte rows.
GDN_DEVICE uint32_t swz128(int row, int byte) {
  return (uint32_t)(row * 128 + ((((byte >> 4) ^ row) & 7) << 4) + (byte & 15));
}

// ---------------------------------------------------------------------------
// Barriers.
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// TMA. A tensor map is a 128-byte, 64-byte-aligned kernel parameter
// (__grid_constant__) encoded by the host (cuTensorMapEncodeTiled).
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// wgmma. Operands in shared memory are swizzled tiles (see the top). A
// K-major operand (rows = M or N, 128-byte rows along K) advances 32 bytes per
// k-step of 16 inside a half tile; 8-row groups are 1024 bytes apart. An
// M/N-major operand (rows along K, 128-byte rows along M or N) advances
// 16 rows = 2048 bytes per k-step, with 64-wide M/N blocks lbo bytes apart.
// ---------------------------------------------------------------------------

GDN_DEVICE uint64_t wgmma_desc(const void* p, uint32_t lbo, uint32_t sbo) {
  const uint32_t a = smem_addr(p);
  return (uint64_t)((a & 0x3ffff) >> 4) | ((uint64_t)((lbo >> 4) & 0x3fff) << 16) |
         ((uint64_t)((sbo >> 4) & 0x3fff) << 32) | (1ull << 62);
}

// Descriptors of the tiles of one region of shared memory (a pipeline
// stage), each an add to the region's address: wgmma_desc's masks and shifts
// cost five uniform instructions a product, issued from the same slots as
// everything else (a BV 128 chunk issues 36 products a consumer warp). The
// shared window is below 256 KB, so the 14-bit address field never carries.
struct DescBase {
  uint32_t addr16;  // the region's shared address / 16
  GDN_DEVICE explicit DescBase(const void* p) : addr16(smem_addr(p) >> 4) {}
  // wgmma_desc(p + off, lbo, sbo), off a multiple of 16.
  GDN_DEVICE uint64_t at(uint32_t off, uint32_t lbo, uint32_t sbo) const {
    return ((uint64_t)(((sbo >> 4) & 0x3fff) | (1u << 30)) << 32) | (addr16 + (off >> 4) + (((lbo >> 4) & 0x3fff) << 16));
  }
};

GDN_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
GDN_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
GDN_DEVICE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accesses of an accumulator array across a
// wgmma wait (the asm above does not name the registers it waits for).
GDN_DEVICE void reg_fence(float* d, int n) {
#pragma unroll
  for (int i = 0; i < n; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d[0..31] = A * B + (scale_d ? d : 0), m64n64k16, A and B from shared memory
// (descriptors; TA/TB 1 = M-/N-major), fp16 operands, fp32 accumulators.
template <int TA, int TB>
GDN_DEVICE void wgmma_ss_n64(float* d, uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, %35, %36;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
}

// The same product with bf16 operands (exact products of bf16 inputs).
template <int TA, int TB>
GDN_DEVICE void wgmma_ss_n64_bf16(float* d, uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, %35, %36;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
}

// d[0..31] = A * B + (scale_d ? d : 0), m64n64k16, A from registers (four f16x2 per
// thread, the m16n8k16 A-fragment layout per warp), B from shared memory.
template <int TB>
GDN_DEVICE void wgmma_rs_n64(float* d, const uint32_t a[4], uint64_t db, int scale_d = 1) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, %38;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB));
}

// d[0..63] = A * B + (scale_d ? d : 0), m64n128k16, A and B from shared memory
// (descriptors; TA/TB 1 = M-/N-major), fp16 operands, fp32 accumulators.
template <int TA, int TB>
GDN_DEVICE void wgmma_ss_n128(float* d, uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, %67, %68;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB));
}

// d[0..63] = A * B + (scale_d ? d : 0), m64n128k16, A from registers (four f16x2 per
// thread, the m16n8k16 A-fragment layout per warp), B from shared memory.
template <int TB>
GDN_DEVICE void wgmma_rs_n128(float* d, const uint32_t a[4], uint64_t db, int scale_d = 1) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, %70;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB));
}

// 2^x with results below 2^-126 flushed to zero: one MUFU.EX2. __expf
// without -ftz wraps it in a range check and two extra multiplies per call
// to produce denormals, which no product here can tell from zero.
GDN_DEVICE float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// ---------------------------------------------------------------------------
// Fragments. An m64nN fp32 accumulator gives warp w of the warpgroup rows
// 16w + lane/4 (+8), and per 8-column block j the elements d[4j..4j+3] at
// columns 8j + 2(lane%4) (+1): (r, c), (r, c+1), (r+8, c), (r+8, c+1). The A
// operand from registers for k-step s (columns 16s..16s+15) is the same
// fragment packed to f16x2: {d[8s], d[8s+1]}, {d[8s+2], d[8s+3]},
// {d[8s+4], d[8s+5]}, {d[8s+6], d[8s+7]}.
// ---------------------------------------------------------------------------

// A-operand registers for k-step s from an accumulator (optionally with
// column factors: f[c] for the column c of each element).
GDN_DEVICE void acc_to_a(uint32_t a[4], const float* d, int s) {
  a[0] = pack_fp16x2(d[8 * s + 0], d[8 * s + 1]);
  a[1] = pack_fp16x2(d[8 * s + 2], d[8 * s + 3]);
  a[2] = pack_fp16x2(d[8 * s + 4], d[8 * s + 5]);
  a[3] = pack_fp16x2(d[8 * s + 6], d[8 * s + 7]);
}

// Stores four 8x8 16-bit matrices; lane l gives the address of row l%8 of
// matrix l/8, and r[j] is the thread's pair of matrix j in the accumulator
// layout (row lane/4, columns 2(lane%4), +1). With .trans each matrix is
// written transposed.
GDN_DEVICE void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}
GDN_DEVICE void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// Stores an m64 x (8 nblocks) accumulator (columns c0.., fp16) into a
// swizzled tile of 128-byte rows at tile (row 0 = accumulator row 0): each
// stmatrix covers two 8-column blocks of the warp's 16 rows. The columns
// c0 .. c0 + 8 nblocks - 1 must lie within the tile's 64.
GDN_DEVICE void store_acc_fp16(unsigned char* tile, const float* d, int nblocks, int c0, int warp, int lane) {
  const int m = lane >> 3, r = lane & 7;
  const int row = 16 * warp + 8 * (m & 1) + r;
#pragma unroll
  for (int j = 0; j < nblocks; j += 2) {
    const int chunk = c0 / 8 + j + (m >> 1);
    stmatrix_x4(smem_addr(tile) + swz128(row, 16 * chunk), pack_fp16x2(d[4 * j], d[4 * j + 1]),
                pack_fp16x2(d[4 * j + 2], d[4 * j + 3]), pack_fp16x2(d[4 * j + 4], d[4 * j + 5]),
                pack_fp16x2(d[4 * j + 6], d[4 * j + 7]));
  }
}
