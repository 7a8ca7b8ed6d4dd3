package launch

import (
	"testing"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/problem/problemtest"
	"github.com/gdnjit/gdn/internal/scratch"
	"github.com/gdnjit/gdn/internal/scratch/scratchtest"
	"github.com/gdnjit/gdn/kernsrc"
)

// chunkPairs cuts every sequence into 64-token chunks, the last shorter,
// none across two sequences, empty sequences none.
func TestChunkPairs(t *testing.T) {
	p := problem.Problem{B: 1, T: 200, N: 4, Seqs: []int{0, 0, 1, 130, 200}}
	got := chunkPairs(p)
	want := []int32{0, 1, 1, 65, 65, 129, 129, 130, 130, 194, 194, 200}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
	if got := chunkPairs(problem.Problem{B: 2, T: 64, N: 2}); len(got) != 4 || got[2] != 64 || got[3] != 128 {
		t.Fatalf("batch: %v", got)
	}
}

// testTable is a full call's chunk table in the tests: 256 bytes.
var testTable = make([]int32, 64)

// The prepared full calls hold at most fullScratchLimit bytes of scratch
// (the newest whatever its size); evicted scratch is retired, or kept until
// Close when the call was captured into a caller's graph; Close frees it
// all after one synchronisation.
func TestFullCacheScratch(t *testing.T) {
	f := scratchtest.New()
	pool := scratch.NewPool(f)
	c := newFullCache()
	mk := func(i int, bytes int, kept bool) *fullCall {
		l, err := pool.Allocate(testTable, scratch.Key{Kind: scratch.FullBuffers, O: uintptr(1+i) << 40}, bytes)
		if err != nil {
			t.Fatal(err)
		}
		if kept {
			l.Keep()
		}
		return &fullCall{key: fullKey{b: i}, lease: l}
	}
	var keptMem driver.DevicePtr
	for i, kept := range []bool{true, false, false} {
		e := mk(i, 900<<20, kept)
		if kept {
			keptMem = e.lease.Slab()
		}
		e, err := c.held.put(e.key, e, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.held.release(e)
	}
	if len(c.held.entries) != 2 || c.held.scratch != 2*(900<<20+256) {
		t.Fatalf("%d entries, %d bytes of scratch; want 2, 1800 MB and two tables", len(c.held.entries), c.held.scratch)
	}
	bigCall := mk(9, 3<<30, false)
	big, err := c.held.put(bigCall.key, bigCall, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.held.release(big)
	if len(c.held.entries) != 1 || c.held.entries[fullKey{b: 9}] != big {
		t.Fatalf("a call over the limit must stay alone: %d entries", len(c.held.entries))
	}
	// Three calls were evicted; their slabs were freed after a
	// synchronisation (a table retired after its slab waits for the next
	// one), except the captured call's table and slab, kept until Close.
	if _, ok := f.Live[keptMem]; !ok || len(f.Live) != 4+pool.Waiting() || pool.Waiting() > 1 || f.Syncs == 0 {
		t.Fatalf("captured call's scratch live %v; %d live (%d waiting), %d syncs", ok, len(f.Live), pool.Waiting(), f.Syncs)
	}
	c.held.close()
	pool.Close()
	if len(f.Live) != 0 {
		t.Fatalf("after close: %d live", len(f.Live))
	}
}

// A serving loop whose batches have new boundaries every call prepares a
// new full call each time; the cache evicts old calls, but the working
// buffers are one slab throughout: allocated once, no synchronisation, and
// freed once the last call on it is gone.
func TestFullCallsOfNewBoundariesShareOneSlab(t *testing.T) {
	f := scratchtest.New()
	pool := scratch.NewPool(f)
	c := newFullCache()
	const slabBytes = 406 << 20 // Qwen3.5-35B's 16/32 heads at 32k tokens, with L2Norm
	out := scratch.Key{Kind: scratch.FullBuffers, O: 1 << 40, Ht: 2 << 40}
	for i := range 200 {
		seqs := []int{0, 1000 + i, 32768}
		key := fullKey{o: out.O, ht: out.Ht, t: 32768, n: 2, seqsHash: hashSeqs(seqs)}
		l, err := pool.Allocate(testTable, out, slabBytes)
		if err != nil {
			t.Fatal(err)
		}
		e := &fullCall{key: key, seqs: seqs, lease: l}
		got, err := c.held.put(key, e, seqs)
		if err != nil || got != e {
			t.Fatalf("call %d: put %v", i, err)
		}
		c.held.release(got)
	}
	if live, allocs := pool.SlabCounts(scratch.FullBuffers); live != 1 || allocs != 1 {
		t.Fatalf("%d slabs in use, %d allocated over 200 calls; want 1, 1", live, allocs)
	}
	if f.Syncs != 0 {
		t.Fatalf("%d synchronisations in the call path", f.Syncs)
	}
	if n := c.held.len(); n > fullScratchLimit/slabBytes+1 {
		t.Fatalf("%d calls kept: the cache counts each call's share of the slab and keeps about %d", n, fullScratchLimit/slabBytes)
	}
	c.held.close()
	pool.Close()
	if len(f.Live) != 0 {
		t.Fatalf("%d allocations live", len(f.Live))
	}
}

// Calls are charged their own share of a slab, not its size: after one long
// call has grown the slab of its outputs, shorter calls on it (a serving
// loop's bucketed batch shapes, repeated) stay cached instead of being
// evicted and prepared again on every call.
func TestFullCallsChargedTheirShare(t *testing.T) {
	f := scratchtest.New()
	pool := scratch.NewPool(f)
	c := newFullCache()
	out := scratch.Key{Kind: scratch.FullBuffers, O: 1 << 40}
	prepared := 0
	call := func(tokens, need int) {
		seqs := []int{0, tokens}
		key := fullKey{o: out.O, t: tokens, n: 1, seqsHash: hashSeqs(seqs)}
		e, found, _, err := c.held.get(key, seqs)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			prepared++
			l, err := pool.Allocate(testTable, out, need)
			if err != nil {
				t.Fatal(err)
			}
			if e, err = c.held.put(key, &fullCall{key: key, seqs: seqs, lease: l}, seqs); err != nil {
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
	if live, allocs := pool.SlabCounts(scratch.FullBuffers); live != 1 || allocs != 1 {
		t.Fatalf("%d slabs in use, %d allocated; want 1, 1", live, allocs)
	}
	c.held.close()
	pool.Close()
	if len(f.Live) != 0 {
		t.Fatalf("%d allocations live", len(f.Live))
	}
}

// Beta as logits is part of a full call's key and reaches the prep kernel
// as its flags; the core on a prepared A2 reads no beta (its block is the
// same either way), and a call that would take the fused core takes the
// preparation kernel instead;
// without the options none of the flags is set.
func TestBetaLogitsFlags(t *testing.T) {
	type opts struct{ logits, neg bool }
	keys := map[fullKey]opts{}
	var plain hopperCall // the prepared A2's core call without the options
	for _, o := range []opts{{false, false}, {true, false}, {true, true}} {
		a := problemtest.Full(2, 100, 2, 4)
		a.BetaLogits, a.NegEigval = o.logits, o.neg
		p, err := problem.ValidateFull(a)
		if err != nil {
			t.Fatal(err)
		}
		key := fullKeyOf(a, p)
		if prev, dup := keys[key]; dup {
			t.Errorf("%+v and %+v share a full call's key", o, prev)
		}
		keys[key] = o

		flags := prepFlags(a, p, false)
		if got := flags&kernsrc.PrepFlagBetaLogits != 0; got != o.logits {
			t.Errorf("%+v: prep flag beta logits %v", o, got)
		}
		if got := flags&kernsrc.PrepFlagNegEigval != 0; got != o.neg {
			t.Errorf("%+v: prep flag neg eigval %v", o, got)
		}

		// The core on the preparation's A2: the same block whatever the
		// flags (beta's logits are turned into beta in A2).
		prepared := a.CoreTemplate(a.Q, a.K, 1<<20, 1<<24)
		pc, err := problem.ValidateCore(&prepared)
		if err != nil {
			t.Fatal(err)
		}
		call := newHopperCall(&prepared, pc)
		if o == (opts{}) {
			plain = call
		} else if call != plain {
			t.Errorf("%+v: the core on a prepared A2 differs with the options", o)
		}

		// Where beta as given takes the fused core, its logits take the
		// preparation kernel (the fused core reads beta as given).
		bf := problemtest.Full(8, 1024, 16, 32)
		bf.BetaLogits, bf.NegEigval = o.logits, o.neg
		pb, err := problem.ValidateFull(bf)
		if err != nil {
			t.Fatal(err)
		}
		l := &Launcher{sms: 132}
		if !plan.FusedPrep(pb, 132, plan.Knobs{}, false) {
			t.Fatalf("%v: the test's shape does not take the fused core", pb)
		}
		if got := l.takesFused(bf, pb); got == o.logits {
			t.Errorf("%+v: fused core %v", o, got)
		}
	}
}
