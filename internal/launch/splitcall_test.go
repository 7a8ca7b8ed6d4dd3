package launch

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/problem/problemtest"
	"github.com/gdnjit/gdn/internal/scratch"
	"github.com/gdnjit/gdn/internal/scratch/scratchtest"
	"github.com/gdnjit/gdn/kernsrc"
)

// splitHostPath is hostPath with scratch on a fake device, so that calls
// split (segChunks is the SegmentChunks knob).
func splitHostPath(segChunks int) (*callCache, *scratchtest.Device) {
	f := scratchtest.New()
	c := newCallCache(132, plan.Knobs{SegmentChunks: segChunks}, (&fakeEncoder{}).encode, nil, scratch.NewPool(f))
	return c, f
}

// close closes the cache and its pool, as Launcher.Close does.
func closeAll(c *callCache) {
	c.close()
	c.pool.Close()
}

// mustPlan is the plan c's knobs give p on c's SMs.
func mustPlan(t *testing.T, p problem.Problem, c *callCache) plan.Plan {
	t.Helper()
	pl, err := plan.Core(p, c.sms, c.knobs)
	if err != nil {
		t.Fatal(err)
	}
	return pl
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

// The ScanColumns knob reaches the split call:
// its plan, its scan's variant, grid and shared memory take the forced
// width whatever the planner would pick.
func TestSplitCallScanColumnsForced(t *testing.T) {
	for _, cols := range []int{8, 16, 32} {
		c, _ := splitHostPath(2)
		c.knobs.ScanColumns = cols
		e, err := c.prepare(problemtest.Core(3, 1000, 2, 4))
		if err != nil {
			t.Fatal(err)
		}
		sc := e.split
		if sc == nil || e.plan.ScanColumns != cols || sc.plan.ScanColumns != cols || sc.scan.grid[0] != uint32(problem.HeadDim/cols) ||
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
	a := problemtest.Core(3, 1000, 2, 4) // 16 chunks a sequence: 7 transfer segments each
	e, err := c.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release(e)
	sc := e.split
	if sc == nil || e.plan.SegmentChunks != 2 || e.plan.Segments != 21 {
		t.Fatalf("plan %v, split %v", e.plan, sc)
	}
	p, _ := problem.ValidateCore(a)
	output, transfer, first, _, _ := plan.SegmentTables(p, 2, false)
	want := append(append(append([]int32(nil), output...), transfer...), first...)
	checkUploadedTables(t, f, sc, want)
	tableBytes := (4*len(want) + 255) &^ 255
	bm := uintptr(sc.lease.Slab())
	starts := bm + uintptr(2*21*4*stateFloats*4)
	if f.Live[sc.lease.Table()] != tableBytes || f.Live[sc.lease.Slab()] != scratch.SlabSize(2*21*4*stateFloats*4+(3+21)*4*stateFloats*4) {
		t.Errorf("tables of %d bytes, states of %d", f.Live[sc.lease.Table()], f.Live[sc.lease.Slab()])
	}

	tr := readBlock(&sc.transfer.block)
	if tr.flags&kernsrc.HopperFlagTransfer == 0 || tr.flags&kernsrc.HopperFlagSegPairs == 0 ||
		tr.h0 != 0 || tr.ht != bm || tr.n != 21 || tr.nHt != 21 || tr.t != 3000 ||
		tr.cuSeqlens != uintptr(sc.lease.Table())+uintptr(4*len(output)) {
		t.Errorf("transfer block %+v", tr)
	}
	if sc.transfer.grid != [3]uint32{2 * 4 * 2 / uint32(sc.plan.Consumers), 21, 1} {
		t.Errorf("transfer grid %v", sc.transfer.grid)
	}
	out := readBlock(&sc.output.block)
	if out.flags&kernsrc.HopperFlagTransfer != 0 || out.flags&kernsrc.HopperFlagSegPairs == 0 ||
		out.h0 != starts || out.ht != a.Ht.Ptr || out.n != 24 || out.nHt != 3 || out.t != 3000 ||
		out.cuSeqlens != uintptr(sc.lease.Table()) {
		t.Errorf("output block %+v", out)
	}
	if cols, want := sc.plan.ScanColumns, mustPlan(t, p, c); cols != want.ScanColumns || e.plan.ScanColumns != cols || sc.scan.grid != [3]uint32{uint32(problem.HeadDim / cols), 4, 3} ||
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
	if n := len(f.Live); n != 2 {
		t.Errorf("%d scratch blocks after repeated calls, want 2 (tables, states)", n)
	}
}

// An early split call (the EarlyFirstSegment knob) also uploads the first
// segments' pairs and packs the early pass: the output kernel over each
// sequence's first segment from the caller's h0, its end states written
// past the start states (where the scan starts from); the transfer and
// output passes skip the first segments, and the transfer pass carries the
// flag that makes it a dependent of the early pass.
func TestSplitCallPreparedEarly(t *testing.T) {
	c, f := splitHostPath(2)
	c.knobs.EarlyFirstSegment = 1
	a := problemtest.Core(3, 1000, 2, 4) // 16 chunks a sequence: 8 segments, the first early, 6 transfer
	e, err := c.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release(e)
	sc := e.split
	if sc == nil || !e.plan.EarlyFirstSegment || !sc.plan.Early || e.plan.Segments != 18 {
		t.Fatalf("plan %v, split %v", e.plan, sc)
	}
	p, _ := problem.ValidateCore(a)
	output, transfer, first, firsts, err := plan.SegmentTables(p, 2, true)
	if err != nil || len(firsts) != 6 || len(output) != 2*21 {
		t.Fatalf("tables: %d output words, %d firsts, %v", len(output), len(firsts), err)
	}
	want := append(append(append(append([]int32(nil), output...), transfer...), first...), firsts...)
	checkUploadedTables(t, f, sc, want)
	bm := uintptr(sc.lease.Slab())
	starts := bm + uintptr(2*18*4*stateFloats*4)
	ends := starts + uintptr(21*4*stateFloats*4)
	if f.Live[sc.lease.Slab()] != scratch.SlabSize(2*18*4*stateFloats*4+21*4*stateFloats*4+3*4*stateFloats*4) {
		t.Errorf("states of %d bytes", f.Live[sc.lease.Slab()])
	}
	firstsAt := uintptr(sc.lease.Table()) + uintptr(4*(len(output)+len(transfer)+len(first)))
	ea := readBlock(&sc.early.block)
	if ea.flags&kernsrc.HopperFlagTransfer != 0 || ea.flags&kernsrc.HopperFlagSegPairs == 0 || ea.flags&kernsrc.HopperFlagAfterEarly != 0 || ea.flags&kernsrc.HopperFlagEarlyPass == 0 ||
		ea.h0 != a.H0.Ptr || ea.ht != ends || ea.n != 3 || ea.nHt != 3 || ea.t != 3000 || ea.cuSeqlens != firstsAt {
		t.Errorf("early block %+v", ea)
	}
	if sc.early.grid != [3]uint32{4 * 2 / uint32(sc.plan.Consumers), 3, 1} {
		t.Errorf("early grid %v", sc.early.grid)
	}
	tr := readBlock(&sc.transfer.block)
	if tr.flags&kernsrc.HopperFlagAfterEarly == 0 || tr.flags&kernsrc.HopperFlagTransfer == 0 ||
		tr.h0 != 0 || tr.ht != bm || tr.n != 18 || tr.nHt != 18 || tr.cuSeqlens != uintptr(sc.lease.Table())+uintptr(4*len(output)) {
		t.Errorf("transfer block %+v", tr)
	}
	out := readBlock(&sc.output.block)
	if out.flags&(kernsrc.HopperFlagAfterEarly|kernsrc.HopperFlagEarlyPass) != 0 || out.h0 != starts || out.ht != a.Ht.Ptr || out.n != 21 || out.nHt != 3 {
		t.Errorf("output block %+v", out)
	}
}

// checkUploadedTables checks that sc's tables went to the device as want,
// word for word.
func checkUploadedTables(t *testing.T, f *scratchtest.Device, sc *splitCall, want []int32) {
	t.Helper()
	got := f.Uploads[sc.lease.Table()]
	if len(got) != 4*len(want) {
		t.Fatalf("uploaded %d bytes, want %d", len(got), 4*len(want))
	}
	for i, w := range want {
		if g := int32(binary.LittleEndian.Uint32(got[4*i:])); g != w {
			t.Fatalf("table word %d: %d, want %d", i, g, w)
		}
	}
}

// Evicted split calls retire their scratch (a launched graph may still read
// it) instead of synchronising the context; Close synchronises once and
// frees it all. Calls that the planner does not split allocate nothing.
func TestSplitScratchLifetime(t *testing.T) {
	c, f := splitHostPath(1)
	c.held.limit = 1
	for _, b := range []int{2, 3, 4} {
		if err := hostPathCall(c, problemtest.Core(b, 200, 1, 2)); err != nil {
			t.Fatal(err)
		}
	}
	// Each call has its tables and a slab of states (problemtest.Core places each
	// batch's outputs apart: three slabs); the evicted calls' tables and
	// slabs are retired.
	if len(f.Live) != 6 || f.Freed != 0 || f.Syncs != 0 {
		t.Fatalf("after two evictions: %d live, %d freed, %d syncs; want 6, 0, 0", len(f.Live), f.Freed, f.Syncs)
	}
	closeAll(c)
	if len(f.Live) != 0 || f.Syncs != 1 {
		t.Fatalf("after close: %d live, %d syncs; want 0, 1", len(f.Live), f.Syncs)
	}

	c, f = splitHostPath(-1)
	if err := hostPathCall(c, problemtest.Core(1, 5000, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if len(f.Live) != 0 {
		t.Fatalf("SegmentChunks -1 allocated scratch")
	}
}

// Packed sequences rewritten with other boundaries (same buffers, same
// chains) get a call of their own: the split tables hold token positions.
func TestSplitCallPerBoundaries(t *testing.T) {
	c, f := splitHostPath(2)
	a := problemtest.Varlen()
	b := problemtest.Varlen()
	b.CuSeqlens = []int{0, 1001, 1002, 3000, 4096} // the same chunk counts
	pa, _ := problem.ValidateCore(a)
	pb, _ := problem.ValidateCore(b)
	la, ta := plan.ChainChunks(pa)
	lb, tb := plan.ChainChunks(pb)
	if la != lb || ta != tb {
		t.Fatalf("test setup: chains %d/%d and %d/%d differ", la, ta, lb, tb)
	}
	for _, x := range []*problem.Core{a, b} {
		if err := hostPathCall(c, x); err != nil {
			t.Fatal(err)
		}
	}
	// Two calls, each with its tables, sharing one slab of states (the same
	// outputs).
	if c.len() != 2 || len(f.Live) != 3 {
		t.Fatalf("%d calls, %d scratch blocks; want 2 and 3", c.len(), len(f.Live))
	}
	if live, _ := c.pool.SlabCounts(scratch.SplitStates); live != 1 {
		t.Fatalf("%d slabs of split states, want 1", live)
	}
}

// A split call launched into the caller's own stream capture lives on in
// the caller's graph, which may be replayed at any time until Close (its
// kernel parameters point into the scratch): its scratch must survive the
// call's eviction and every free of the retired memory, and go at Close.
func TestSplitScratchOfCapturedCallKeptUntilClose(t *testing.T) {
	c, f := splitHostPath(1)
	c.held.limit = 1
	a := problemtest.Core(2, 200, 1, 2)
	e, err := c.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	e.split.lease.Keep() // what launch does on a capturing stream
	captured, capturedStates := e.split.lease.Table(), e.split.lease.Slab()
	c.release(e)
	// Evict it, then push enough evicted scratch through to free it.
	for b := 3; f.Syncs == 0; b++ {
		if b > 5000 {
			t.Fatal("no free of the retired memory")
		}
		if err := hostPathCall(c, problemtest.Core(b, 200, 1, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := f.Live[captured]; !ok {
		t.Fatal("the tables of a call captured into the caller's graph were freed on eviction")
	}
	if _, ok := f.Live[capturedStates]; !ok {
		t.Fatal("the states (slab) of a call captured into the caller's graph were freed on eviction")
	}
	closeAll(c)
	if len(f.Live) != 0 {
		t.Fatalf("after close: %d live", len(f.Live))
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
		if err := hostPathCall(c, problemtest.Core(b, 640, 1, 2)); err != nil {
			t.Fatal(err)
		}
		// The device memory the cached calls hold: their tables and the
		// distinct slabs of states they use.
		live := 0
		slabs := map[driver.DevicePtr]bool{}
		c.held.mu.Lock()
		for _, e := range c.held.entries {
			if e.split != nil {
				table, slab := e.split.lease.Sizes()
				live += table
				if !slabs[e.split.lease.Slab()] {
					slabs[e.split.lease.Slab()] = true
					live += slab
				}
				biggest = max(biggest, e.split.lease.Bytes())
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
	closeAll(c)
	if len(f.Live) != 0 {
		t.Fatalf("after close: %d live", len(f.Live))
	}
}

// The call key holds a hash of the sequence boundaries; a split call found
// under a key whose boundaries differ (a hash collision, simulated here)
// is not used: the call gets an entry of its own, freed when released.
func TestSplitCallHashCollision(t *testing.T) {
	c, f := splitHostPath(2)
	a := problemtest.Varlen()
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
	waiting := c.pool.Waiting()
	if c.len() != 1 || waiting != 1 {
		t.Fatalf("%d cached calls, %d retired scratch blocks; want 1 and 1 (the one-off's)", c.len(), waiting)
	}
	closeAll(c)
	if len(f.Live) != 0 {
		t.Fatalf("%d scratch blocks live after close", len(f.Live))
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
		a := problemtest.Varlen()
		a.CuSeqlens = []int{0, 1000 + 7*i, 1001 + 7*i, 3000, 4096}
		p, err := problem.ValidateCore(a)
		if err != nil {
			t.Fatal(err)
		}
		output, transfer, _, _, _ := plan.SegmentTables(p, 2, false)
		if need := (len(transfer) + len(output)/2) * p.Hv * stateFloats * 4; need > held {
			want, held = want+1, scratch.SlabSize(need)
		}
		if err := hostPathCall(c, a); err != nil {
			t.Fatal(err)
		}
	}
	if live, allocs := c.pool.SlabCounts(scratch.SplitStates); live != 1 || allocs != want || want > 3 {
		t.Fatalf("%d slabs of states in use, %d allocated over 50 calls; want 1, %d (a few)", live, allocs, want)
	}
	if f.Syncs != 0 {
		t.Fatalf("%d synchronisations", f.Syncs)
	}
	closeAll(c)
	if len(f.Live) != 0 {
		t.Fatalf("%d scratch blocks live after close", len(f.Live))
	}
}

// A forced variant's tile is kept when the planner splits, and the prepared
// call gets exactly the plan plan.Core gives for those knobs.
func TestCallCacheForcedVariantSplits(t *testing.T) {
	f := scratchtest.New()
	k := plan.Knobs{Variant: "gdn_hopper_bf16_bv128"}
	c := newCallCache(132, k, (&fakeEncoder{}).encode, nil, scratch.NewPool(f))
	defer closeAll(c)
	a := problemtest.Core(1, 32768, 2, 8)
	e, err := c.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release(e)
	p, _ := problem.ValidateCore(a)
	want := mustPlan(t, p, c)
	if e.plan.String() != want.String() || want.SegmentChunks == 0 || want.Variant.Name != k.Variant {
		t.Errorf("prepared call's plan %v, plan.Core's %v (want %s, split)", e.plan, want, k.Variant)
	}
}
