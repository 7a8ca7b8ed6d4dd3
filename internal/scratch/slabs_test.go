package scratch

import (
	"errors"
	"testing"

	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/scratch/scratchtest"
)

// slabDevice is a fake device with a pool on it, and the pool's slab
// table and retired memory.
func slabDevice() (*scratchtest.Device, *retired, *slabTable) {
	f := scratchtest.New()
	pool := NewPool(f)
	return f, &pool.retired, &pool.slabs
}

// allFreed fails t if any of f's allocations is live.
func allFreed(t *testing.T, f *scratchtest.Device) {
	t.Helper()
	if len(f.Live) != 0 {
		t.Fatalf("%d allocations live", len(f.Live))
	}
}

// Calls that write the same outputs share one slab, whatever else differs;
// other outputs get their own; a slab lives while a call holds it and then
// is retired, and freed.
func TestScratchSlabsShareByOutputs(t *testing.T) {
	f, g, s := slabDevice()
	k1, k2 := Key{Kind: FullBuffers, O: 1 << 30}, Key{Kind: FullBuffers, O: 2 << 30, Ht: 3 << 30}
	a, err := s.acquire(k1, 100<<20)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.acquire(k1, 60<<20)
	c, _ := s.acquire(k2, 100<<20)
	if a != b || a == c || len(f.Live) != 2 {
		t.Fatalf("same outputs share (%v), others do not (%v); %d allocations live, want 2", a == b, a != c, len(f.Live))
	}
	if live, allocs := s.counts(FullBuffers); live != 2 || allocs != 2 {
		t.Fatalf("counts %d live, %d allocated; want 2, 2", live, allocs)
	}
	s.release(k1, a)
	if _, ok := f.Live[b.mem]; !ok {
		t.Fatal("a slab still held was freed")
	}
	s.release(k1, b)
	s.release(k2, c)
	if live, _ := s.counts(FullBuffers); live != 0 {
		t.Fatalf("%d slabs in use after every release", live)
	}
	g.close()
	allFreed(t, f)
	// Unheld, a key's slab is forgotten: its next call allocates afresh.
	d, _ := s.acquire(k1, 10)
	if _, allocs := s.counts(FullBuffers); allocs != 3 || d.bytes != 10 {
		t.Fatalf("%d allocations, slab of %d bytes; want 3, 10", allocs, d.bytes)
	}
}

// A call needing more than its key's slab holds gets a larger one, which
// later calls share; the smaller one lives on with its calls and is
// retired by the last.
func TestScratchSlabsGrow(t *testing.T) {
	f, g, s := slabDevice()
	k := Key{Kind: FullBuffers, O: 1 << 30}
	small, _ := s.acquire(k, 100)
	big, _ := s.acquire(k, 300)
	mid, _ := s.acquire(k, 200)
	if small == big || mid != big || big.bytes != slabSize(300) {
		t.Fatalf("grow: small %p big %p mid %p (%d bytes)", small, big, mid, big.bytes)
	}
	s.release(k, small)
	g.close() // frees what was retired: the small slab only
	if _, ok := f.Live[small.mem]; ok || len(f.Live) != 1 {
		t.Fatalf("small slab live %v, %d allocations live; want false, 1", ok, len(f.Live))
	}
	if live, _ := s.counts(FullBuffers); live != 1 {
		t.Fatalf("%d slabs in use, want the large one", live)
	}
	s.release(k, big)
	s.release(k, mid)
	g.close()
	allFreed(t, f)
}

// A slab a captured call used is kept through synchronisations until the
// pool closes (the caller's graph may be replayed until Close); after
// close, acquire fails with gdnerr.ErrClosed.
func TestScratchSlabsKeptUntilClose(t *testing.T) {
	f, g, s := slabDevice()
	k := Key{Kind: FullBuffers, O: 1 << 30}
	sl, _ := s.acquire(k, retiredLimit) // at the limit: retiring it would free at once
	s.keep(sl)
	s.release(k, sl)
	other, _ := s.acquire(Key{Kind: FullBuffers, O: 5 << 30}, retiredLimit)
	s.release(Key{Kind: FullBuffers, O: 5 << 30}, other) // frees the retired memory
	if _, ok := f.Live[sl.mem]; !ok || f.Syncs == 0 {
		t.Fatalf("kept slab live %v after %d synchronisations", ok, f.Syncs)
	}
	if _, ok := f.Live[other.mem]; ok {
		t.Fatal("the slab not kept survived the synchronisation")
	}
	s.close()
	if _, err := s.acquire(k, 1); !errors.Is(err, gdnerr.ErrClosed) {
		t.Fatalf("acquire after close: %v", err)
	}
	g.close()
	allFreed(t, f)
}

// slabSize rounds up by at most an eighth, to a multiple of an eighth of a
// power of two.
func TestSlabSize(t *testing.T) {
	for _, c := range [][2]int{{0, 0}, {8, 8}, {9, 9}, {16, 16}, {17, 18}, {100, 104}, {1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1<<17}, {406 << 20, 416 << 20}} {
		if got := slabSize(c[0]); got != c[1] {
			t.Errorf("slabSize(%d) = %d, want %d", c[0], got, c[1])
		}
	}
	for n := 1; n < 1<<16; n += 37 {
		if got := slabSize(n); got < n || float64(got) > 1.125*float64(n) {
			t.Fatalf("slabSize(%d) = %d: below or more than 12.5%% over", n, got)
		}
	}
}

// Every slab is zeroed whole when allocated, a grown one too: a mixed
// call's runs leave rows of other sequences unwritten, and the kernels
// read them (slabs.go).
func TestScratchSlabsZeroed(t *testing.T) {
	f, _, s := slabDevice()
	k := Key{Kind: FullBuffers, O: 1 << 30}
	for _, bytes := range []int{1000, 500, 5000} {
		sl, err := s.acquire(k, bytes)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Zeroed[sl.mem]; got != sl.bytes {
			t.Errorf("slab of %d bytes (asked %d): %d bytes zeroed", sl.bytes, bytes, got)
		}
	}
	if len(f.Zeroed) != 2 {
		t.Errorf("%d slabs zeroed, want 2 (the one of 500 bytes is the first's)", len(f.Zeroed))
	}
}
