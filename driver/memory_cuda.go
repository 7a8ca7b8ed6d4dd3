//go:build cuda

package driver

import (
	"errors"
	"fmt"
	"unsafe"

	cu "gorgonia.org/cu"
)

// Alloc allocates bytes of device memory (cuMemAlloc); bytes must be > 0.
func (c *Context) Alloc(bytes int) (DevicePtr, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("driver: Alloc: size %d must be > 0", bytes)
	}
	var p DevicePtr
	err := c.do(func() error {
		d, err := cu.MemAlloc(int64(bytes))
		p = DevicePtr(d)
		return cuErr("cuMemAlloc", err)
	})
	return p, err
}

// Free frees device memory from Alloc (cuMemFree). Free(0) does nothing.
func (c *Context) Free(p DevicePtr) error {
	if p == 0 {
		if c == nil {
			return errNilContext
		}
		return nil
	}
	return c.do(func() error { return cuErr("cuMemFree", cu.MemFree(cu.DevicePtr(p))) })
}

func checkCopy(op string, host unsafe.Pointer, dev DevicePtr, bytes int) error {
	if bytes < 0 {
		return fmt.Errorf("driver: %s: negative size %d", op, bytes)
	}
	if bytes > 0 && (host == nil || dev == 0) {
		return fmt.Errorf("driver: %s: nil address for %d bytes", op, bytes)
	}
	return nil
}

// CopyToDevice copies bytes from host memory src to dst (cuMemcpyHtoD) and
// returns when the data is on the device, so that work on any stream
// queued after it reads it. src must point to memory without Go pointers
// (numeric data). The copy is ordered after the legacy default stream
// only: synchronize a non-blocking Stream whose work it depends on first.
// bytes == 0 does nothing.
func (c *Context) CopyToDevice(dst DevicePtr, src unsafe.Pointer, bytes int) error {
	if err := checkCopy("CopyToDevice", src, dst, bytes); err != nil || bytes == 0 {
		if c == nil {
			return errNilContext
		}
		return err
	}
	return c.do(func() error {
		if err := cuErr("cuMemcpyHtoD", cu.MemcpyHtoD(cu.DevicePtr(dst), src, int64(bytes))); err != nil {
			return err
		}
		// From pageable memory cuMemcpyHtoD returns once src is staged,
		// before the DMA to dst completes, and only the legacy default
		// stream is ordered after that DMA: a kernel on a non-blocking
		// stream could read dst before it lands (seen: the concurrent test's
		// launches read stale or earlier workers' data while the GPU was
		// shared). Waiting for the legacy stream waits for the DMA. (Not the
		// whole context: a context-wide synchronisation fails while another
		// stream of it captures a graph.)
		return cuErr("cuStreamSynchronize", cu.NoStream.Synchronize())
	})
}

// CopyToHost copies bytes from src to host memory dst (cuMemcpyDtoH) and
// returns when the copy is done; the same rules as CopyToDevice apply
// (synchronize a non-blocking Stream that writes src first).
func (c *Context) CopyToHost(dst unsafe.Pointer, src DevicePtr, bytes int) error {
	if err := checkCopy("CopyToHost", dst, src, bytes); err != nil || bytes == 0 {
		if c == nil {
			return errNilContext
		}
		return err
	}
	return c.do(func() error {
		return cuErr("cuMemcpyDtoH", cu.MemcpyDtoH(dst, cu.DevicePtr(src), int64(bytes)))
	})
}

// CopyDeviceAsync copies bytes between device buffers, asynchronously on s
// (nil: the legacy default stream) (cuMemcpyDtoDAsync).
func (c *Context) CopyDeviceAsync(dst, src DevicePtr, bytes int, s *Stream) error {
	if bytes < 0 {
		return fmt.Errorf("driver: CopyDeviceAsync: negative size %d", bytes)
	}
	if bytes > 0 && (dst == 0 || src == 0) {
		return errors.New("driver: CopyDeviceAsync: nil device address")
	}
	st, err := c.streamOf(s)
	if err != nil || bytes == 0 {
		return err
	}
	return c.do(func() error {
		return cuErr("cuMemcpyDtoDAsync", cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), int64(bytes), st))
	})
}

func (c *Context) memsetCheck(op string, p DevicePtr, n int, s *Stream) (cu.Stream, bool, error) {
	if n < 0 {
		return cu.Stream{}, false, fmt.Errorf("driver: %s: negative count %d", op, n)
	}
	if n > 0 && p == 0 {
		return cu.Stream{}, false, fmt.Errorf("driver: %s: nil device address", op)
	}
	st, err := c.streamOf(s)
	return st, err == nil && n > 0, err
}

// MemsetD8 sets n bytes at p to v, asynchronously on s (nil: the legacy
// default stream) (cuMemsetD8Async).
func (c *Context) MemsetD8(p DevicePtr, v uint8, n int, s *Stream) error {
	st, run, err := c.memsetCheck("MemsetD8", p, n, s)
	if !run {
		return err
	}
	return c.do(func() error {
		return cuErr("cuMemsetD8Async", cu.MemsetD8Async(cu.DevicePtr(p), v, int64(n), st))
	})
}

// MemsetD16 sets n 16-bit words at p (2-byte aligned) to v, asynchronously
// on s (nil: the legacy default stream) (cuMemsetD16Async).
func (c *Context) MemsetD16(p DevicePtr, v uint16, n int, s *Stream) error {
	st, run, err := c.memsetCheck("MemsetD16", p, n, s)
	if !run {
		return err
	}
	return c.do(func() error {
		return cuErr("cuMemsetD16Async", cu.MemsetD16Async(cu.DevicePtr(p), v, int64(n), st))
	})
}

// MemsetD32 sets n 32-bit words at p (4-byte aligned) to v, asynchronously
// on s (nil: the legacy default stream) (cuMemsetD32Async).
func (c *Context) MemsetD32(p DevicePtr, v uint32, n int, s *Stream) error {
	st, run, err := c.memsetCheck("MemsetD32", p, n, s)
	if !run {
		return err
	}
	return c.do(func() error {
		return cuErr("cuMemsetD32Async", cu.MemsetD32Async(cu.DevicePtr(p), uint(v), int64(n), st))
	})
}
