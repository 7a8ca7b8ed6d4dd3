//go:build !cuda

package driver

// AllocHost returns ErrNoCUDA: page-locked memory needs the CUDA driver.
func (c *Context) AllocHost(bytes int) (*HostBuffer, error) { return nil, ErrNoCUDA }

// Free does nothing: without the cuda tag no buffer can be allocated.
func (h *HostBuffer) Free() error { return nil }
