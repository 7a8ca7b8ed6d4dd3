package launch

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/scratch"
	"github.com/gdnjit/gdn/kernsrc"
)

// splitCall is the prepared form of a split plan (plan.Split): the
// parameter blocks of its three launches and its scratch memory, owned by
// one callEntry. Two calls with the same key running at once on two
// streams share the scratch; they also share every output buffer, so such
// calls already race on o unless the caller orders them.
type splitCall struct {
	plan     plan.Split
	seqs     []int          // the boundaries its tables were built from (the call key holds only their hash)
	lease    *scratch.Lease // the segment tables; B, M and the start states in the outputs' slab
	transfer struct {
		block  [kernsrc.HopperParamsBytes]byte
		params *driver.KernelParams
		grid   [3]uint32
	}
	// early: the output pass of each sequence's first segment, launched
	// first (plan.Early only; params nil otherwise).
	early struct {
		block  [kernsrc.HopperParamsBytes]byte
		params *driver.KernelParams
		grid   [3]uint32
	}
	output struct {
		block  [kernsrc.HopperParamsBytes]byte
		params *driver.KernelParams
		grid   [3]uint32
	}
	scan struct {
		params *driver.KernelParams
		grid   [3]uint32
	}
	xferVariant kernsrc.Variant // the transfer pass's kernel
	xferBlock   uint32          // its threads and shared memory (its own tile's)
	xferSmem    int
	scanVariant kernsrc.Variant // the scan's kernel (the plan's CTA width) and its shared memory
	scanSmem    int
	xferFn      atomic.Pointer[driver.Function]
	scanFn      atomic.Pointer[driver.Function]
}

// stateFloats is one 128 x 128 fp32 state.
const stateFloats = problem.HeadDim * problem.HeadDim

