package gdn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/kernsrc"
)

// fakeScratch is a device for split calls on the CPU: allocations are
// addresses counted up, uploads land in a map, frees and synchronisations
// are counted.
type fakeScratch struct {
	mu      sync.Mutex
	next    driver.DevicePtr
	live    map[driver.DevicePtr]int
	uploads map[driver.DevicePtr][]byte
	freed   int
	syncs   int
	syncErr error // what SynchronizeOrWait returns
}

func newFakeScratch() *fakeScratch {
	return &fakeScratch{next: 1 << 44, live: map[driver.DevicePtr]int{}, uploads: map[driver.DevicePtr][]byte{}}
}

func (f *fakeScratch) RelaxedCapture(fn func() error) error { return fn() }

func (f *fakeScratch) Alloc(bytes int) (driver.DevicePtr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.next
	f.next += driver.DevicePtr(bytes+4095) &^ 4095
	f.live[p] = bytes
	return p, nil
}

func (f *fakeScratch) Upload(dst driver.DevicePtr, src unsafe.Pointer, bytes int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uploads[dst] = slices.Clone(unsafe.Slice((*byte)(src), bytes))
	return nil
}

func (f *fakeScratch) Free(p driver.DevicePtr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.live, p)
	f.freed++
	return nil
}

func (f *fakeScratch) SynchronizeOrWait() error {
	f.mu.Lock()
	f.syncs++
	f.mu.Unlock()
	return f.syncErr
}

// splitHostPath is hostPath with a fake device, so that calls split.
func splitHostPath(segChunks int) (*callCache, *fakeScratch) {
	c, _ := hostPath()
	f := newFakeScratch()
	c.dev, c.segChunks, c.grave = f, segChunks, &scratchGraveyard{dev: f}
	c.slabs = &scratchSlabs{dev: f, grave: c.grave}
	return c, f
}

// blockFields reads back the pointers and scalars of a packed block.
type blockFields struct {
	h0, ht, cuSeqlens uintptr
	t, n, flags, nHt  int32
}

func readBlock(b *[kernsrc.HopperParamsBytes]byte) blockFields {
	ptr := func(i int) uintptr { return uintptr(binary.LittleEndian.Uint64(b[kernsrc.HopperOffPtrs+8*i:])) }
	i32 := func(i int) int32 { return int32(binary.LittleEndian.Uint32(b[kernsrc.HopperOffScalars+4+4*i:])) }
	return blockFields{h0: ptr(2), ht: ptr(3), cuSeqlens: ptr(4), t: i32(0), n: i32(3), flags: i32(4), nHt: i32(5)}
}

// Options.ScanColumns (the call cache's scanCols) reaches the split call:
// its plan, its scan's variant, grid and shared memory take the forced
// width whatever the planner would pick.
func TestSplitCallScanColumnsForced(t *testing.T) {
	for _, cols := range []int{8, 16, 32} {
		c, _ := splitHostPath(2)
		c.scanCols = cols
		e, err := c.prepare(goodArgs(3, 1000, 2, 4))
		if err != nil {
			t.Fatal(err)
		}
		sc := e.split
		if sc == nil || e.plan.ScanColumns != cols || sc.plan.scanColumns != cols || sc.scan.grid[0] != uint32(HeadDim/cols) ||
			sc.scanVariant.Name != fmt.Sprintf("gdn_scan_states_c%d", cols) || sc.scanSmem != kernsrc.ScanSharedBytes(cols) {
			t.Errorf("forced %d columns: plan %v, split %+v", cols, e.plan, sc)
		}
		c.release(e)
	}
}

