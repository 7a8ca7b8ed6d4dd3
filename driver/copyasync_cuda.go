//go:build cuda

package driver

import (
	"fmt"
	"unsafe"

	cu "gorgonia.org/cu"
)

// CopyToDeviceAsync copies bytes from host memory src to dst, queued on s
// (nil: the legacy default stream) (cuMemcpyHtoDAsync). From page-locked
// memory (a HostBuffer) it returns at once and the copy runs in stream
// order: src must stay valid and unchanged until s has reached it
// (synchronize s, or an Event recorded after it). From pageable memory the
// driver reads src before it returns. src must point to memory without Go
// pointers (numeric data). bytes == 0 does nothing. A stream that is
// capturing a graph is refused (notCapturing).
func (c *Context) CopyToDeviceAsync(dst DevicePtr, src unsafe.Pointer, bytes int, s *Stream) error {
	if err := checkCopy("CopyToDeviceAsync", src, dst, bytes); err != nil {
		return err
	}
	st, err := c.streamOf(s)
	if err != nil || bytes == 0 {
		return err
	}
	if err := notCapturing("CopyToDeviceAsync", s); err != nil {
		return err
	}
	return c.do(func() error {
		return cuErr("cuMemcpyHtoDAsync", cu.MemcpyHtoDAsync(cu.DevicePtr(dst), src, int64(bytes), st))
	})
}

// CopyToHostAsync copies bytes from src to host memory dst, queued on s
// (nil: the legacy default stream) (cuMemcpyDtoHAsync). Into page-locked
// memory (a HostBuffer) it returns at once: dst holds the data once s has
// reached the copy (synchronize s, or an Event recorded after it), and
// must stay valid until then. Into pageable memory it returns when the
// copy is done. bytes == 0 does nothing. A stream that is capturing a
// graph is refused (notCapturing).
func (c *Context) CopyToHostAsync(dst unsafe.Pointer, src DevicePtr, bytes int, s *Stream) error {
	if err := checkCopy("CopyToHostAsync", dst, src, bytes); err != nil {
		return err
	}
	st, err := c.streamOf(s)
	if err != nil || bytes == 0 {
		return err
	}
	if err := notCapturing("CopyToHostAsync", s); err != nil {
		return err
	}
	return c.do(func() error {
		return cuErr("cuMemcpyDtoHAsync", cu.MemcpyDtoHAsync(dst, cu.DevicePtr(src), int64(bytes), st))
	})
}

// notCapturing refuses a stream that is capturing a graph (nil, the legacy
// stream, cannot be): a captured copy keeps its host address in the graph,
// and every replay reads or writes it again, long after a Go buffer there
// may have been freed and reused.
func notCapturing(op string, s *Stream) error {
	if s == nil {
		return nil
	}
	capturing, err := s.IsCapturing()
	if err != nil {
		return err
	}
	if capturing {
		return fmt.Errorf("driver: %s: the stream is capturing a graph, which would keep the host address for every replay: copy before or after the capture", op)
	}
	return nil
}
