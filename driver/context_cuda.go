//go:build cuda

package driver

/*
#include <cuda.h>

// gdn_ctx_entered is what gdn_ctx_enter did: its result, and the context
// that was current before (NULL if none).
typedef struct {
	CUresult r;
	CUcontext prev;
} gdn_ctx_entered;

// gdn_ctx_enter makes want current on this thread. It returns the previous
// context by value rather than through a pointer: a Go pointer passed to C
// escapes, and Context.do would allocate on every call.
static gdn_ctx_entered gdn_ctx_enter(CUcontext want) {
	gdn_ctx_entered e;
	e.prev = NULL;
	e.r = cuCtxGetCurrent(&e.prev);
	if (e.r != CUDA_SUCCESS || e.prev == want) return e;
	e.r = cuCtxSetCurrent(want);
	return e;
}

static CUresult gdn_primary_retain(CUcontext* ctx, int dev) {
	return cuDevicePrimaryCtxRetain(ctx, (CUdevice)dev);
}

static CUresult gdn_primary_release(int dev) {
	return cuDevicePrimaryCtxRelease((CUdevice)dev);
}
*/
import "C"

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	cu "gorgonia.org/cu"
)

var (
	errNilContext    = errors.New("driver: nil *Context")
	errClosedContext = errors.New("driver: Context is closed")
)

// Context is the retained primary context of one device (Open), or a green
// context on a slice of its SMs (OpenGreen). All its methods are safe for
// concurrent use from any goroutine.
type Context struct {
	dev    cu.Device
	raw    C.CUcontext // the primary context, or the green context's converted one
	info   DeviceInfo
	closed atomic.Bool
	once   sync.Once

	// green is the green context (nil for a primary context); mu serialises
	// calls on it (do).
	green C.CUgreenCtx
	mu    sync.Mutex
}

// DeviceCount returns the number of CUDA devices (cuDeviceGetCount).
func DeviceCount() (int, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return 0, cuErr("cuDeviceGetCount", err)
	}
	return n, nil
}

// Open retains the primary context of device ordinal and reads its
// DeviceInfo. The Context is usable from any goroutine; Close releases it.
// Opening the same device twice retains its primary context twice (the
// driver counts references): both Contexts share memory and modules.
func Open(ordinal int) (*Context, error) {
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, cuErr("cuDeviceGet", err)
	}
	c := &Context{dev: dev}
	if err := check("cuDevicePrimaryCtxRetain", C.gdn_primary_retain(&c.raw, C.int(dev))); err != nil {
		return nil, err
	}
	if err := c.readInfo(ordinal); err != nil {
		C.gdn_primary_release(C.int(dev))
		return nil, err
	}
	return c, nil
}

func (c *Context) readInfo(ordinal int) error {
	d := c.dev
	in := DeviceInfo{Ordinal: ordinal, DriverVersion: cu.Version()}
	var err error
	if in.Name, err = d.Name(); err != nil {
		return cuErr("cuDeviceGetName", err)
	}
	total, err := d.TotalMem()
	if err != nil {
		return cuErr("cuDeviceTotalMem", err)
	}
	in.TotalMem = uint64(total)
	attrs := []struct {
		a   cu.DeviceAttribute
		dst *int
	}{
		{cu.ComputeCapabilityMajor, &in.Major},
		{cu.ComputeCapabilityMinor, &in.Minor},
		{cu.MultiprocessorCount, &in.SMs},
		{cu.DeviceAttribute(C.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), &in.MaxSharedPerBlockOptin},
		{cu.MaxSharedMemoryPerMultiprocessor, &in.SharedPerSM},
		{cu.L2CacheSize, &in.L2Bytes},
		{cu.ClockRate, &in.ClockKHz},
	}
	for _, a := range attrs {
		v, err := d.Attribute(a.a)
		if err != nil {
			return cuErr("cuDeviceGetAttribute", err)
		}
		*a.dst = v
	}
	in.DeviceSMs = in.SMs
	c.info = in
	return nil
}

