package hostpath

import (
	"runtime"
	"testing"
	"time"
)

// makeNoZero gives slices of the length asked, each its own array, that
// the GC frees as any other; a length whose size overflows panics.
func TestMakeNoZero(t *testing.T) {
	if makeNoZero(0) != nil || makeNoZero(-1) != nil {
		t.Error("an empty result is not nil")
	}
	for _, n := range []int{1, 7, 1024, 1<<20 + 3} {
		x := makeNoZero(n)
		if len(x) != n || cap(x) != n {
			t.Fatalf("len %d cap %d, want %d", len(x), cap(x), n)
		}
		for i := range x {
			x[i] = float32(i)
		}
		y := makeNoZero(n)
		for i := range y {
			y[i] = -1
		}
		for i := range x {
			if x[i] != float32(i) {
				t.Fatalf("%d elements: two allocations share memory", n)
			}
		}
	}
	freed := make(chan struct{})
	func() {
		x := makeNoZero(1 << 20)
		runtime.AddCleanup(&x[0], func(c chan struct{}) { close(c) }, freed)
	}()
	for i := 0; ; i++ {
		runtime.GC()
		select {
		case <-freed:
		case <-time.After(10 * time.Millisecond):
			if i < 100 {
				continue
			}
			t.Fatal("an unreachable allocation was not freed")
		}
		break
	}
	defer func() {
		if recover() == nil {
			t.Error("no panic for a length whose size overflows")
		}
	}()
	makeNoZero(maxAllocFloats + 1)
}
