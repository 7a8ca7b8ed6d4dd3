package main

// The exported C functions of gdn.h: each casts its C pointers to the Go
// mirrors (abi.go) and calls its body in calls.go.

/*
// The types only: cgo declares the exported functions itself, without
// gdn.h's const qualifiers, and C refuses two differing declarations.
#define GDN_TYPES_ONLY
#include "gdn.h"
*/
import "C"

import (
	"unsafe"

	"github.com/gdnjit/gdn/internal/buildinfo"
)

//export gdn_abi_version
func gdn_abi_version() C.int32_t { return abiVersion }

//export gdn_struct_size
func gdn_struct_size(which C.int32_t) C.int64_t { return C.int64_t(structSize(int32(which))) }

//export gdn_open
func gdn_open(opts *C.gdn_options, out *C.gdn_runtime) C.int32_t {
	if out == nil {
		return C.int32_t(fail(nil, errNilOut))
	}
	h, st := openRuntime((*cOptions)(unsafe.Pointer(opts)))
	*out = C.gdn_runtime(h)
	return C.int32_t(st)
}

//export gdn_close
func gdn_close(rt C.gdn_runtime) C.int32_t { return C.int32_t(closeRuntime(uint64(rt))) }

//export gdn_forward
func gdn_forward(rt C.gdn_runtime, a *C.gdn_core_args, stream C.uintptr_t) C.int32_t {
	return C.int32_t(forward(uint64(rt), (*cCoreArgs)(unsafe.Pointer(a)), uintptr(stream)))
}

//export gdn_forward_full
func gdn_forward_full(rt C.gdn_runtime, a *C.gdn_full_args, stream C.uintptr_t) C.int32_t {
	return C.int32_t(forwardFull(uint64(rt), (*cFullArgs)(unsafe.Pointer(a)), uintptr(stream)))
}

//export gdn_decode
func gdn_decode(rt C.gdn_runtime, a *C.gdn_decode_args, stream C.uintptr_t) C.int32_t {
	return C.int32_t(decode(uint64(rt), (*cDecodeArgs)(unsafe.Pointer(a)), uintptr(stream)))
}

//export gdn_forward_mixed
func gdn_forward_mixed(rt C.gdn_runtime, a *C.gdn_full_args, stream C.uintptr_t) C.int32_t {
	return C.int32_t(forwardMixed(uint64(rt), (*cFullArgs)(unsafe.Pointer(a)), uintptr(stream)))
}

//export gdn_last_error
func gdn_last_error(rt C.gdn_runtime, buf *C.char, n C.int64_t) C.int64_t {
	return C.int64_t(copyMessage(lastError(uint64(rt)), unsafe.Pointer(buf), int64(n)))
}

//export gdn_build_info
func gdn_build_info(buf *C.char, n C.int64_t) C.int64_t {
	return C.int64_t(copyMessage(buildinfo.Line("libgdn"), unsafe.Pointer(buf), int64(n)))
}
