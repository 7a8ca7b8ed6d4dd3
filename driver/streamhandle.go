package driver

import "fmt"

// CUDA's special stream handles (cuda.h): CU_STREAM_LEGACY and
// CU_STREAM_PER_THREAD; no stream object lives below minStreamAddr.
const (
	streamLegacy    = 0x1
	streamPerThread = 0x2
	minStreamAddr   = 4096
)

// streamHandle sorts a caller's CUstream handle before the package keeps
// it: 0 and CU_STREAM_LEGACY are the legacy default stream (this package
// calls the driver's legacy-stream entry points, where handle 0 means it),
// so use is 0; CU_STREAM_PER_THREAD and every other value below 4096 are
// refused (streamHandleError says why). Small enough to inline, so that
// WrapStream stays inlined and its Stream on the caller's stack.
func streamHandle(h uintptr) (use uintptr, refused bool) {
	if h >= minStreamAddr || h == 0 {
		return h, false
	}
	return 0, h != streamLegacy
}

// streamHandleError is the error of a refused handle. Refused because the
// package keeps handles in pointer-typed fields of gorgonia.org/cu, where
// such a value makes the Go runtime abort the process ("invalid pointer
// found on stack") when it copies a goroutine's stack; and
// CU_STREAM_PER_THREAD means the calling OS thread's default stream, which
// a Go caller cannot pin (a call may run on any thread).
func streamHandleError(h uintptr) error {
	if h == streamPerThread {
		return fmt.Errorf("driver: stream handle 0x2 is CU_STREAM_PER_THREAD, the calling OS thread's default stream, which has no meaning for Go callers (a call may run on any thread): pass 0 (the legacy default stream) or a stream you created")
	}
	return fmt.Errorf("driver: stream handle %#x is not a CUstream (no stream lives below address %d)", h, minStreamAddr)
}
