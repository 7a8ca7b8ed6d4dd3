package gdn

import (
	"errors"
	"testing"

	"github.com/gdnjit/gdn/driver"
)

// fullArgs are valid full-forward arguments (A absent, g raw).
func fullArgs(b, t, hq, hv int) *FullArgs {
	c := goodArgs(b, t, hq, hv)
	return &FullArgs{Q: c.Q, K: c.K, V: c.V, G: c.G, Beta: c.Beta, H0: c.H0, O: c.O, Ht: c.Ht}
}

// ValidateFull accepts what the full forward takes and names the argument
// of what it does not: the gate's parameters only with GateInKernel, of
// shape [Hv] in fp32; everything else as ValidateCore.
func TestValidateFull(t *testing.T) {
	a := fullArgs(2, 100, 2, 4)
	p, err := ValidateFull(a)
	if err != nil || p.Hv != 4 || p.N != 2 || p.ADtype != FP32 {
		t.Fatalf("valid args: %+v, %v", p, err)
	}
	hv := Tensor{Ptr: 1 << 30, Bytes: 16, Dtype: FP32, Shape: []int{4}}
	cases := map[string]func(*FullArgs){
		"a_log":   func(a *FullArgs) { a.GateInKernel = true },
		"dt_bias": func(a *FullArgs) { a.GateInKernel, a.ALog = true, hv },
		"q":       func(a *FullArgs) { a.Q.Shape = []int{2, 100, 2} },
		"g":       func(a *FullArgs) { a.G.Dtype = BF16 },
	}
	for want, mutate := range cases {
		b := *fullArgs(2, 100, 2, 4)
		mutate(&b)
		_, err := ValidateFull(&b)
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != want || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", want, err)
		}
	}
	b := *fullArgs(2, 100, 2, 4)
	b.ALog = hv
	if _, err := ValidateFull(&b); err == nil {
		t.Error("A_log without GateInKernel accepted")
	}
	b.GateInKernel, b.DtBias = true, hv
	if _, err := ValidateFull(&b); err != nil {
		t.Errorf("gate in kernel: %v", err)
	}
	if _, err := ValidateFull(nil); err == nil {
		t.Error("nil accepted")
	}
}

// chunkPairs cuts every sequence into 64-token chunks, the last shorter,
// none across two sequences, empty sequences none.
func TestChunkPairs(t *testing.T) {
	p := Problem{B: 1, T: 200, N: 4, Seqs: []int{0, 0, 1, 130, 200}}
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
	if got := chunkPairs(Problem{B: 2, T: 64, N: 2}); len(got) != 4 || got[2] != 64 || got[3] != 128 {
		t.Fatalf("batch: %v", got)
	}
}

// The prepared full calls hold at most fullScratchLimit bytes of scratch
// (the newest whatever its size); evicted scratch is parked in the
// graveyard, or kept until Close when the call was captured into a caller's
// graph; Close frees it all after one synchronisation.
func TestFullCacheScratch(t *testing.T) {
	f := newFakeScratch()
	g := &scratchGraveyard{dev: f}
	c := newFullCache()
	mk := func(i int, bytes int, pinned bool) *fullCall {
		p, _ := f.Alloc(bytes)
		e := &fullCall{key: fullKey{b: i}, dev: f, grave: g, mem: p, memBytes: bytes}
		e.pinned.Store(pinned)
		return e
	}
	var pinnedMem driver.DevicePtr
	for i, pinned := range []bool{true, false, false} {
		e := mk(i, 900<<20, pinned)
		if pinned {
			pinnedMem = e.mem
		}
		e, err := c.held.put(e.key, e, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.held.release(e)
	}
	if len(c.held.entries) != 2 || c.held.scratch != 1800<<20 {
		t.Fatalf("%d entries, %d bytes of scratch; want 2, 1800 MB", len(c.held.entries), c.held.scratch)
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
	// Three calls were evicted; their scratch was freed after a
	// synchronisation, except the captured one's, kept until Close.
	if _, ok := f.live[pinnedMem]; !ok || len(f.live) != 2 || f.syncs == 0 {
		t.Fatalf("captured call's scratch live %v; %d live, %d syncs", ok, len(f.live), f.syncs)
	}
	c.held.close()
	g.close()
	if len(f.live) != 0 {
		t.Fatalf("after close: %d live", len(f.live))
	}
}
