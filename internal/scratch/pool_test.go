package scratch

import (
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/scratch/scratchtest"
)

// A lease uploads its table to memory of its own, takes its share of its
// key's slab and is charged its own needs; released, its memory waits for
// a synchronisation, which Close makes; after Close nothing is allocated.
func TestPoolLease(t *testing.T) {
	f := scratchtest.New()
	p := NewPool(f)
	table := []int32{0, 64, 64, 100}
	key := Key{Kind: SplitStates, O: 1 << 30}
	l, err := p.Allocate(table, key, 1000)
	if err != nil {
		t.Fatal(err)
	}
	up := f.Uploads[l.Table()]
	if len(up) != 16 || int32(binary.LittleEndian.Uint32(up[12:])) != 100 {
		t.Fatalf("uploaded table %v", up)
	}
	if tb, sb := l.Sizes(); tb != 256 || sb != SlabSize(1000) || l.Bytes() != 256+1000 || f.Live[l.Slab()] != sb {
		t.Errorf("table %d bytes, slab %d, charged %d", tb, sb, l.Bytes())
	}
	other, _ := p.Allocate(table, key, 500)
	if other.Slab() != l.Slab() || other.Table() == l.Table() {
		t.Error("two leases of one key: the slab must be shared, the tables not")
	}
	l.Release()
	l.Release() // a second release does nothing
	other.Release()
	if len(f.Live) != 3 || f.Freed != 0 || p.Waiting() != 3 {
		t.Fatalf("after release: %d live, %d freed, %d waiting; want 3, 0, 3", len(f.Live), f.Freed, p.Waiting())
	}
	p.Close()
	if len(f.Live) != 0 || f.Syncs != 1 {
		t.Fatalf("after Close: %d live, %d syncs; want 0, 1", len(f.Live), f.Syncs)
	}
	if _, err := p.Allocate(table, key, 10); !errors.Is(err, gdnerr.ErrClosed) || len(f.Live) != 0 {
		t.Errorf("Allocate after Close: %v, %d live", err, len(f.Live))
	}
}

// A kept lease (launched into a caller's graph) outlives every
// synchronisation until Close; a nil lease (a call without scratch) keeps
// and releases nothing.
func TestPoolKeep(t *testing.T) {
	f := scratchtest.New()
	p := NewPool(f)
	l, _ := p.Allocate([]int32{1}, Key{O: 1}, 16)
	l.Keep()
	if !l.Kept() {
		t.Fatal("Kept after Keep: false")
	}
	table, slab := l.Table(), l.Slab()
	l.Release()
	big, _ := p.Allocate([]int32{1}, Key{O: 2}, retiredLimit)
	big.Release() // past the limit: frees what waits
	if _, ok := f.Live[table]; !ok || f.Syncs == 0 {
		t.Fatalf("kept table live %v after %d syncs", ok, f.Syncs)
	}
	if _, ok := f.Live[slab]; !ok {
		t.Fatal("kept slab freed before Close")
	}
	p.Close()
	if len(f.Live) != 0 {
		t.Fatalf("%d live after Close", len(f.Live))
	}
	var none *Lease
	none.Keep()
	none.Release()
	if none.Kept() {
		t.Error("a nil lease is kept")
	}
}

// failing fails the nth Alloc (and every Upload when upload is set, every
// Zero when zero is).
type failing struct {
	*scratchtest.Device
	allocs, failAt int
	upload, zero   bool
}

func (f *failing) Zero(dst driver.DevicePtr, bytes int) error {
	if f.zero {
		return errors.New("memset failed")
	}
	return f.Device.Zero(dst, bytes)
}

func (f *failing) Alloc(bytes int) (driver.DevicePtr, error) {
	if f.allocs++; f.allocs == f.failAt {
		return 0, errors.New("out of memory")
	}
	return f.Device.Alloc(bytes)
}

func (f *failing) Upload(dst driver.DevicePtr, src unsafe.Pointer, bytes int) error {
	if f.upload {
		return errors.New("copy failed")
	}
	return f.Device.Upload(dst, src, bytes)
}

