//go:build cuda

package driver

// This file holds the cgo flags of the package and turns CUresults (from
// our own calls and from gorgonia.org/cu's) into *Error values.

/*
#cgo LDFLAGS: -lcuda
#cgo linux CFLAGS: -I/usr/local/cuda/include
#cgo linux LDFLAGS: -L/usr/local/cuda/lib64 -L/usr/local/cuda/lib64/stubs
#include <cuda.h>

static const char* gdn_error_name(CUresult r) {
	const char* s = 0;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS) return 0;
	return s;
}

static const char* gdn_error_string(CUresult r) {
	const char* s = 0;
	if (cuGetErrorString(r, &s) != CUDA_SUCCESS) return 0;
	return s;
}
*/
import "C"

import (
	"reflect"
	"unsafe"

	cu "gorgonia.org/cu"
)

// check returns nil for CUDA_SUCCESS, else a *Error naming call.
func check(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return newError(call, int(r))
}

// newError builds the *Error of a failed call from its CUresult code.
func newError(call string, code int) *Error {
	e := &Error{Call: call, Code: code}
	if s := C.gdn_error_name(C.CUresult(code)); s != nil {
		e.Name = C.GoString(s)
	}
	if s := C.gdn_error_string(C.CUresult(code)); s != nil {
		e.Message = C.GoString(s)
	} else {
		e.Message = "unrecognized CUDA error code"
	}
	return e
}

// cuErr converts an error of gorgonia.org/cu (its unexported cuResult, an
// int) into a *Error naming call.
func cuErr(call string, err error) error {
	if err == nil {
		return nil
	}
	if v := reflect.ValueOf(err); v.Kind() == reflect.Int {
		return newError(call, int(v.Int()))
	}
	return &Error{Call: call, Code: -1, Message: err.Error()}
}

// gorgonia's Stream is a struct holding one CUstream: these two constants
// fail to compile should its size ever differ from a pointer's.
const (
	_ = uintptr(unsafe.Sizeof(cu.Stream{}) - unsafe.Sizeof(uintptr(0)))
	_ = uintptr(unsafe.Sizeof(uintptr(0)) - unsafe.Sizeof(cu.Stream{}))
)

// rawStream returns the CUstream of a gorgonia Stream.
func rawStream(s cu.Stream) C.CUstream { return C.CUstream(unsafe.Pointer(s.C())) }
