//go:build cuda

package driver

import (
	"errors"
	"sync/atomic"
	"unsafe"
)

var errFreedParams = errors.New("driver: KernelParams is freed")

// KernelParams is an argument list packed once into C memory, in the
// layout cuLaunchKernel takes, for a kernel launched many times with the
// same arguments: LaunchParams hands it to the driver as it is, so a launch
// copies nothing and allocates nothing (Launch with an Args packs a fresh C
// copy every time). It is safe for concurrent launches. Free it once no
// launch will use it: the driver reads the values during the launch call
// (or the capture of that call into a graph), not afterwards, so freeing
// after LaunchParams has returned is safe; freeing during one is not.
type KernelParams struct {
	mem   unsafe.Pointer  // the C allocation (nil for an empty list)
	list  *unsafe.Pointer // the kernelParams array inside mem
	n     int
	freed atomic.Bool
}

// NewKernelParams packs a's current values into C memory; later changes to
// a do not reach it. An error recorded by a's adders is returned.
func NewKernelParams(a *Args) (*KernelParams, error) {
	mem, list, err := cParams(a)
	if err != nil {
		return nil, err
	}
	return &KernelParams{mem: mem, list: list, n: a.Len()}, nil
}

// Len returns the number of arguments.
func (p *KernelParams) Len() int {
	if p == nil {
		return 0
	}
	return p.n
}

// Free releases the C memory; a second call does nothing.
func (p *KernelParams) Free() {
	if p == nil || p.freed.Swap(true) {
		return
	}
	cFree(p.mem)
}

// LaunchParams is Launch with arguments packed by NewKernelParams (nil: a
// kernel without parameters). With a usable f and s it allocates nothing.
func (c *Context) LaunchParams(f *Function, grid, block Dim3, sharedBytes int, s *Stream, p *KernelParams) error {
	st, err := c.launchTarget("LaunchParams", f, grid, block, sharedBytes, s)
	if err != nil {
		return err
	}
	list, err := p.kernelParams()
	if err != nil {
		return err
	}
	return c.launch(f, grid, block, sharedBytes, st, list)
}

// kernelParams is the kernelParams array of p for the driver (nil for a nil
// p: a kernel without parameters), or errFreedParams.
func (p *KernelParams) kernelParams() (*unsafe.Pointer, error) {
	if p == nil {
		return nil, nil
	}
	if p.freed.Load() {
		return nil, errFreedParams
	}
	return p.list, nil
}
