//go:build cuda

package driver

/*
#include <cuda.h>

static CUresult gdn_mem_host_alloc(void** p, size_t bytes) { return cuMemHostAlloc(p, bytes, 0); }
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// AllocHost allocates bytes of page-locked host memory (cuMemHostAlloc);
// bytes must be > 0. Pinned memory is a scarce system resource: keep a few
// buffers and reuse them rather than allocating per call.
func (c *Context) AllocHost(bytes int) (*HostBuffer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("driver: AllocHost: size %d must be > 0", bytes)
	}
	var p unsafe.Pointer
	err := c.do(func() error {
		return check("cuMemHostAlloc", C.gdn_mem_host_alloc(&p, C.size_t(bytes)))
	})
	if err != nil {
		return nil, err
	}
	return &HostBuffer{ptr: p, size: bytes, ctx: c}, nil
}

// Free releases the buffer (cuMemFreeHost). A second Free, or Free of a
// nil buffer, does nothing.
func (h *HostBuffer) Free() error {
	if h == nil || h.ptr == nil || h.freed.Swap(true) {
		return nil
	}
	p := h.ptr
	return h.ctx.do(func() error { return check("cuMemFreeHost", C.cuMemFreeHost(p)) })
}
