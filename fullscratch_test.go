package gdn

import (
	"errors"
	"testing"
)

// slabDevice is a fake device with its graveyard and slabs.
func slabDevice() (*fakeScratch, *scratchGraveyard, *scratchSlabs) {
	f := newFakeScratch()
	g := &scratchGraveyard{dev: f}
	return f, g, &scratchSlabs{dev: f, grave: g}
}

// allFreed fails t if any of f's allocations is live.
func allFreed(t *testing.T, f *fakeScratch) {
	t.Helper()
	if len(f.live) != 0 {
		t.Fatalf("%d allocations live", len(f.live))
	}
}

// Calls that write the same outputs share one slab, whatever else differs;
// other outputs get their own; a slab lives while a call holds it and then
// goes to the graveyard, which frees it.
func TestScratchSlabsShareByOutputs(t *testing.T) {
	f, g, s := slabDevice()
	k1, k2 := slabKey{kind: slabFull, o: 1 << 30}, slabKey{kind: slabFull, o: 2 << 30, ht: 3 << 30}
	a, err := s.acquire(k1, 100<<20)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.acquire(k1, 60<<20)
	c, _ := s.acquire(k2, 100<<20)
	if a != b || a == c || len(f.live) != 2 {
		t.Fatalf("same outputs share (%v), others do not (%v); %d allocations live, want 2", a == b, a != c, len(f.live))
	}
	if live, allocs := s.counts(slabFull); live != 2 || allocs != 2 {
		t.Fatalf("counts %d live, %d allocated; want 2, 2", live, allocs)
	}
	s.release(k1, a)
	if _, ok := f.live[b.mem]; !ok {
		t.Fatal("a slab still held was freed")
	}
	s.release(k1, b)
	s.release(k2, c)
	if live, _ := s.counts(slabFull); live != 0 {
		t.Fatalf("%d slabs in use after every release", live)
	}
	g.close()
	allFreed(t, f)
	// Unheld, a key's slab is forgotten: its next call allocates afresh.
	d, _ := s.acquire(k1, 10)
	if _, allocs := s.counts(slabFull); allocs != 3 || d.bytes != 10 {
		t.Fatalf("%d allocations, slab of %d bytes; want 3, 10", allocs, d.bytes)
	}
}

// A call needing more than its key's slab holds gets a larger one, which
// later calls share; the smaller one lives on with its calls and is buried
// by the last.
func TestScratchSlabsGrow(t *testing.T) {
	f, g, s := slabDevice()
	k := slabKey{kind: slabFull, o: 1 << 30}
	small, _ := s.acquire(k, 100)
	big, _ := s.acquire(k, 300)
	mid, _ := s.acquire(k, 200)
	if small == big || mid != big || big.bytes != slabSize(300) {
		t.Fatalf("grow: small %p big %p mid %p (%d bytes)", small, big, mid, big.bytes)
	}
	s.release(k, small)
	g.close() // frees what was parked: the small slab only
	if _, ok := f.live[small.mem]; ok || len(f.live) != 1 {
		t.Fatalf("small slab live %v, %d allocations live; want false, 1", ok, len(f.live))
	}
	if live, _ := s.counts(slabFull); live != 1 {
		t.Fatalf("%d slabs in use, want the large one", live)
	}
	s.release(k, big)
	s.release(k, mid)
	g.close()
	allFreed(t, f)
}

// A slab a captured call used is kept through synchronisations until the
// graveyard closes (the caller's graph may be replayed until Close); after
// close, acquire fails with ErrClosed.
func TestScratchSlabsPinnedKeptUntilClose(t *testing.T) {
	f, g, s := slabDevice()
	k := slabKey{kind: slabFull, o: 1 << 30}
	sl, _ := s.acquire(k, graveyardLimit) // at the limit: parking it would drain at once
	s.pin(sl)
	s.release(k, sl)
	other, _ := s.acquire(slabKey{kind: slabFull, o: 5 << 30}, graveyardLimit)
	s.release(slabKey{kind: slabFull, o: 5 << 30}, other) // drains the graveyard
	if _, ok := f.live[sl.mem]; !ok || f.syncs == 0 {
		t.Fatalf("pinned slab live %v after %d drains", ok, f.syncs)
	}
	if _, ok := f.live[other.mem]; ok {
		t.Fatal("the unpinned slab survived the drain")
	}
	s.close()
	if _, err := s.acquire(k, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("acquire after close: %v", err)
	}
	g.close()
	allFreed(t, f)
}

