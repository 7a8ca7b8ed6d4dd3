package scratchtest

import (
	"errors"
	"testing"
	"unsafe"
)

// The fake hands out distinct aligned addresses, records uploads, counts
// frees and synchronisations, and returns SyncErr.
func TestDevice(t *testing.T) {
	f := New()
	a, _ := f.Alloc(10)
	b, _ := f.Alloc(5000)
	if a == b || a%4096 != 0 || b%4096 != 0 || b-a < 10 || f.Live[b] != 5000 {
		t.Fatalf("allocations %#x, %#x: %v", a, b, f.Live)
	}
	x := []byte{1, 2, 3}
	f.RelaxedCapture(func() error { return f.Upload(a, unsafe.Pointer(&x[0]), 3) })
	x[0] = 9
	if got := f.Uploads[a]; len(got) != 3 || got[0] != 1 {
		t.Errorf("upload recorded %v, want a copy of 1 2 3", got)
	}
	f.Free(a)
	f.SyncErr = errors.New("capturing")
	if err := f.SynchronizeOrWait(); err != f.SyncErr || f.Syncs != 1 || f.Freed != 1 || len(f.Live) != 1 {
		t.Errorf("sync %v; %d syncs, %d freed, %d live", err, f.Syncs, f.Freed, len(f.Live))
	}
}
