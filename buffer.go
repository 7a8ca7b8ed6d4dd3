package gdn

import (
	"errors"
	"sync"
	"unsafe"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/gdnerr"
)

// Buffer is device memory a Runtime allocated for its caller (Alloc): for
// Go programs that keep their tensors on the GPU without another library,
// as a serving loop keeps its state pool. A serving stack with its own
// allocator (PyTorch's, say) passes its own pointers in Tensor instead.
// Its methods are safe from many goroutines. Free each Buffer before the
// Runtime's Close: after it, a Buffer's methods return ErrClosed.
type Buffer struct {
	rt    *Runtime
	mu    sync.Mutex
	ptr   driver.DevicePtr
	bytes int
}

// Alloc allocates bytes of device memory (uninitialised).
func (rt *Runtime) Alloc(bytes int) (*Buffer, error) {
	if bytes < 1 {
		return nil, gdnerr.Argf("bytes", "%d, want at least 1", bytes)
	}
	if err := rt.guard.Enter(); err != nil {
		return nil, err
	}
	defer rt.guard.Leave()
	p, err := rt.ctx.Alloc(bytes)
	if err != nil {
		return nil, err
	}
	return &Buffer{rt: rt, ptr: p, bytes: bytes}, nil
}

// Ptr is the buffer's device address (0 once freed).
func (b *Buffer) Ptr() uintptr {
	b.mu.Lock()
	defer b.mu.Unlock()
	return uintptr(b.ptr)
}

// Bytes is the buffer's size.
func (b *Buffer) Bytes() int { return b.bytes }

// Tensor describes the buffer as a tensor of dtype dt and the shape given
// (the calls check that the shape fits in the buffer).
func (b *Buffer) Tensor(dt Dtype, shape ...int) Tensor {
	return Tensor{Ptr: b.Ptr(), Bytes: b.bytes, Dtype: dt, Shape: shape}
}

// errFreed is the error of a use after Free.
var errFreed = errors.New("gdn: the buffer was freed")

// region checks [off, off+n) against the buffer, under its lock.
func (b *Buffer) region(off, n int) error {
	if b.ptr == 0 {
		return errFreed
	}
	if off < 0 || n < 0 || off > b.bytes-n {
		return gdnerr.Argf("off", "bytes [%d, %d) are outside the buffer of %d bytes", off, off+n, b.bytes)
	}
	return nil
}

// Write copies src to the buffer at byte offset off and returns once the
// data is on the device (it waits for work the device is doing).
func (b *Buffer) Write(off int, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return b.copy(off, len(src), func(p driver.DevicePtr) error {
		return b.rt.ctx.CopyToDevice(p, unsafe.Pointer(&src[0]), len(src))
	})
}

// Read copies bytes of the buffer from byte offset off into dst, after
// the device's work so far.
func (b *Buffer) Read(off int, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	return b.copy(off, len(dst), func(p driver.DevicePtr) error {
		return b.rt.ctx.CopyToHost(unsafe.Pointer(&dst[0]), p, len(dst))
	})
}

func (b *Buffer) copy(off, n int, f func(driver.DevicePtr) error) error {
	if err := b.rt.guard.Enter(); err != nil {
		return err
	}
	defer b.rt.guard.Leave()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.region(off, n); err != nil {
		return err
	}
	return f(b.ptr.Offset(off))
}

// Free releases the buffer; a second Free does nothing. After the
// Runtime's Close it returns ErrClosed.
func (b *Buffer) Free() error {
	if err := b.rt.guard.Enter(); err != nil {
		return err
	}
	defer b.rt.guard.Leave()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ptr == 0 {
		return nil
	}
	err := b.rt.ctx.Free(b.ptr)
	b.ptr = 0
	return err
}
