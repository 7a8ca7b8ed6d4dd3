// Package staleptr tests code that writes pointers into C memory for the
// mistake that crashed gdn's GPU tests twice with the Go runtime's "fatal
// error: found bad pointer in Go heap": a store of a pointer-typed value
// (unsafe.Pointer, *C.char) into memory from C.malloc.
//
// Go compiles every store of a pointer-typed value as a write barrier, which
// while the collector marks also reads the value it overwrites and checks it
// as a heap pointer. Memory fresh from malloc holds whatever the chunk held
// before, and glibc hands a freed chunk back soon; when that leftover is the
// address of a Go object since freed (a host buffer the CUDA driver or NVRTC
// once held in its own memory, say), the check finds a pointer into free heap
// pages and the process dies. The fix is to write such arrays as uintptr (no
// barrier) into zeroed memory; Hammer makes the mistake likely enough to
// fail a test at once.
package staleptr

/*
#include <stdlib.h>
*/
import "C"

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
	"unsafe"
)

// freedObject is the Go object whose address Hammer plants; it is dropped
// (and collected) before any planting.
var freedObject []byte

// Hammer calls store at least iters times (more, until the collector has
// run 200 times during the calls, within 20 s) while another goroutine runs
// the collector back to back; before each call it leaves the address of a
// freed Go object in every word of a C chunk of size bytes and frees the
// chunk, so that the next malloc of that size is likely to return it with
// the address still in it. store should make the allocation of size bytes that it writes pointers
// into and free it. Code that writes pointer-typed values into fresh C memory
// crashes the process within a few iterations (a fatal error, not a panic:
// the test binary exits with a runtime stack); correct code returns.
func Hammer(size, iters int, store func()) {
	if size < int(unsafe.Sizeof(uintptr(0))) {
		panic("staleptr: size below one word")
	}
	freedObject = make([]byte, 8<<20)
	stale := uintptr(unsafe.Pointer(&freedObject[len(freedObject)/2]))
	freedObject = nil
	runtime.GC()
	runtime.GC()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	// The stores hit a marking collector only in its short mark phases: go
	// on past iters until minCycles collections have run during the calls
	// (within maxTime), which makes the mistake's crash near certain.
	const minCycles, maxTime = 200, 20 * time.Second
	words := size / int(unsafe.Sizeof(uintptr(0)))
	start, deadline := gcCycles(), time.Now().Add(maxTime)
	for i := 0; ; i++ {
		// Past iters, every 256th call asks whether enough collections ran
		// (reading the counter is too slow for every call).
		if i >= iters && i%256 == 0 && (gcCycles()-start >= minCycles || time.Now().After(deadline)) {
			break
		}
		p := C.malloc(C.size_t(size))
		for j, w := 0, unsafe.Slice((*uintptr)(p), words); j < words; j++ {
			w[j] = stale
		}
		C.free(p)
		store()
	}
	close(stop)
	wg.Wait()
}

// gcCycles is the number of collections the runtime has completed.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// storeTyped is the mistake, for the package's own test: n unsafe.Pointer
// stores into fresh malloc memory.
func storeTyped(n int) {
	p := C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(uintptr(0))))
	for i, s := 0, unsafe.Slice((*unsafe.Pointer)(p), n); i < n; i++ {
		s[i] = unsafe.Add(p, i)
	}
	C.free(p)
}

// storeUintptr is the fix: the same array as uintptr into zeroed memory.
func storeUintptr(n int) {
	p := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0))))
	for i, s := 0, unsafe.Slice((*uintptr)(p), n); i < n; i++ {
		s[i] = uintptr(unsafe.Add(p, i))
	}
	C.free(p)
}
