// Command libgdn is gdn's C ABI: built with
//
//	go build -tags cuda -buildmode=c-shared -o libgdn.so ./cmd/libgdn
//
// (make python does it), it is a shared library whose functions, declared in
// gdn.h, open a Runtime on a device's primary context and run its Forward,
// ForwardFull, Decode and ForwardMixed on the caller's device pointers and
// stream. It is a thin layer: each function converts its C structs into the
// Go API's arguments (convert.go), looks its runtime up by handle
// (handles.go), calls the Runtime and turns the error into a status code and
// a message kept with the runtime (status.go). The Python package in python/
// loads it with ctypes.
//
// gdn.h is the ABI's contract, written by hand; abi.go mirrors its structs
// in Go, and a test holds the two to the same sizes and field offsets.
// Without the cuda build tag the library still builds, and gdn_open answers
// GDN_ERR_NO_CUDA: the CPU tests of the Python package load such a build.
package main

// main is never run: a c-shared build needs a main package, and its
// exported functions are the entry points.
func main() {}
