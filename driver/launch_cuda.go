//go:build cuda

package driver

/*
#include <stdlib.h>
#include <cuda.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	cu "gorgonia.org/cu"
)

func checkLaunchShape(op string, grid, block Dim3, sharedBytes int) error {
	if grid.X == 0 || grid.Y == 0 || grid.Z == 0 {
		return fmt.Errorf("driver: %s: grid %v has a zero dimension", op, grid)
	}
	if block.X == 0 || block.Y == 0 || block.Z == 0 {
		return fmt.Errorf("driver: %s: block %v has a zero dimension", op, block)
	}
	if sharedBytes < 0 || sharedBytes > 1<<31-1 {
		return fmt.Errorf("driver: %s: dynamic shared memory %d bytes out of range", op, sharedBytes)
	}
	return nil
}

// Launch launches f on s (nil: the legacy default stream) with sharedBytes
// of dynamic shared memory (cuLaunchKernel); args may be nil for a kernel
// without parameters. Above 48 KB of dynamic shared memory, call
// f.SetMaxDynamicShared first; a request the device or the function does not
// allow comes back as a *Error from cuLaunchKernel. Launch does not wait for
// the kernel; errors of the kernel itself surface at the next
// synchronization. It can be captured into a graph (Stream.BeginCapture).
func (c *Context) Launch(f *Function, grid, block Dim3, sharedBytes int, s *Stream, args *Args) error {
	st, err := c.launchTarget("Launch", f, grid, block, sharedBytes, s)
	if err != nil {
		return err
	}
	mem, params, err := cParams(args)
	if err != nil {
		return err
	}
	defer cFree(mem)
	return c.launch(f, grid, block, sharedBytes, st, params)
}

// launch is cuLaunchKernel on checked arguments; params is a kernelParams
// array in C memory (nil: no arguments).
func (c *Context) launch(f *Function, grid, block Dim3, sharedBytes int, st cu.Stream, params *unsafe.Pointer) error {
	return c.do(func() error {
		return check("cuLaunchKernel", C.cuLaunchKernel(f.raw,
			C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z),
			C.uint(block.X), C.uint(block.Y), C.uint(block.Z),
			C.uint(sharedBytes), rawStream(st), params, nil))
	})
}

// launchTarget checks what every launch checks (a usable function of this
// context, a usable stream of it, the launch shape) and returns the stream.
// It allocates nothing unless it fails.
func (c *Context) launchTarget(op string, f *Function, grid, block Dim3, sharedBytes int, s *Stream) (cu.Stream, error) {
	if err := f.usable(); err != nil {
		return cu.Stream{}, err
	}
	st, err := c.streamOf(s)
	if err != nil {
		return cu.Stream{}, err
	}
	if f.mod.ctx.raw != c.raw {
		return cu.Stream{}, fmt.Errorf("driver: %s: Function belongs to another context", op)
	}
	if err := checkLaunchShape(op, grid, block, sharedBytes); err != nil {
		return cu.Stream{}, err
	}
	return st, nil
}
