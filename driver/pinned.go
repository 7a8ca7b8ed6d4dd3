package driver

import (
	"sync/atomic"
	"unsafe"
)

// HostBuffer is page-locked (pinned) host memory from Context.AllocHost.
// Copies between it and the device run at full PCIe speed: the driver
// neither stages them through a bounce buffer of its own nor pins pages
// per call, as it must for ordinary (pageable) Go memory. It is C memory,
// outside the Go heap, so it may be handed to the driver freely; Free
// releases it (once, however many goroutines call it).
type HostBuffer struct {
	ptr   unsafe.Pointer // set at allocation, never changed
	size  int
	ctx   *Context
	freed atomic.Bool
}

// Len returns the size of the buffer in bytes, 0 once freed.
func (h *HostBuffer) Len() int {
	if h == nil || h.freed.Load() {
		return 0
	}
	return h.size
}

// Pointer returns the buffer's start address, nil for a freed buffer.
func (h *HostBuffer) Pointer() unsafe.Pointer {
	if h == nil || h.freed.Load() {
		return nil
	}
	return h.ptr
}

// Bytes returns the buffer as a byte slice, valid until Free.
func (h *HostBuffer) Bytes() []byte {
	if h == nil || h.ptr == nil || h.freed.Load() {
		return nil
	}
	return unsafe.Slice((*byte)(h.ptr), h.size)
}
