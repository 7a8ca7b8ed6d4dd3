package scratch

import (
	"errors"
	"testing"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/scratch/scratchtest"
)

// Retired scratch is freed only after a synchronisation that succeeded:
// when it fails (a stream of the context is capturing), a launched graph
// may still be reading the memory, so it waits for the next free.
func TestRetiredWaitsWhenSyncFails(t *testing.T) {
	f := scratchtest.New()
	f.SyncErr = errors.New("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
	g := &retired{dev: f}
	var ps []driver.DevicePtr
	for range 3 {
		p, _ := f.Alloc(retiredLimit / 2)
		ps = append(ps, p)
		g.add(region{p, retiredLimit / 2}, false)
	}
	if f.Syncs == 0 {
		t.Fatal("no free past the limit")
	}
	if f.Freed != 0 || len(f.Live) != 3 {
		t.Fatalf("after failed synchronisations: %d freed, %d live; want 0 and 3", f.Freed, len(f.Live))
	}
	f.SyncErr = nil
	g.free()
	if f.Freed != 3 || len(f.Live) != 0 {
		t.Fatalf("after a good synchronisation: %d freed, %d live; want 3 and 0", f.Freed, len(f.Live))
	}
}
