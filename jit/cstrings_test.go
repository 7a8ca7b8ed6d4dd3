package jit

import (
	"testing"
	"unsafe"

	"github.com/gdnjit/gdn/internal/staleptr"
)

// goString reads the NUL-terminated string at p (test files cannot use cgo).
func goString(p unsafe.Pointer) string {
	var b []byte
	for ; *(*byte)(p) != 0; p = unsafe.Add(p, 1) {
		b = append(b, *(*byte)(p))
	}
	return string(b)
}

// cStrings' array must hold every string, in order, and be written so that
// the collector never checks malloc's leftovers (the crash "found bad pointer
// in Go heap" seen in the GPU tests; NVRTC options go through cStrings).
func TestCStringsUnderHammer(t *testing.T) {
	ss := []string{"--gpu-architecture=sm_90a", "-default-device", "", "-DGDN_BV=64", "-std=c++17", "x", "-lineinfo", "--use_fast_math"}
	staleptr.Hammer(len(ss)*8, 20000, func() {
		arr, free, err := cStrings(ss)
		if err != nil {
			t.Fatal(err)
		}
		defer free()
		for i, p := range unsafe.Slice((*unsafe.Pointer)(unsafe.Pointer(arr)), len(ss)) {
			if got := goString(p); got != ss[i] {
				t.Fatalf("string %d: %q, want %q", i, got, ss[i])
			}
		}
	})
	if arr, free, err := cStrings(nil); arr != nil || err != nil {
		free()
		t.Fatal("cStrings(nil) returned an array")
	}
}