// newSplitCall lays out and uploads the segment tables of sp, takes the
// transfer and start states from the slab of the call's outputs (the
// kernels alone touch them, in stream order) and packs the three launches.
func newSplitCall(pool *scratch.Pool, encode tiledEncoder,
	pack func([]byte) (*driver.KernelParams, error), key hopperCall, p problem.Problem, sp plan.Split) (*splitCall, error) {
	output, transfer, first, firsts, err := plan.SegmentTables(p, sp.SegChunks, sp.Early)
	if err != nil {
		return nil, err
	}
	nSeg := len(output) / 2
	P := len(transfer) / 2
	if P != sp.Transfer {
		return nil, fmt.Errorf("gdn: split plan counted %d transfer segments, its tables %d", sp.Transfer, P)
	}
	tables := append(append(append(append([]int32(nil), output...), transfer...), first...), firsts...)
	// With checkpoints, each output and early row's checkpoint base
	// (kernsrc.HopperParams.CkptRows) after the tables above.
	var ckOut, ckEarly uintptr
	if key.ckpt != 0 {
		ckOut = uintptr(4 * len(tables))
		tables = append(tables, ckptBases(p, output)...)
		ckEarly = uintptr(4 * len(tables))
		tables = append(tables, ckptBases(p, firsts)...)
	}
	bmBytes := 2 * P * p.Hv * stateFloats * 4
	startBytes := nSeg * p.Hv * stateFloats * 4
	earlyBytes := len(firsts) / 2 * p.Hv * stateFloats * 4 // the early pass's end states
	sc := &splitCall{plan: sp, seqs: slices.Clone(p.Seqs)}
	if sc.xferVariant, err = kernsrc.HopperTransferVariant(plan.CoreDtype(p), sp.XferConsumers); err != nil {
		return nil, err
	}
	sc.xferBlock, sc.xferSmem = uint32(kernsrc.HopperThreads(plan.CoreDtype(p), sp.XferConsumers, true)), kernsrc.HopperSharedBytes(plan.CoreDtype(p), sp.XferConsumers)
	scanVariant := kernsrc.ScanVariant
	if key.scanFlags() != 0 && !sp.Early { // the scan starts from the caller's h0, or the pool
		scanVariant = kernsrc.ScanStatesVariant
	}
	if sc.scanVariant, err = scanVariant(sp.ScanColumns); err != nil {
		return nil, err
	}
	sc.scanSmem = kernsrc.ScanSharedBytes(sp.ScanColumns)
	sc.lease, err = pool.Allocate(tables, scratch.Key{Kind: scratch.SplitStates, O: key.o, Ht: key.ht}, bmBytes+startBytes+earlyBytes)
	if err != nil {
		if errors.Is(err, gdnerr.ErrClosed) {
			return nil, err
		}
		return nil, fmt.Errorf("gdn: scratch of a split plan: %w", err)
	}
	outputPairs := uintptr(sc.lease.Table())
	transferPairs := outputPairs + uintptr(4*len(output))
	firstPtr := transferPairs + uintptr(4*len(transfer))
	firstsPtr := firstPtr + uintptr(4*len(first))
	bm := uintptr(sc.lease.Slab())
	starts := bm + uintptr(bmBytes)
	// The scan starts each sequence from h0, or under an early plan from the
	// end state of its first segment.
	scanStart, earlyEnds := key.h0, starts+uintptr(startBytes)
	if sp.Early {
		scanStart = earlyEnds
	}

	// Both kernel passes see the tokens as packed segments of one batch row.
	seg := key
	seg.t, seg.b = key.b*key.t, 1
	seg.seqlensDtype = dtype.Int32
	tiles := uint32(problem.HeadDim / kernsrc.HopperTileWidth(sp.Consumers))
	xferTiles := uint32(problem.HeadDim / kernsrc.HopperTileWidth(sp.XferConsumers))

	seg.n, seg.cuSeqlens = P, transferPairs
	hp, err := seg.hopperParams(encode)
	if err != nil {
		sc.free()
		return nil, err
	}
	hp.Flags |= kernsrc.HopperFlagSegPairs | kernsrc.HopperFlagTransfer
	if sp.MFirst {
		hp.Flags |= kernsrc.HopperFlagMFirst
	}
	if sp.Early {
		hp.Flags |= kernsrc.HopperFlagAfterEarly
	}
	// The transfer pass reads no start state and writes only its own.
	hp.Flags &^= kernsrc.HopperStateFlags
	hp.H0, hp.Ht, hp.NHt, hp.Slots, hp.PoolSlots = 0, bm, int32(P), 0, 0
	hp.Ckpt, hp.CkChunks, hp.CkRows = 0, 0, 0
	hp.Pack(&sc.transfer.block)
	sc.transfer.grid = [3]uint32{2 * uint32(p.Hv) * xferTiles, uint32(P), 1}

	seg.n, seg.cuSeqlens = nSeg, outputPairs
	if hp, err = seg.hopperParams(encode); err != nil {
		sc.free()
		return nil, err
	}
	// The output pass starts from the scan's states (its own) and writes
	// the caller's ht, or the pool.
	hp.Flags |= kernsrc.HopperFlagSegPairs | kernsrc.HopperFlagH0Own
	hp.H0, hp.Ht, hp.NHt = starts, key.ht, int32(p.N)
	if key.ckpt != 0 {
		hp.CkptRows = outputPairs + ckOut
	}
	hp.Pack(&sc.output.block)
	sc.output.grid = [3]uint32{uint32(p.Hv) * tiles, uint32(nSeg), 1}

	if sp.Early {
		seg.n, seg.cuSeqlens = p.N, firstsPtr
		if hp, err = seg.hopperParams(encode); err != nil {
			sc.free()
			return nil, err
		}
		// The early pass starts from the caller's h0, or the pool, and
		// writes its end states to its own.
		hp.Flags |= kernsrc.HopperFlagSegPairs | kernsrc.HopperFlagEarlyPass | kernsrc.HopperFlagHtOwn
		hp.H0, hp.Ht, hp.NHt = key.h0, earlyEnds, int32(p.N)
		if key.ckpt != 0 {
			hp.CkptRows = outputPairs + ckEarly
		}
		hp.Pack(&sc.early.block)
		sc.early.grid = [3]uint32{uint32(p.Hv) * tiles, uint32(p.N), 1}
	}

	sc.scan.grid = [3]uint32{uint32(problem.HeadDim / sp.ScanColumns), uint32(p.Hv), uint32(p.N)}
	if pack != nil {
		if sc.transfer.params, err = pack(sc.transfer.block[:]); err == nil {
			sc.output.params, err = pack(sc.output.block[:])
		}
		if err == nil && sp.Early {
			sc.early.params, err = pack(sc.early.block[:])
		}
		if err == nil {
			sp := kernsrc.ScanParams{BM: bm, H0: scanStart, Starts: starts, First: firstPtr, P: int32(P), Hv: int32(p.Hv), N: int32(p.N)}
			if !sc.plan.Early { // the scan starts from the caller's h0, or the pool
				sp.Flags, sp.Slots, sp.PoolSlots = key.scanFlags(), key.slots, int32(key.poolS)
			}
			var block [kernsrc.ScanParamsBytes]byte
			sp.Pack(&block)
			sc.scan.params, err = driver.NewKernelParams(packedArgs(block[:], kernsrc.ScanParamFields()))
		}
		if err != nil {
			sc.free()
			return nil, fmt.Errorf("gdn: kernel parameters: %w", err)
		}
	}
	return sc, nil
}

