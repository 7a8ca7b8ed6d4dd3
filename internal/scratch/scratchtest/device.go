// Package scratchtest is a fake scratch.Device for the CPU tests of the
// packages that prepare calls: allocations are addresses counted up,
// uploads and zeroings land in maps, frees and synchronisations are
// counted.
package scratchtest

import (
	"slices"
	"sync"
	"unsafe"

	"github.com/gdnjit/gdn/driver"
)

// Device is the fake; the zero value is not ready: use New. Its fields
// may be read once the code under test has returned.
type Device struct {
	mu      sync.Mutex
	next    driver.DevicePtr
	Live    map[driver.DevicePtr]int    // allocations not freed, with their sizes
	Uploads map[driver.DevicePtr][]byte // the bytes last uploaded to each address
	Zeroed  map[driver.DevicePtr]int    // the bytes last zeroed at each address
	Freed   int                         // frees so far
	Syncs   int                         // synchronisations so far
	SyncErr error                       // what SynchronizeOrWait returns
	// Capacity, when positive, is the device's memory: an Alloc that would
	// take the live bytes past it fails with CUDA_ERROR_OUT_OF_MEMORY.
	Capacity int
}

// New returns a fake device with nothing allocated.
func New() *Device {
	return &Device{next: 1 << 44, Live: map[driver.DevicePtr]int{}, Uploads: map[driver.DevicePtr][]byte{},
		Zeroed: map[driver.DevicePtr]int{}}
}

// RelaxedCapture runs fn.
func (f *Device) RelaxedCapture(fn func() error) error { return fn() }

// Alloc returns the next free address, 4 KiB aligned, or the driver's
// out-of-memory error past Capacity.
func (f *Device) Alloc(bytes int) (driver.DevicePtr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Capacity > 0 {
		live := bytes
		for _, n := range f.Live {
			live += n
		}
		if live > f.Capacity {
			return 0, &driver.Error{Call: "cuMemAlloc", Code: driver.CodeOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY", Message: "out of memory"}
		}
	}
	p := f.next
	f.next += driver.DevicePtr(bytes+4095) &^ 4095
	f.Live[p] = bytes
	return p, nil
}

// Upload records a copy of the bytes under dst.
func (f *Device) Upload(dst driver.DevicePtr, src unsafe.Pointer, bytes int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Uploads[dst] = slices.Clone(unsafe.Slice((*byte)(src), bytes))
	return nil
}

// Zero records the bytes zeroed at dst.
func (f *Device) Zero(dst driver.DevicePtr, bytes int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Zeroed[dst] = bytes
	return nil
}

// Free forgets an allocation and counts the free.
func (f *Device) Free(p driver.DevicePtr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.Live, p)
	f.Freed++
	return nil
}

// SynchronizeOrWait counts the synchronisation and returns SyncErr.
func (f *Device) SynchronizeOrWait() error {
	f.mu.Lock()
	f.Syncs++
	f.mu.Unlock()
	return f.SyncErr
}
