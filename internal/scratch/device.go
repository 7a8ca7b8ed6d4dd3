package scratch

import (
	"unsafe"

	"github.com/gdnjit/gdn/driver"
)

// Device is what scratch memory needs of the GPU: allocations and frees in
// relaxed capture mode (another goroutine may be capturing a graph), an
// upload that waits for its bytes, and the context synchronisation after
// which memory a launched graph read may be freed. ContextDevice
// implements it on a driver.Context; the CPU tests use a fake.
type Device interface {
	RelaxedCapture(f func() error) error
	Alloc(bytes int) (driver.DevicePtr, error)
	// Upload copies host bytes to the device and waits for them.
	Upload(dst driver.DevicePtr, src unsafe.Pointer, bytes int) error
	// Zero sets device bytes to zero and waits for them.
	Zero(dst driver.DevicePtr, bytes int) error
	Free(p driver.DevicePtr) error
	SynchronizeOrWait() error
}

// ContextDevice is Device on a driver.Context.
type ContextDevice struct{ *driver.Context }

// Upload copies on a stream of its own (ownStream).
func (c ContextDevice) Upload(dst driver.DevicePtr, src unsafe.Pointer, bytes int) error {
	return c.ownStream(func(s *driver.Stream) error { return c.CopyToDeviceAsync(dst, src, bytes, s) })
}

// Zero clears on a stream of its own (ownStream).
func (c ContextDevice) Zero(dst driver.DevicePtr, bytes int) error {
	return c.ownStream(func(s *driver.Stream) error { return c.MemsetD8(dst, 0, bytes, s) })
}

// ownStream issues f's work on a new stream and waits for it. That stream
// syncs with nothing else: a copy or memset on the legacy stream would
// break a capture on any blocking stream of the caller's.
func (c ContextDevice) ownStream(f func(s *driver.Stream) error) error {
	s, err := c.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	if err := f(s); err != nil {
		return err
	}
	return s.Synchronize()
}
