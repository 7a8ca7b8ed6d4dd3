//go:build cuda

package driver

/*
#include <cuda.h>

static CUresult gdn_capture_mode(int* mode) {
	CUstreamCaptureMode m = (CUstreamCaptureMode)*mode;
	CUresult r = cuThreadExchangeStreamCaptureMode(&m);
	*mode = (int)m;
	return r;
}
*/
import "C"

import "runtime"

// RelaxedCapture runs f on one OS thread whose stream-capture mode is
// relaxed, then restores the thread's mode. While any thread captures a
// stream in the (default) global mode, CUDA refuses "potentially unsafe"
// calls such as cuMemAlloc from every other thread in global mode, and such
// a call can invalidate that capture; in relaxed mode they are allowed.
// Preparing a call (allocating its scratch memory) may happen while another
// goroutine captures a graph, or while the caller's own stream captures.
func (c *Context) RelaxedCapture(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mode := C.int(C.CU_STREAM_CAPTURE_MODE_RELAXED)
	if err := check("cuThreadExchangeStreamCaptureMode", C.gdn_capture_mode(&mode)); err != nil {
		return err
	}
	defer C.gdn_capture_mode(&mode)
	return f()
}