// do runs f with the context current on a locked OS thread. A different
// context that was current on that thread is made current again afterwards.
// do allocates nothing: f does not escape (callers' closures stay on their
// stacks) and no Go pointer reaches C here; keep it that way, the hot path
// of gdn's Forward goes through it (TestDoAllocs in the cuda tests).
//
// A green context: cuGreenCtxCreate's documentation (cuda.h 12.4) says "a
// green context can be current to only one thread at a time. There is no
// internal synchronization to make API calls accessing the same green
// context from multiple threads work." So calls are
// serialised on c.mu, and the context is never left current on the thread
// afterwards (the previous context, or none, is restored), so that it is
// current on at most one thread at any time.
//
// Streams: cuStreamCreate while the converted context is current makes a
// stream of the green context (cuStreamGetGreenCtx: "If during stream
// creation the context that was active in the calling thread was obtained
// with cuCtxFromGreenCtx, that green context is returned"), so NewStream's
// streams run on the slice. The NULL stream and CU_STREAM_LEGACY resolve to
// the context current on the calling thread ("if context that is active in
// the calling thread was obtained with cuCtxFromGreenCtx, that green context
// is returned"), and CU_GREEN_CTX_DEFAULT_STREAM, required at creation in
// 12.4, "creates a default stream to use inside the green context": work
// this package enqueues on stream 0 of a green Context (here, with the
// context current) goes to that stream, on the slice. A stream of another
// context (the primary context's, a caller's own) does not become the
// slice's by being passed here.
func (c *Context) do(f func() error) error {
	if c == nil || c.raw == nil {
		return errNilContext
	}
	if c.green != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	if c.closed.Load() {
		return errClosedContext
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	e := C.gdn_ctx_enter(c.raw)
	if err := check("cuCtxSetCurrent", e.r); err != nil {
		return err
	}
	err := f()
	// A primary context may stay current on the thread (the next call finds
	// it there); a green one never does (see below), so the previous
	// context, or none, comes back.
	if e.prev != c.raw && (e.prev != nil || c.green != nil) {
		C.cuCtxSetCurrent(e.prev)
	}
	return err
}

// Info returns the device description read at Open (zero for a nil Context).
func (c *Context) Info() DeviceInfo {
	if c == nil {
		return DeviceInfo{}
	}
	return c.info
}

// Handle returns the raw CUcontext: the device's primary context, or for a
// green context the CUcontext cuCtxFromGreenCtx gave (a green context may be
// current on one thread at a time only: a caller that makes it current
// itself must not use c meanwhile).
func (c *Context) Handle() uintptr {
	if c == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(c.raw))
}

// Close releases the primary context (cuDevicePrimaryCtxRelease). When the
// last reference goes, the driver destroys the context with all its memory,
// streams and modules. A green context is synchronised and destroyed
// (cuGreenCtxDestroy), which releases the primary context its creation
// retained. Later calls on c return an error; a second Close returns nil.
func (c *Context) Close() error {
	if c == nil {
		return errNilContext
	}
	var err error
	c.once.Do(func() {
		if c.green != nil {
			c.mu.Lock() // calls in flight finish first
			defer c.mu.Unlock()
			c.closed.Store(true)
			err = c.closeGreen()
			return
		}
		c.closed.Store(true)
		err = check("cuDevicePrimaryCtxRelease", C.gdn_primary_release(C.int(c.dev)))
	})
	return err
}

// Synchronize waits for all work in the context (cuCtxSynchronize).
func (c *Context) Synchronize() error {
	return c.do(func() error { return cuErr("cuCtxSynchronize", cu.Synchronize()) })
}

// SynchronizeOrWait is Synchronize for teardown: cuCtxSynchronize fails
// while any stream of the context is capturing a graph (another Runtime on
// the same device may be, for an instant), so it retries for up to a
// second before giving up and returning that error.
func (c *Context) SynchronizeOrWait() error {
	var err error
	for range 1000 {
		err = c.Synchronize()
		var e *Error
		if !errors.As(err, &e) || e.Code != int(C.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	return err
}

// MemInfo returns the free and total device memory in bytes (cuMemGetInfo).
func (c *Context) MemInfo() (free, total uint64, err error) {
	err = c.do(func() error {
		f, t, e := cu.MemInfo()
		free, total = uint64(f), uint64(t)
		return cuErr("cuMemGetInfo", e)
	})
	return free, total, err
}