// ckptBases returns, for each (begin, end) token pair of a pass's rows,
// its checkpoint base start*ck + c0 (hopper_state.cuh): start the first
// checkpoint row of the pair's sequence, c0 the pair's first chunk within
// it, ck the interval in chunks.
func ckptBases(p problem.Problem, pairs []int32) []int32 {
	ck := p.CkptEvery / problem.ChunkLen
	starts := make([]int, p.N+1)
	for n := range p.N {
		b, e := p.SeqBounds(n)
		starts[n+1] = starts[n] + (e-b)/p.CkptEvery
	}
	out := make([]int32, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		b := int(pairs[i])
		// The sequence whose tokens hold b: the first that ends past it (a
		// pair at the very end, or an empty sequence's, has no checkpoint
		// whatever its base).
		n := sort.Search(p.N, func(n int) bool { _, e := p.SeqBounds(n); return e > b })
		if n == p.N {
			out = append(out, int32(starts[p.N]*ck))
			continue
		}
		sb, _ := p.SeqBounds(n)
		out = append(out, int32(starts[n]*ck+(b-sb)/problem.ChunkLen))
	}
	return out
}

// free releases the call's parameters and its scratch (freed once no
// launch can read it: see scratch.Lease.Release).
func (sc *splitCall) free() {
	if sc == nil {
		return
	}
	sc.lease.Release()
	sc.transfer.params.Free()
	sc.output.params.Free()
	sc.early.params.Free()
	sc.scan.params.Free()
}

// enqueue launches the passes on s: the early pass (an early plan only),
// transfer, scan, output. fn is the Hopper kernel of the plan's tile (the
// output and early passes).
func (sc *splitCall) enqueue(ctx *driver.Context, fn *driver.Function, pl plan.Plan, s *driver.Stream) error {
	b := driver.Dim3{X: pl.Block[0], Y: 1, Z: 1}
	dim := func(g [3]uint32) driver.Dim3 { return driver.Dim3{X: g[0], Y: g[1], Z: g[2]} }
	xferBlock := driver.Dim3{X: sc.xferBlock, Y: 1, Z: 1}
	var err error
	if sc.plan.Early {
		// The early pass is an ordinary launch (it reads what came before
		// the call); the transfer pass depends on it only for its CTAs'
		// placement: its CTAs start on the SMs the early CTAs leave once
		// every early CTA has started, and never wait for it but at the
		// end of its last CTA (kernsrc.HopperFlagAfterEarly). (Two calls,
		// not a method value: that would allocate on every launch.)
		if err := ctx.LaunchParams(fn, dim(sc.early.grid), b, pl.SharedBytes, s, sc.early.params); err != nil {
			return fmt.Errorf("gdn: launch %s (early pass): %w", pl.Variant.Name, err)
		}
		err = ctx.LaunchParamsDependent(sc.xferFn.Load(), dim(sc.transfer.grid), xferBlock, sc.xferSmem, s, sc.transfer.params)
	} else {
		err = ctx.LaunchParams(sc.xferFn.Load(), dim(sc.transfer.grid), xferBlock, sc.xferSmem, s, sc.transfer.params)
	}
	if err != nil {
		return fmt.Errorf("gdn: launch %s: %w", sc.xferVariant.Name, err)
	}
	// The scan and the output pass are dependent launches: each may be placed
	// while the pass before it drains, and waits (griddepcontrol.wait) only
	// where it reads that pass's results: the scan before its first load, the
	// output pass's consumers before their start state (its aux group loads
	// and prepares the first chunks meanwhile). The call's first pass (the
	// early or the transfer pass) is an ordinary launch, so a call never
	// overlaps the work before it.
	if err := ctx.LaunchParamsDependent(sc.scanFn.Load(), dim(sc.scan.grid), driver.Dim3{X: kernsrc.ScanThreads, Y: 1, Z: 1}, sc.scanSmem, s, sc.scan.params); err != nil {
		return fmt.Errorf("gdn: launch %s: %w", sc.scanVariant.Name, err)
	}
	if err := ctx.LaunchParamsDependent(fn, dim(sc.output.grid), b, pl.SharedBytes, s, sc.output.params); err != nil {
		return fmt.Errorf("gdn: launch %s (output pass): %w", pl.Variant.Name, err)
	}
	return nil
}
