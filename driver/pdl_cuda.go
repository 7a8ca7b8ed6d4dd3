//go:build cuda

package driver

/*
#include <cuda.h>

// gdn_launch_dependent is cuLaunchKernel with programmatic stream
// serialisation allowed: the kernel may start before the one before it on
// the stream has finished (once every CTA of that one has triggered or
// exited); it must run griddepcontrol.wait before it reads what that one
// writes.
static CUresult gdn_launch_dependent(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                     unsigned by, unsigned bz, unsigned smem, CUstream s, void** params) {
	CUlaunchAttribute attr[1];
	attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	attr[0].value.programmaticStreamSerializationAllowed = 1;
	CUlaunchConfig cfg;
	cfg.gridDimX = gx;
	cfg.gridDimY = gy;
	cfg.gridDimZ = gz;
	cfg.blockDimX = bx;
	cfg.blockDimY = by;
	cfg.blockDimZ = bz;
	cfg.sharedMemBytes = smem;
	cfg.hStream = s;
	cfg.attrs = attr;
	cfg.numAttrs = 1;
	return cuLaunchKernelEx(&cfg, f, params, 0);
}
*/
import "C"

// minDependentDriver is the first driver version (cuDriverGetVersion) whose
// stream capture keeps a programmatic dependent launch as one (CUDA 12.3);
// compute capability 9.0 is the first with the feature.
const minDependentDriver = 12030

// DependentLaunch reports whether LaunchParamsDependent overlaps a kernel
// with the one before it on this context's device; where it does not, it
// is an ordinary launch.
func (c *Context) DependentLaunch() bool {
	return c != nil && c.info.DriverVersion >= minDependentDriver && c.info.Major >= 9
}

// LaunchParamsDependent is LaunchParams for a kernel that may begin while
// the kernel before it on s is still finishing (programmatic dependent
// launch, cuLaunchKernelEx): its CTAs can be placed, and run what does not
// depend on that kernel, once every CTA of that kernel has executed
// griddepcontrol.launch_dependents or exited. The kernel must execute
// griddepcontrol.wait before it reads anything that kernel writes, and
// before it writes anything that kernel reads. Where DependentLaunch is
// false it is LaunchParams.
func (c *Context) LaunchParamsDependent(f *Function, grid, block Dim3, sharedBytes int, s *Stream, p *KernelParams) error {
	if !c.DependentLaunch() {
		return c.LaunchParams(f, grid, block, sharedBytes, s, p)
	}
	st, err := c.launchTarget("LaunchParamsDependent", f, grid, block, sharedBytes, s)
	if err != nil {
		return err
	}
	list, err := p.kernelParams()
	if err != nil {
		return err
	}
	return c.do(func() error {
		return check("cuLaunchKernelEx", C.gdn_launch_dependent(f.raw,
			C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z),
			C.uint(block.X), C.uint(block.Y), C.uint(block.Z),
			C.uint(sharedBytes), rawStream(st), list))
	})
}
