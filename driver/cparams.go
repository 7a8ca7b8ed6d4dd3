package driver

// cParams is cgo without the cuda build tag so that the CPU tests can put it
// under internal/staleptr's hammer (it needs only malloc, not the driver).

/*
#include <stdlib.h>
*/
import "C"

import (
	"errors"
	"unsafe"
)

// cParams copies the packed arguments into one C allocation laid out as a
// kernelParams array (void*[n]) followed by the values, 64-byte aligned, and
// returns the allocation (to C.free; nil when there are no arguments) and the
// array in it. The driver copies the values during the call that takes them.
// No closure is returned: Launch frees with a plain defer, which allocates
// nothing.
//
// The array is written as uintptr into calloc'd memory, never as
// unsafe.Pointer: a pointer-typed store is a write barrier that, while the
// collector marks, checks the word it overwrites, and malloc's leftovers can
// be the address of a freed Go object, which kills the process ("found bad
// pointer in Go heap"; package internal/staleptr).
func cParams(a *Args) (mem unsafe.Pointer, list *unsafe.Pointer, err error) {
	if err := a.Err(); err != nil {
		return nil, nil, err
	}
	n := a.Len()
	if n == 0 {
		return nil, nil, nil
	}
	const align = 64
	ptrBytes := (n*int(unsafe.Sizeof(uintptr(0))) + align - 1) &^ (align - 1)
	mem = C.calloc(1, C.size_t(align+ptrBytes+len(a.buf)))
	if mem == nil {
		return nil, nil, errors.New("driver: out of host memory for kernel arguments")
	}
	base := unsafe.Add(mem, (align-int(uintptr(mem)%align))%align)
	data := unsafe.Add(base, ptrBytes)
	copy(unsafe.Slice((*byte)(data), len(a.buf)), a.buf)
	ps := unsafe.Slice((*uintptr)(base), n)
	for i, off := range a.offs {
		ps[i] = uintptr(unsafe.Add(data, off))
	}
	return mem, (*unsafe.Pointer)(base), nil
}

// cFree releases an allocation of cParams (nil is fine).
func cFree(mem unsafe.Pointer) {
	if mem != nil {
		C.free(mem)
	}
}