// A failed allocation frees what it had allocated at once (nothing read
// it) and says which part failed.
func TestPoolAllocateFails(t *testing.T) {
	for _, c := range []struct {
		name   string
		f      *failing
		prefix string
	}{
		{"table", &failing{Device: scratchtest.New(), failAt: 1}, "table (256 bytes): "},
		{"upload", &failing{Device: scratchtest.New(), upload: true}, "table (256 bytes): "},
		{"slab", &failing{Device: scratchtest.New(), failAt: 2}, "working buffers (4096 bytes): "},
		{"slab zeroing", &failing{Device: scratchtest.New(), zero: true}, "working buffers (4096 bytes): "},
	} {
		p := NewPool(c.f)
		_, err := p.Allocate([]int32{1, 2}, Key{O: 1}, 4096)
		if err == nil || len(err.Error()) < len(c.prefix) || err.Error()[:len(c.prefix)] != c.prefix {
			t.Errorf("%s: %v, want it to begin %q", c.name, err, c.prefix)
		}
		if len(c.f.Live) != 0 || p.Waiting() != 0 {
			t.Errorf("%s: %d live, %d waiting after the failure", c.name, len(c.f.Live), p.Waiting())
		}
	}
}

// Out of device memory while released scratch waits to be freed, an
// allocation frees it (after a synchronisation) and succeeds; during a
// capture (the synchronisation fails) the out-of-memory error stands and
// the waiting memory stays.
func TestPoolOutOfMemoryFreesRetired(t *testing.T) {
	for _, capturing := range []bool{false, true} {
		f := scratchtest.New()
		f.Capacity = 3 << 20
		p := NewPool(f)
		old, err := p.Allocate([]int32{1}, Key{Kind: FullBuffers, O: 1}, 2<<20)
		if err != nil {
			t.Fatal(err)
		}
		old.Release() // 2 MB and a table wait for a synchronisation
		if capturing {
			f.SyncErr = errors.New("capturing")
		}
		l, err := p.Allocate([]int32{1}, Key{Kind: FullBuffers, O: 2}, 2<<20)
		switch {
		case capturing && (err == nil || !driver.IsCode(err, driver.CodeOutOfMemory) || p.Waiting() != 2):
			t.Errorf("while capturing: %v, %d waiting; want out of memory and 2 waiting", err, p.Waiting())
		case !capturing && (err != nil || p.Waiting() != 0 || f.Syncs != 1):
			t.Errorf("%v, %d waiting, %d syncs; want a lease, 0 waiting, 1 sync", err, p.Waiting(), f.Syncs)
		}
		if err == nil {
			l.Release()
		}
		f.SyncErr = nil
		p.Close()
		if len(f.Live) != 0 {
			t.Errorf("capturing %v: %d allocations live after Close", capturing, len(f.Live))
		}
	}
}

// Out of device memory, the pool first asks its owner to drop the calls
// it keeps idle (SetReclaim), then frees what they released, and tries
// again; when nothing can be dropped or freed, the error stands.
func TestPoolOutOfMemoryReclaims(t *testing.T) {
	f := scratchtest.New()
	f.Capacity = 3 << 20
	p := NewPool(f)
	cached, err := p.Allocate([]int32{1}, Key{Kind: FullBuffers, O: 1}, 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	reclaims := 0
	p.SetReclaim(func() bool {
		reclaims++
		if cached == nil {
			return false
		}
		cached.Release() // what dropping an idle cached call does
		cached = nil
		return true
	})
	l, err := p.Allocate([]int32{1}, Key{Kind: FullBuffers, O: 2}, 2<<20)
	if err != nil || reclaims != 1 || f.Syncs != 1 {
		t.Fatalf("%v after %d reclaims and %d syncs; want a lease after 1 and 1", err, reclaims, f.Syncs)
	}
	// Nothing left to drop or free: the allocation fails, once.
	if _, err := p.Allocate([]int32{1}, Key{Kind: FullBuffers, O: 3}, 2<<20); !driver.IsCode(err, driver.CodeOutOfMemory) || reclaims != 2 {
		t.Errorf("%v after %d reclaims; want out of memory after 2", err, reclaims)
	}
	l.Release()
	p.Close()
	if len(f.Live) != 0 {
		t.Errorf("%d allocations live after Close", len(f.Live))
	}
}
