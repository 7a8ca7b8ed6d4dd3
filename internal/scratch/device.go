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

// Upload copies on a stream of its own, which syncs with nothing else: a
// copy on the legacy stream would break a capture on any blocking stream of
// the caller's.
func (c ContextDevice) Upload(dst driver.DevicePtr, src unsafe.Pointer, bytes int) error {
	s, err := c.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	if err := c.CopyToDeviceAsync(dst, src, bytes, s); err != nil {
		return err
	}
	return s.Synchronize()
}

// Zero clears on a stream of its own, as Upload copies, and for the same
// reason.
func (c ContextDevice) Zero(dst driver.DevicePtr, bytes int) error {
	s, err := c.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	if err := c.MemsetD8(dst, 0, bytes, s); err != nil {
		return err
	}
	return s.Synchronize()
}
