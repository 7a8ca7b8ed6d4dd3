// Small kernels that exercise the JIT runtime end to end; they have nothing
// to do with Gated DeltaNet. See testkernels.go.
#include "gdn_common.cuh"

// y[i] = a * x[i] + y[i] for i < n.
extern "C" __global__ void gdn_test_axpy(float a, const float* __restrict__ x,
                                         float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Each block copies its n-element slice of x through dynamic shared memory and
// writes it reversed into y. With n large it needs more than the default 48 KB
// of dynamic shared memory, so it checks the opt-in path; asking for more than
// the device allows must come back as an error, not a crash.
extern "C" __global__ void gdn_test_smem_reverse(const float* __restrict__ x,
                                                 float* __restrict__ y, int n) {
  extern __shared__ float buf[];
  const float* xs = x + (size_t)blockIdx.x * n;
  float* ys = y + (size_t)blockIdx.x * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = xs[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) ys[i] = buf[n - 1 - i];
}
