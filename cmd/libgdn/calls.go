package main

import (
	"unsafe"

	"github.com/gdnjit/gdn"
)

// The bodies of the exported functions, in plain Go (exports.go only casts
// the C pointers), so that tests call them without cgo.

// openRuntime is gdn_open.
func openRuntime(c *cOptions) (uint64, int32) {
	rt, err := gdn.Open(options(c))
	if err != nil {
		return 0, fail(nil, err)
	}
	return register(rt), statusOK
}

// closeRuntime is gdn_close.
func closeRuntime(h uint64) int32 {
	e := unregister(h)
	if e == nil {
		return fail(nil, errUnknown(h))
	}
	if err := e.rt.Close(); err != nil {
		return fail(nil, err)
	}
	return statusOK
}

// run looks handle h up, converts the arguments and makes the call,
// recording a failure with the runtime.
func run[C, A any](h uint64, c *C, convert func(*C) (*A, error), call func(*gdn.Runtime, *A) error) int32 {
	e := lookup(h)
	if e == nil {
		return fail(nil, errUnknown(h))
	}
	if c == nil {
		return fail(e, &gdn.ArgError{Arg: "args", Msg: "NULL"})
	}
	a, err := convert(c)
	if err == nil {
		err = call(e.rt, a)
	}
	if err != nil {
		return fail(e, err)
	}
	return statusOK
}

// forward is gdn_forward.
func forward(h uint64, c *cCoreArgs, s uintptr) int32 {
	return run(h, c, coreArgs, func(rt *gdn.Runtime, a *gdn.CoreArgs) error { return rt.Forward(a, gdn.Stream(s)) })
}

// forwardFull is gdn_forward_full.
func forwardFull(h uint64, c *cFullArgs, s uintptr) int32 {
	return run(h, c, fullArgs, func(rt *gdn.Runtime, a *gdn.FullArgs) error { return rt.ForwardFull(a, gdn.Stream(s)) })
}

// decode is gdn_decode.
func decode(h uint64, c *cDecodeArgs, s uintptr) int32 {
	return run(h, c, decodeArgs, func(rt *gdn.Runtime, a *gdn.DecodeArgs) error { return rt.Decode(a, gdn.Stream(s)) })
}

// forwardMixed is gdn_forward_mixed.
func forwardMixed(h uint64, c *cFullArgs, s uintptr) int32 {
	return run(h, c, fullArgs, func(rt *gdn.Runtime, a *gdn.FullArgs) error { return rt.ForwardMixed(a, gdn.Stream(s)) })
}

// structSize is gdn_struct_size: the mirrors' sizes, which the test holds
// equal to the header's.
func structSize(which int32) int64 {
	switch which {
	case 0:
		return int64(unsafe.Sizeof(cTensor{}))
	case 1:
		return int64(unsafe.Sizeof(cOptions{}))
	case 2:
		return int64(unsafe.Sizeof(cPool{}))
	case 3:
		return int64(unsafe.Sizeof(cSeqs{}))
	case 4:
		return int64(unsafe.Sizeof(cCoreArgs{}))
	case 5:
		return int64(unsafe.Sizeof(cFullArgs{}))
	case 6:
		return int64(unsafe.Sizeof(cDecodeArgs{}))
	}
	return 0
}

// copyMessage writes msg into buf (len n), cut and NUL-terminated, and
// returns msg's length.
func copyMessage(msg string, buf unsafe.Pointer, n int64) int64 {
	if buf != nil && n > 0 {
		dst := unsafe.Slice((*byte)(buf), n)
		k := copy(dst[:n-1], msg)
		dst[k] = 0
	}
	return int64(len(msg))
}

// errNilOut is gdn_open's error for a NULL out pointer.
var errNilOut error = &gdn.ArgError{Arg: "out", Msg: "NULL: gdn_open needs somewhere to store the handle"}