// A serving loop whose batches have new boundaries every call prepares a
// new full call each time; the cache evicts old calls, but the working
// buffers are one slab throughout: allocated once, no synchronisation, and
// freed once the last call on it is gone.
func TestFullCallsOfNewBoundariesShareOneSlab(t *testing.T) {
	f, g, s := slabDevice()
	c := newFullCache()
	const slabBytes = 406 << 20 // Qwen3.5-35B's 16/32 heads at 32k tokens, with L2Norm
	out := slabKey{kind: slabFull, o: 1 << 40, ht: 2 << 40}
	for i := range 200 {
		seqs := []int{0, 1000 + i, 32768}
		key := fullKey{o: out.o, ht: out.ht, t: 32768, n: 2, seqsHash: hashSeqs(seqs)}
		e := &fullCall{key: key, seqs: seqs, dev: f, grave: g, slabs: s, memBytes: 256, slabNeed: slabBytes}
		var err error
		if e.mem, err = f.Alloc(e.memBytes); err != nil {
			t.Fatal(err)
		}
		if e.slab, err = s.acquire(out, slabBytes); err != nil {
			t.Fatal(err)
		}
		got, err := c.held.put(key, e, seqs)
		if err != nil || got != e {
			t.Fatalf("call %d: put %v", i, err)
		}
		c.held.release(got)
	}
	if live, allocs := s.counts(slabFull); live != 1 || allocs != 1 {
		t.Fatalf("%d slabs in use, %d allocated over 200 calls; want 1, 1", live, allocs)
	}
	if f.syncs != 0 {
		t.Fatalf("%d synchronisations in the call path", f.syncs)
	}
	if n := c.held.len(); n > fullScratchLimit/slabBytes+1 {
		t.Fatalf("%d calls kept: the cache counts each call's share of the slab and keeps about %d", n, fullScratchLimit/slabBytes)
	}
	c.held.close()
	s.close()
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

// Calls are charged their own share of a slab, not its size: after one long
// call has grown the slab of its outputs, shorter calls on it (a serving
// loop's bucketed batch shapes, repeated) stay cached instead of being
// evicted and prepared again on every call.
func TestFullCallsChargedTheirShare(t *testing.T) {
	f, g, s := slabDevice()
	c := newFullCache()
	out := slabKey{kind: slabFull, o: 1 << 40}
	prepared := 0
	call := func(tokens, need int) {
		seqs := []int{0, tokens}
		key := fullKey{o: out.o, t: tokens, n: 1, seqsHash: hashSeqs(seqs)}
		e, found, _, err := c.held.get(key, seqs)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			prepared++
			e = &fullCall{key: key, seqs: seqs, dev: f, grave: g, slabs: s, memBytes: 256, slabNeed: need}
			if e.mem, err = f.Alloc(e.memBytes); err != nil {
				t.Fatal(err)
			}
			if e.slab, err = s.acquire(out, need); err != nil {
				t.Fatal(err)
			}
			if e, err = c.held.put(key, e, seqs); err != nil {
				t.Fatal(err)
			}
		}
		c.held.release(e)
	}
	call(131072, 1600<<20) // one long prompt: a 1.6 GB slab
	for range 30 {
		for _, tokens := range []int{4096, 8192, 16384} {
			call(tokens, tokens*12800)
		}
	}
	if prepared != 4 {
		t.Fatalf("%d calls prepared; want 4 (the long one and three buckets, each once)", prepared)
	}
	if live, allocs := s.counts(slabFull); live != 1 || allocs != 1 {
		t.Fatalf("%d slabs in use, %d allocated; want 1, 1", live, allocs)
	}
	c.held.close()
	s.close()
	g.close()
	allFreed(t, f)
}
