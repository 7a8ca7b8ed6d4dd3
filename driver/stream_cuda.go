//go:build cuda

package driver

/*
#include <stdint.h>
#include <cuda.h>

*/
import "C"

import (
	"errors"
	"sync/atomic"
	"unsafe"

	cu "gorgonia.org/cu"
)

var (
	errNilStream       = errors.New("driver: nil *Stream")
	errDestroyedStream = errors.New("driver: Stream is destroyed")
	errOtherContext    = errors.New("driver: Stream belongs to another context")
	errNilEvent        = errors.New("driver: nil *Event")
	errDestroyedEvent  = errors.New("driver: Event is destroyed")
)

// Stream is a CUDA stream of a Context, safe for concurrent use. Where a
// method takes a *Stream, nil means the legacy default stream.
type Stream struct {
	ctx       *Context
	cs        cu.Stream
	owned     bool
	destroyed atomic.Bool
	refused   uintptr // a handle WrapStream refused (streamHandle): every use returns its error
}

// NewStream creates a non-blocking stream (CU_STREAM_NON_BLOCKING: it does
// not synchronize with the legacy default stream). Destroy it when done.
func (c *Context) NewStream() (*Stream, error) {
	s := &Stream{ctx: c, owned: true}
	err := c.do(func() error {
		var err error
		s.cs, err = cu.MakeStream(cu.NonBlocking)
		return cuErr("cuStreamCreate", err)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// WrapStream wraps a CUstream the caller owns (handle 0 or
// CU_STREAM_LEGACY: the legacy default stream) so it can be passed to this
// package; Destroy on it does nothing. CU_STREAM_PER_THREAD and other
// values below 4096 are refused: every use of the returned Stream returns
// an error naming the handle.
func (c *Context) WrapStream(handle uintptr) *Stream {
	h, refused := streamHandle(handle)
	if refused {
		return &Stream{ctx: c, refused: handle}
	}
	// The handle's bits as gorgonia's Stream (one CUstream field: cgo_cuda.go
	// checks the size); no cgo call, so that this stays inlined.
	return &Stream{ctx: c, cs: *(*cu.Stream)(unsafe.Pointer(&h))}
}

// Handle returns the raw CUstream (0 for the default stream or a nil s).
func (s *Stream) Handle() uintptr {
	if s == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(rawStream(s.cs)))
}

func (s *Stream) usable() error {
	if s == nil {
		return errNilStream
	}
	if s.refused != 0 {
		return streamHandleError(s.refused)
	}
	if s.destroyed.Load() {
		return errDestroyedStream
	}
	if s.ctx == nil {
		return errNilContext
	}
	return nil
}

// streamOf returns the gorgonia stream for s (nil: default stream) after
// checking that s is usable with c.
func (c *Context) streamOf(s *Stream) (cu.Stream, error) {
	if c == nil {
		return cu.Stream{}, errNilContext
	}
	if s == nil {
		return cu.Stream{}, nil
	}
	if err := s.usable(); err != nil {
		return cu.Stream{}, err
	}
	if s.ctx.raw != c.raw {
		return cu.Stream{}, errOtherContext
	}
	return s.cs, nil
}

// Synchronize waits for all work queued on s (cuStreamSynchronize).
func (s *Stream) Synchronize() error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.ctx.do(func() error { return cuErr("cuStreamSynchronize", s.cs.Synchronize()) })
}

// Destroy destroys a stream from NewStream (cuStreamDestroy; queued work
// still completes). It does nothing for a wrapped stream or a second time.
func (s *Stream) Destroy() error {
	if s == nil {
		return errNilStream
	}
	if !s.owned || s.destroyed.Swap(true) {
		return nil
	}
	cs := s.cs
	return s.ctx.do(func() error { return cuErr("cuStreamDestroy", cs.Destroy()) })
}

// Event is a CUDA event with timing enabled, safe for concurrent use.
type Event struct {
	ctx       *Context
	ev        cu.Event
	destroyed atomic.Bool
}

// NewEvent creates an event (cuEventCreate, default flags: timing enabled).
func (c *Context) NewEvent() (*Event, error) {
	e := &Event{ctx: c}
	err := c.do(func() error {
		var err error
		e.ev, err = cu.MakeEvent(cu.DefaultEvent)
		return cuErr("cuEventCreate", err)
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Event) usable() error {
	if e == nil {
		return errNilEvent
	}
	if e.destroyed.Load() {
		return errDestroyedEvent
	}
	return nil
}

// Record records e on s (nil: the legacy default stream) (cuEventRecord).
func (e *Event) Record(s *Stream) error {
	if err := e.usable(); err != nil {
		return err
	}
	st, err := e.ctx.streamOf(s)
	if err != nil {
		return err
	}
	return e.ctx.do(func() error { return cuErr("cuEventRecord", e.ev.Record(st)) })
}

// Synchronize waits until the work captured by the last Record is done
// (cuEventSynchronize).
func (e *Event) Synchronize() error {
	if err := e.usable(); err != nil {
		return err
	}
	return e.ctx.do(func() error { return cuErr("cuEventSynchronize", e.ev.Synchronize()) })
}

// Destroy destroys the event (cuEventDestroy); a second call does nothing.
func (e *Event) Destroy() error {
	if e == nil {
		return errNilEvent
	}
	if e.destroyed.Swap(true) {
		return nil
	}
	return e.ctx.do(func() error { return cuErr("cuEventDestroy", cu.DestroyEvent(&e.ev)) })
}

// ElapsedMs returns the time in milliseconds between two recorded events
// (cuEventElapsedTime); both must have completed.
func ElapsedMs(start, end *Event) (float32, error) {
	if err := start.usable(); err != nil {
		return 0, err
	}
	if err := end.usable(); err != nil {
		return 0, err
	}
	var ms float64
	err := start.ctx.do(func() error {
		var err error
		ms, err = start.ev.Elapsed(end.ev)
		return cuErr("cuEventElapsedTime", err)
	})
	return float32(ms), err
}