// A split call uploads exactly the segment tables of its plan and packs
// its two kernel passes as the kernels expect them: the transfer pass over
// the transfer segments (pairs, transfer flag, B and M into its scratch, no
// h0), the output pass over every segment (pairs, the scan's start states
// as h0, the caller's ht written by the first N rows), all tokens in one
// batch row.
func TestSplitCallPrepared(t *testing.T) {
	c, f := splitHostPath(2)
	a := goodArgs(3, 1000, 2, 4) // 16 chunks a sequence: 7 transfer segments each
	e, err := c.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release(e)
	sc := e.split
	if sc == nil || e.plan.SegmentChunks != 2 || e.plan.Segments != 21 {
		t.Fatalf("plan %v, split %v", e.plan, sc)
	}
	p, _ := ValidateCore(a)
	output, transfer, first, _, _ := segmentTables(p, 2, false)
	want := append(append(append([]int32(nil), output...), transfer...), first...)
	checkUploadedTables(t, f, sc, want)
	tableBytes := (4*len(want) + 255) &^ 255
	bm := uintptr(sc.slab.mem)
	starts := bm + uintptr(2*21*4*stateFloats*4)
	if f.live[sc.mem] != tableBytes || f.live[sc.slab.mem] != slabSize(2*21*4*stateFloats*4+(3+21)*4*stateFloats*4) {
		t.Errorf("tables of %d bytes, states of %d", f.live[sc.mem], f.live[sc.slab.mem])
	}

	tr := readBlock(&sc.transfer.block)
	if tr.flags&kernsrc.HopperFlagTransfer == 0 || tr.flags&kernsrc.HopperFlagSegPairs == 0 ||
		tr.h0 != 0 || tr.ht != bm || tr.n != 21 || tr.nHt != 21 || tr.t != 3000 ||
		tr.cuSeqlens != uintptr(sc.mem)+uintptr(4*len(output)) {
		t.Errorf("transfer block %+v", tr)
	}
	if sc.transfer.grid != [3]uint32{2 * 4 * 2 / uint32(sc.plan.consumers), 21, 1} {
		t.Errorf("transfer grid %v", sc.transfer.grid)
	}
	out := readBlock(&sc.output.block)
	if out.flags&kernsrc.HopperFlagTransfer != 0 || out.flags&kernsrc.HopperFlagSegPairs == 0 ||
		out.h0 != starts || out.ht != a.Ht.Ptr || out.n != 24 || out.nHt != 3 || out.t != 3000 ||
		out.cuSeqlens != uintptr(sc.mem) {
		t.Errorf("output block %+v", out)
	}
	if cols := sc.plan.scanColumns; cols != scanColumns(Problem{Hv: 4, N: 3}, c.plans.sms) || e.plan.ScanColumns != cols || sc.scan.grid != [3]uint32{uint32(HeadDim / cols), 4, 3} ||
		sc.scanVariant.Name != fmt.Sprintf("gdn_scan_states_c%d", cols) || sc.scanSmem != kernsrc.ScanSharedBytes(cols) {
		t.Errorf("scan: %d columns, grid %v, %s, %d bytes", cols, sc.scan.grid, sc.scanVariant.Name, sc.scanSmem)
	}

	// A repeated call finds the prepared split call without allocating.
	if allocs := testing.AllocsPerRun(100, func() {
		if err := hostPathCall(c, a); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("repeated split call: %.1f allocs", allocs)
	}
	if n := len(f.live); n != 2 {
		t.Errorf("%d scratch blocks after repeated calls, want 2 (tables, states)", n)
	}
}

// An early split call (Options.EarlyFirstSegment) also uploads the first
// segments' pairs and packs the early pass: the output kernel over each
// sequence's first segment from the caller's h0, its end states written
// past the start states (where the scan starts from); the transfer and
// output passes skip the first segments, and the transfer pass carries the
// flag that makes it a dependent of the early pass.
func TestSplitCallPreparedEarly(t *testing.T) {
	c, f := splitHostPath(2)
	c.early = 1
	a := goodArgs(3, 1000, 2, 4) // 16 chunks a sequence: 8 segments, the first early, 6 transfer
	e, err := c.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release(e)
	sc := e.split
	if sc == nil || !e.plan.EarlyFirstSegment || !sc.plan.early || e.plan.Segments != 18 {
		t.Fatalf("plan %v, split %v", e.plan, sc)
	}
	p, _ := ValidateCore(a)
	output, transfer, first, firsts, err := segmentTables(p, 2, true)
	if err != nil || len(firsts) != 6 || len(output) != 2*21 {
		t.Fatalf("tables: %d output words, %d firsts, %v", len(output), len(firsts), err)
	}
	want := append(append(append(append([]int32(nil), output...), transfer...), first...), firsts...)
	checkUploadedTables(t, f, sc, want)
	bm := uintptr(sc.slab.mem)
	starts := bm + uintptr(2*18*4*stateFloats*4)
	ends := starts + uintptr(21*4*stateFloats*4)
	if f.live[sc.slab.mem] != slabSize(2*18*4*stateFloats*4+21*4*stateFloats*4+3*4*stateFloats*4) {
		t.Errorf("states of %d bytes", f.live[sc.slab.mem])
	}
	firstsAt := uintptr(sc.mem) + uintptr(4*(len(output)+len(transfer)+len(first)))
	ea := readBlock(&sc.early.block)
	if ea.flags&kernsrc.HopperFlagTransfer != 0 || ea.flags&kernsrc.HopperFlagSegPairs == 0 || ea.flags&kernsrc.HopperFlagAfterEarly != 0 || ea.flags&kernsrc.HopperFlagEarlyPass == 0 ||
		ea.h0 != a.H0.Ptr || ea.ht != ends || ea.n != 3 || ea.nHt != 3 || ea.t != 3000 || ea.cuSeqlens != firstsAt {
		t.Errorf("early block %+v", ea)
	}
	if sc.early.grid != [3]uint32{4 * 2 / uint32(sc.plan.consumers), 3, 1} {
		t.Errorf("early grid %v", sc.early.grid)
	}
	tr := readBlock(&sc.transfer.block)
	if tr.flags&kernsrc.HopperFlagAfterEarly == 0 || tr.flags&kernsrc.HopperFlagTransfer == 0 ||
		tr.h0 != 0 || tr.ht != bm || tr.n != 18 || tr.nHt != 18 || tr.cuSeqlens != uintptr(sc.mem)+uintptr(4*len(output)) {
		t.Errorf("transfer block %+v", tr)
	}
	out := readBlock(&sc.output.block)
	if out.flags&(kernsrc.HopperFlagAfterEarly|kernsrc.HopperFlagEarlyPass) != 0 || out.h0 != starts || out.ht != a.Ht.Ptr || out.n != 21 || out.nHt != 3 {
		t.Errorf("output block %+v", out)
	}
}

// The early pass covers each sequence's first segment, and the other lists
// the rest exactly as a plain plan of the tokens after it would; a sequence
// no longer than one segment is an error (the planner never plans it).
func TestSegmentTablesEarly(t *testing.T) {
	p := Problem{B: 1, T: 700, Hq: 1, Hv: 2, N: 3, Seqs: []int{0, 300, 429, 700}}
	out, tr, first, firsts, err := segmentTables(p, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	wantFirsts := []int32{0, 64, 300, 364, 429, 493}
	if !slices.Equal(firsts, wantFirsts) {
		t.Fatalf("firsts %v, want %v", firsts, wantFirsts)
	}
	// Sequence 0: 64..300 -> transfer [64,128) [128,192) [192,256), last [256,300).
	wantTr := []int32{64, 128, 128, 192, 192, 256, 364, 428, 493, 557, 557, 621, 621, 685}
	if !slices.Equal(tr, wantTr) || !slices.Equal(first, []int32{0, 3, 4, 7}) {
		t.Fatalf("transfer %v first %v", tr, first)
	}
	if !slices.Equal(out[:6], []int32{256, 300, 428, 429, 685, 700}) || !slices.Equal(out[6:], tr) {
		t.Fatalf("output %v", out)
	}
	if _, _, _, _, err := segmentTables(Problem{B: 1, T: 64, Hq: 1, Hv: 1, N: 1}, 1, true); err == nil {
		t.Error("a one-segment sequence in an early plan: no error")
	}
}

// checkUploadedTables checks that sc's tables went to the device as want,
// word for word.
func checkUploadedTables(t *testing.T, f *fakeScratch, sc *splitCall, want []int32) {
	t.Helper()
	got := f.uploads[sc.mem]
	if len(got) != 4*len(want) {
		t.Fatalf("uploaded %d bytes, want %d", len(got), 4*len(want))
	}
	for i, w := range want {
		if g := int32(binary.LittleEndian.Uint32(got[4*i:])); g != w {
			t.Fatalf("table word %d: %d, want %d", i, g, w)
		}
	}
}

// Evicted split calls park their scratch (a launched graph may still read
// it) instead of synchronising the context; Close synchronises once and
// frees it all. Calls that the planner does not split allocate nothing.
func TestSplitScratchLifetime(t *testing.T) {
	c, f := splitHostPath(1)
	c.held.limit = 1
	for _, b := range []int{2, 3, 4} {
		if err := hostPathCall(c, goodArgs(b, 200, 1, 2)); err != nil {
			t.Fatal(err)
		}
	}
	// Each call has its tables and a slab of states (goodArgs places each
	// batch's outputs apart: three slabs); the evicted calls' tables and
	// slabs are parked.
	if len(f.live) != 6 || f.freed != 0 || f.syncs != 0 {
		t.Fatalf("after two evictions: %d live, %d freed, %d syncs; want 6, 0, 0", len(f.live), f.freed, f.syncs)
	}
	c.close()
	if len(f.live) != 0 || f.syncs != 1 {
		t.Fatalf("after close: %d live, %d syncs; want 0, 1", len(f.live), f.syncs)
	}

	c, f = splitHostPath(-1)
	if err := hostPathCall(c, goodArgs(1, 5000, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if len(f.live) != 0 {
		t.Fatalf("SegmentChunks -1 allocated scratch")
	}
}

// Packed sequences rewritten with other boundaries (same buffers, same
// chains) get a call of their own: the split tables hold token positions.
func TestSplitCallPerBoundaries(t *testing.T) {
	c, f := splitHostPath(2)
	a := varlenArgs()
	b := varlenArgs()
	b.CuSeqlens = []int{0, 1001, 1002, 3000, 4096} // the same chunk counts
	pa, _ := ValidateCore(a)
	pb, _ := ValidateCore(b)
	la, ta := chainChunks(pa)
	lb, tb := chainChunks(pb)
	if la != lb || ta != tb {
		t.Fatalf("test setup: chains %d/%d and %d/%d differ", la, ta, lb, tb)
	}
	for _, x := range []*CoreArgs{a, b} {
		if err := hostPathCall(c, x); err != nil {
			t.Fatal(err)
		}
	}
	// Two calls, each with its tables, sharing one slab of states (the same
	// outputs).
	if c.len() != 2 || len(f.live) != 3 {
		t.Fatalf("%d calls, %d scratch blocks; want 2 and 3", c.len(), len(f.live))
	}
	if live, _ := c.slabs.counts(slabSplit); live != 1 {
		t.Fatalf("%d slabs of split states, want 1", live)
	}
}

// Parked scratch is freed only after a synchronisation that succeeded: when
// it fails (a stream of the context is capturing), a launched graph may
// still be reading the memory, so it stays parked for the next drain.
func TestGraveyardKeepsScratchWhenSyncFails(t *testing.T) {
	f := newFakeScratch()
	f.syncErr = errors.New("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
	g := &scratchGraveyard{dev: f}
	var ps []driver.DevicePtr
	for range 3 {
		p, _ := f.Alloc(graveyardLimit / 2)
		ps = append(ps, p)
		g.park(p, graveyardLimit/2)
	}
	if f.syncs == 0 {
		t.Fatal("no drain past the limit")
	}
	if f.freed != 0 || len(f.live) != 3 {
		t.Fatalf("after failed synchronisations: %d freed, %d live; want 0 and 3", f.freed, len(f.live))
	}
	f.syncErr = nil
	g.drain()
	if f.freed != 3 || len(f.live) != 0 {
		t.Fatalf("after a good synchronisation: %d freed, %d live; want 3 and 0", f.freed, len(f.live))
	}
}

// A split call launched into the caller's own stream capture lives on in
// the caller's graph, which may be replayed at any time until Close (its
// kernel parameters point into the scratch): its scratch must survive the
// call's eviction and every drain of the graveyard, and go at Close.
func TestSplitScratchOfCapturedCallKeptUntilClose(t *testing.T) {
	c, f := splitHostPath(1)
	c.held.limit = 1
	a := goodArgs(2, 200, 1, 2)
	e, err := c.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	e.split.pin() // what launch does on a capturing stream
	captured, capturedStates := e.split.mem, e.split.slab.mem
	c.release(e)
	// Evict it, then push enough evicted scratch through to drain.
	for b := 3; f.syncs == 0; b++ {
		if b > 5000 {
			t.Fatal("no drain")
		}
		if err := hostPathCall(c, goodArgs(b, 200, 1, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := f.live[captured]; !ok {
		t.Fatal("the tables of a call captured into the caller's graph were freed on eviction")
	}
	if _, ok := f.live[capturedStates]; !ok {
		t.Fatal("the states (slab) of a call captured into the caller's graph were freed on eviction")
	}
	c.close()
	if len(f.live) != 0 {
		t.Fatalf("after close: %d live", len(f.live))
	}
}

// The call cache bounds the scratch its split calls hold, not only their
// count: an argument set per call (packed sequences whose boundaries
// change, shapes that vary) must not pile up device memory until the GPU
// runs out. The newest call always stays.
func TestSplitScratchBudget(t *testing.T) {
	c, f := splitHostPath(1)
	c.held.scratchLimit = 64 << 20
	var biggest int
	for b := 1; b <= 40; b++ {
		if err := hostPathCall(c, goodArgs(b, 640, 1, 2)); err != nil {
			t.Fatal(err)
		}
		// The device memory the cached calls hold: their tables and the
		// distinct slabs of states they use.
		live := 0
		slabs := map[*scratchSlab]bool{}
		c.held.mu.Lock()
		for _, e := range c.held.entries {
			if e.split != nil {
				live += e.split.memBytes
				if !slabs[e.split.slab] {
					slabs[e.split.slab] = true
					live += e.split.slab.bytes
				}
				biggest = max(biggest, e.split.scratchBytes())
			}
		}
		c.held.mu.Unlock()
		if live > c.held.scratchLimit+biggest {
			t.Fatalf("after %d calls the cache holds %d MB of scratch, over the %d MB limit", b, live>>20, c.held.scratchLimit>>20)
		}
	}
	if c.len() == 0 {
		t.Fatal("empty cache")
	}
	c.close()
	if len(f.live) != 0 {
		t.Fatalf("after close: %d live", len(f.live))
	}
}

// The call key holds a hash of the sequence boundaries; a split call found
// under a key whose boundaries differ (a hash collision, simulated here)
// is not used: the call gets an entry of its own, freed when released.
func TestSplitCallHashCollision(t *testing.T) {
	c, f := splitHostPath(2)
	a := varlenArgs()
	e, err := c.prepare(a)
	if err != nil || e.split == nil {
		t.Fatalf("%v, split %v", err, e.split)
	}
	c.release(e)
	e.split.seqs = []int{0, 7, 4096} // as if prepared for other boundaries with the same hash
	alone, err := c.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	if alone == e || !alone.evicted || !slices.Equal(alone.split.seqs, a.CuSeqlens) {
		t.Fatalf("collision served the cached entry (%v) or an unowned one", alone == e)
	}
	c.release(alone)
	c.grave.mu.Lock()
	parked := len(c.grave.mem)
	c.grave.mu.Unlock()
	if c.len() != 1 || parked != 1 {
		t.Fatalf("%d cached calls, %d parked scratch blocks; want 1 and 1 (the one-off's)", c.len(), parked)
	}
	c.close()
	if len(f.live) != 0 {
		t.Fatalf("%d scratch blocks live after close", len(f.live))
	}
}

// A serving loop of few-head packed batches, new boundaries on every call:
// each call gets its own segment tables, but the split states are one slab
// (the same outputs), allocated once, with no synchronisation.
func TestSplitCallsOfNewBoundariesShareOneSlab(t *testing.T) {
	c, f := splitHostPath(2)
	// A slab is allocated when a call needs more states than the one in use
	// holds (rounded up by slabSize): count those calls.
	want, held := 0, 0
	for i := range 50 {
		a := varlenArgs()
		a.CuSeqlens = []int{0, 1000 + 7*i, 1001 + 7*i, 3000, 4096}
		p, err := ValidateCore(a)
		if err != nil {
			t.Fatal(err)
		}
		output, transfer, _, _, _ := segmentTables(p, 2, false)
		if need := (len(transfer) + len(output)/2) * p.Hv * stateFloats * 4; need > held {
			want, held = want+1, slabSize(need)
		}
		if err := hostPathCall(c, a); err != nil {
			t.Fatal(err)
		}
	}
	if live, allocs := c.slabs.counts(slabSplit); live != 1 || allocs != want || want > 3 {
		t.Fatalf("%d slabs of states in use, %d allocated over 50 calls; want 1, %d (a few)", live, allocs, want)
	}
	if f.syncs != 0 {
		t.Fatalf("%d synchronisations", f.syncs)
	}
	c.close()
	if len(f.live) != 0 {
		t.Fatalf("%d scratch blocks live after close", len(f.live))
	}
}
