package driver

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/gdnjit/gdn/internal/staleptr"
)

// cParams' array must point at copies of every argument, in order, and be
// written so that the collector never checks malloc's leftovers (the crash
// "found bad pointer in Go heap" seen in the GPU tests).
func TestCParamsLayoutUnderHammer(t *testing.T) {
	a := NewArgs()
	for i := 0; i < 7; i++ {
		a.Ptr(DevicePtr(0x7f0000000000 + i*256))
	}
	a.Int32(-3)
	const align = 64 // cParams' alignment
	size := align + 64 + len(a.buf)
	staleptr.Hammer(size, 20000, func() {
		mem, list, err := cParams(a)
		if err != nil {
			t.Fatal(err)
		}
		defer cFree(mem)
		if uintptr(unsafe.Pointer(list))%align != 0 {
			t.Fatalf("kernelParams array at %p, not %d-byte aligned", list, align)
		}
		for i, p := range unsafe.Slice(list, a.Len()) {
			got := unsafe.Slice((*byte)(p), a.sizes[i])
			want := a.buf[a.offs[i] : a.offs[i]+a.sizes[i]]
			if !bytes.Equal(got, want) {
				t.Fatalf("argument %d: C copy %x, want %x", i, got, want)
			}
		}
	})
	if mem, list, err := cParams(NewArgs()); mem != nil || list != nil || err != nil {
		t.Fatalf("empty Args: got %v %v %v, want nil nil nil", mem, list, err)
	}
}
