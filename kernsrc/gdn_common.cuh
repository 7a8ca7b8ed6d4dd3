// gdn_common.cuh: the few device primitives every gdn kernel uses, written
// with inline PTX so that NVRTC needs no CUDA toolkit header at run time:
// fixed-width integers, 16-bit float conversions, shared-memory addresses,
// ldmatrix fragment loads and the m16n8k16 tensor-core product.
#pragma once

typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef int int32_t;
typedef long long int64_t;

#define GDN_DEVICE __device__ __forceinline__

// SameType<A, B>::value: A and B are one type (static_asserts of a
// kernel's signature against the parameter block Go packs).
template <class A, class B>
struct SameType {
  static constexpr bool value = false;
};
template <class A>
struct SameType<A, A> {
  static constexpr bool value = true;
};

// ---------------------------------------------------------------------------
// 16-bit floats are carried as raw bits (uint16_t); these convert them.
// ---------------------------------------------------------------------------

GDN_DEVICE float bf16_to_float(uint16_t x) { return __uint_as_float(((uint32_t)x) << 16); }

GDN_DEVICE float fp16_to_float(uint16_t x) {
  float f;
  asm("{ .reg .f16 h; mov.b16 h, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "h"(x));
  return f;
}

// Two floats to a packed pair, round to nearest even; lo goes to the low half
// (the lower address once stored), as tensor-core fragments expect.
GDN_DEVICE uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

GDN_DEVICE uint32_t pack_fp16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// 1 / sqrt(x) by the MUFU alone, subnormals flushed: for the L2 norm's
// x = sum of squares + 1e-6, never subnormal, it is rsqrtf to the bit
// without rsqrtf's rescaling of tiny inputs (three instructions a row).
GDN_DEVICE float rsqrt_ftz(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 2^x with results below 2^-126 flushed to zero: one MUFU.EX2. __expf
// without -ftz wraps it in a range check and two extra multiplies per call
// to produce denormals, which no product here can tell from zero.
GDN_DEVICE float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Elem<IS_FP16> is the storage type of q, k, v, o and of every tensor-core
// operand the kernel stages in shared memory.
template <bool IS_FP16>
struct Elem;

template <>
struct Elem<false> {  // bf16
  GDN_DEVICE static float to_float(uint16_t x) { return bf16_to_float(x); }
  GDN_DEVICE static uint32_t pack2(float lo, float hi) { return pack_bf16x2(lo, hi); }
  GDN_DEVICE static uint16_t from_float(float x) { return (uint16_t)(pack_bf16x2(x, 0.f) & 0xffffu); }
};

template <>
struct Elem<true> {  // fp16
  GDN_DEVICE static float to_float(uint16_t x) { return fp16_to_float(x); }
  GDN_DEVICE static uint32_t pack2(float lo, float hi) { return pack_fp16x2(lo, hi); }
  GDN_DEVICE static uint16_t from_float(float x) { return (uint16_t)(pack_fp16x2(x, 0.f) & 0xffffu); }
};

// Programmatic dependent launch (sm_90; the host launches the scan and the
// split's output pass with it, driver.LaunchParamsDependent). A kernel
// launched so may run while the one before it drains: griddep_wait blocks
// the calling thread until that kernel has completed and its writes are
// visible, and must come before the thread's first access to anything it
// writes or reads (it returns at once in a kernel launched the ordinary
// way). griddep_release lets the next kernel on the stream, if that one is
// a dependent launch, have its CTAs placed once every CTA of this one has
// executed it (or exited).
GDN_DEVICE void griddep_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
GDN_DEVICE void griddep_release() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---------------------------------------------------------------------------
// FP32 products on the tensor cores: three TF32 products of split operands.
// ---------------------------------------------------------------------------

// A TF32 pair for x: hi = x truncated to TF32 (its 13 low mantissa bits
// cleared), lo = the rest (exact in fp32), truncated likewise, so that hi +
// lo holds x to about 20 bits. Truncation by a mask, not cvt.rna.tf32,
// which sm_90 compiles to about five instructions. The scan (gdn_scan.cu)
// uses them.
// hi(a) hi(b) + hi(a) lo(b) + lo(a) hi(b), the small terms first, leaves
// out only lo(a) lo(b) and the truncated bits of the lo parts: about 2^-20
// of a term, close to fp32 FMA's sums.
GDN_DEVICE void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  hi = __float_as_uint(x) & 0xffffe000u;
  lo = __float_as_uint(x - __uint_as_float(hi)) & 0xffffe000u;
}

// c += a b, m16n8k8, TF32 operands, fp32 accumulators. Fragments: a thread
// (g, t) = (lane / 4, lane % 4) holds A's rows g, g + 8 at columns t, t + 4
// (a[0]: (g, t), a[1]: (g + 8, t), a[2]: (g, t + 4), a[3]: (g + 8, t + 4)),
// B's rows t, t + 4 at column g, and C's rows g, g + 8 at columns 2t, 2t + 1.
GDN_DEVICE void mma_tf32(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Where a transfer matrix's element M(i, c) (row i, column c; 128 x 128)
// lives in its plane: the scan's A-fragment order (gdn_scan.cu), so that
// scan thread (warp w, lane l) reads its k-step ks as one float4 at
// ((16 w + ks) * 32 + l) * 4, holding M(16 w + g + 8 (j & 1), 8 ks + t + 4
// (j >> 1)) in component j (g = l / 4, t = l % 4, as in mma_tf32).
GDN_DEVICE int scan_m_index(int i, int c) {
  const int w = i >> 4, g = i & 7, jlo = (i >> 3) & 1;
  const int ks = c >> 3, t = c & 3, jhi = (c >> 2) & 1;
  return (((w * 16 + ks) * 32 + g * 4 + t) << 2) + jhi * 2 + jlo;
}

// ---------------------------------------------------------------------------
// Shared memory and tensor-core fragments.
// ---------------------------------------------------------------------------

GDN_DEVICE uint32_t smem_addr(const void* p) {
  uint32_t a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

// Four 8x8 16-bit matrices; lane l supplies the row address of row l%8 of
// matrix l/8 and receives, of each matrix j in r[j], the pair at row l/4,
// columns 2(l%4) and 2(l%4)+1 (transposed with .trans).
GDN_DEVICE void ldmatrix_x4(uint32_t r[4], const uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

GDN_DEVICE void ldmatrix_x4_trans(uint32_t r[4], const uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// c += a * b on the tensor cores, fp32 accumulators. The accumulator of lane
// l holds rows l/4 (c[0], c[1]) and l/4 + 8 (c[2], c[3]), columns 2(l%4) and
// 2(l%4)+1.
template <bool IS_FP16>
GDN_DEVICE void mma_16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1);

template <>
GDN_DEVICE void mma_16816<true>(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
