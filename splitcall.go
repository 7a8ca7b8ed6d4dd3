package gdn

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/kernsrc"
)

// scratchDevice is what a split call needs of the device beyond launches:
// its scratch memory (segment tables, transfer states, start states).
// contextScratch implements it on a driver.Context; the CPU tests use a
// fake, and a callCache without one never splits.
type scratchDevice interface {
	RelaxedCapture(f func() error) error
	Alloc(bytes int) (driver.DevicePtr, error)
	// Upload copies host bytes to the device and waits for them.
	Upload(dst driver.DevicePtr, src unsafe.Pointer, bytes int) error
	Free(p driver.DevicePtr) error
	SynchronizeOrWait() error
}

// contextScratch is scratchDevice on a driver.Context.
type contextScratch struct{ *driver.Context }

// Upload copies on a stream of its own, which syncs with nothing else: a
// copy on the legacy stream would break a capture on any blocking stream of
// the caller's.
func (c contextScratch) Upload(dst driver.DevicePtr, src unsafe.Pointer, bytes int) error {
	s, err := c.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	if err := c.CopyToDeviceAsync(dst, src, bytes, s); err != nil {
		return err
	}
	return s.Synchronize()
}

// scratchGraveyard holds the scratch memory of evicted split calls until it
// can be freed safely. A launched graph may still be reading it, and making
// sure it is not takes a context synchronisation, which fails (and breaks
// the capture) while any stream of the context captures a graph: a caller
// capturing its own graph when a prepared call is evicted must not see
// that. So evicted scratch is parked, and freed after one synchronisation
// once graveyardLimit bytes have gathered, and at Close.
//
// Scratch of a call launched into a caller's own stream capture is another
// matter: the caller's graph holds the call's kernel parameters, which point
// into the scratch, and may be replayed at any time until the Runtime
// closes (as it may for an unsplit call, whose parameters the graph copies).
// Such scratch is kept until Close whatever the synchronisations.
type scratchGraveyard struct {
	dev   scratchDevice
	mu    sync.Mutex
	mem   []parkedScratch
	bytes int
	kept  []parkedScratch // of calls captured into callers' graphs: freed at Close
}

// parkedScratch is one evicted call's scratch.
type parkedScratch struct {
	p     driver.DevicePtr
	bytes int
}

// graveyardLimit is the evicted scratch kept before it is freed.
const graveyardLimit = 256 << 20

// park takes an evicted call's scratch; it frees everything parked once
// the limit is passed.
func (g *scratchGraveyard) park(p driver.DevicePtr, bytes int) {
	g.mu.Lock()
	g.mem = append(g.mem, parkedScratch{p, bytes})
	g.bytes += bytes
	full := g.bytes >= graveyardLimit
	g.mu.Unlock()
	if full {
		g.drain()
	}
}

// keep takes an evicted call's scratch that a caller's graph may still use:
// it is freed at Close only.
func (g *scratchGraveyard) keep(p driver.DevicePtr, bytes int) {
	g.mu.Lock()
	g.kept = append(g.kept, parkedScratch{p, bytes})
	g.mu.Unlock()
}

// close frees everything parked and kept (the Runtime is closing: no graph
// of a caller may be launched any more).
func (g *scratchGraveyard) close() {
	g.mu.Lock()
	g.mem, g.kept = append(g.mem, g.kept...), nil
	g.mu.Unlock()
	g.drain()
}

// drain waits until no launch can read parked scratch and frees it. When
// the synchronisation fails (a stream of the context kept capturing), a
// launch may still read the scratch: it stays parked for a later drain.
func (g *scratchGraveyard) drain() {
	g.mu.Lock()
	mem := g.mem
	g.mem, g.bytes = nil, 0
	g.mu.Unlock()
	if len(mem) == 0 {
		return
	}
	if err := g.dev.SynchronizeOrWait(); err != nil {
		g.mu.Lock()
		for _, m := range mem {
			g.bytes += m.bytes
		}
		g.mem = append(mem, g.mem...)
		g.mu.Unlock()
		return
	}
	g.dev.RelaxedCapture(func() error {
		for _, m := range mem {
			g.dev.Free(m.p)
		}
		return nil
	})
}

// splitCall is the prepared form of a split plan (split.go): the parameter
// blocks of its three launches and its scratch memory, owned by one
// callEntry. Two calls with the same key running at once on two streams
// share the scratch; they also share every output buffer, so such calls
// already race on o unless the caller orders them.
type splitCall struct {
	plan     splitPlan
	seqs     []int // the boundaries its tables were built from (the call key holds only their hash)
	dev      scratchDevice
	grave    *scratchGraveyard
	mem      driver.DevicePtr // the segment tables
	memBytes int
	slabs    *scratchSlabs
	slab     *scratchSlab // B, M and the start states; held until free
	slabNeed int          // the bytes of it the call uses
	slabKey  slabKey
	transfer struct {
		block  [kernsrc.HopperParamsBytes]byte
		params *driver.KernelParams
		grid   [3]uint32
	}
	// early: the output pass of each sequence's first segment, launched
	// first (plan.early only; params nil otherwise).
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
	// pinned: launched on a stream that was capturing (the caller's
	// graph), so the scratch is kept until Close (scratchGraveyard).
	pinned atomic.Bool
}

// stateFloats is one 128 x 128 fp32 state.
const stateFloats = HeadDim * HeadDim

// pin marks the call as launched into a caller's stream capture: its
// scratch, slab included, is kept until Close.
func (sc *splitCall) pin() {
	sc.pinned.Store(true)
	sc.slabs.pin(sc.slab)
}

// scratchBytes is what the call needs: its tables and its share of the
// slab (its own plan's states), as fullCall.scratchBytes.
func (sc *splitCall) scratchBytes() int { return sc.memBytes + sc.slabNeed }

// newSplitCall lays out and uploads the segment tables of sp, takes the
// transfer and start states from the slab of the call's outputs
// (fullscratch.go: the kernels alone touch them, in stream order) and packs
// the three launches. Allocation runs in relaxed capture mode: another
// goroutine may be capturing a graph.
func newSplitCall(dev scratchDevice, grave *scratchGraveyard, slabs *scratchSlabs, encode tiledEncoder,
	pack func([]byte) (*driver.KernelParams, error), key hopperCall, p Problem, sp splitPlan) (*splitCall, error) {
	output, transfer, first, firsts, err := segmentTables(p, sp.segChunks, sp.early)
	if err != nil {
		return nil, err
	}
	nSeg := len(output) / 2
	P := len(transfer) / 2
	if P != sp.transfer {
		return nil, fmt.Errorf("gdn: split plan counted %d transfer segments, its tables %d", sp.transfer, P)
	}
	tables := append(append(append(append([]int32(nil), output...), transfer...), first...), firsts...)
	tableBytes := (4*len(tables) + 255) &^ 255
	bmBytes := 2 * P * p.Hv * stateFloats * 4
	startBytes := nSeg * p.Hv * stateFloats * 4
	earlyBytes := len(firsts) / 2 * p.Hv * stateFloats * 4 // the early pass's end states
	sc := &splitCall{plan: sp, dev: dev, seqs: slices.Clone(p.Seqs), slabs: slabs,
		slabKey: slabKey{kind: slabSplit, o: key.o, ht: key.ht}} // grave set once prepared: until then free frees
	if sc.xferVariant, err = kernsrc.HopperTransferVariant(coreDtype(p), sp.xferConsumers); err != nil {
		return nil, err
	}
	sc.xferBlock, sc.xferSmem = uint32(kernsrc.HopperThreads(coreDtype(p), sp.xferConsumers, true)), kernsrc.HopperSharedBytes(coreDtype(p), sp.xferConsumers)
	if sc.scanVariant, err = kernsrc.ScanVariant(sp.scanColumns); err != nil {
		return nil, err
	}
	sc.scanSmem = kernsrc.ScanSharedBytes(sp.scanColumns)
	err = dev.RelaxedCapture(func() error {
		var err error
		sc.memBytes = tableBytes
		if sc.mem, err = dev.Alloc(sc.memBytes); err != nil {
			return err
		}
		return dev.Upload(sc.mem, unsafe.Pointer(&tables[0]), 4*len(tables))
	})
	if err != nil {
		sc.free()
		return nil, fmt.Errorf("gdn: segment tables of a split plan (%d bytes): %w", tableBytes, err)
	}
	sc.slabNeed = bmBytes + startBytes + earlyBytes
	if sc.slab, err = slabs.acquire(sc.slabKey, sc.slabNeed); err != nil {
		sc.free()
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		return nil, fmt.Errorf("gdn: states of a split plan (%d bytes): %w", sc.slabNeed, err)
	}
	outputPairs := uintptr(sc.mem)
	transferPairs := outputPairs + uintptr(4*len(output))
	firstPtr := transferPairs + uintptr(4*len(transfer))
	firstsPtr := firstPtr + uintptr(4*len(first))
	bm := uintptr(sc.slab.mem)
	starts := bm + uintptr(bmBytes)
	// The scan starts each sequence from h0, or under an early plan from the
	// end state of its first segment.
	scanStart, earlyEnds := key.h0, starts+uintptr(startBytes)
	if sp.early {
		scanStart = earlyEnds
	}

	// Both kernel passes see the tokens as packed segments of one batch row.
	seg := key
	seg.t, seg.b = key.b*key.t, 1
	seg.seqlensDtype = Int32
	tiles := uint32(HeadDim / kernsrc.HopperTileWidth(sp.consumers))
	xferTiles := uint32(HeadDim / kernsrc.HopperTileWidth(sp.xferConsumers))

	seg.n, seg.cuSeqlens = P, transferPairs
	hp, err := seg.hopperParams(encode)
	if err != nil {
		sc.free()
		return nil, err
	}
	hp.Flags |= kernsrc.HopperFlagSegPairs | kernsrc.HopperFlagTransfer
	if sp.mFirst {
		hp.Flags |= kernsrc.HopperFlagMFirst
	}
	if sp.early {
		hp.Flags |= kernsrc.HopperFlagAfterEarly
	}
	hp.H0, hp.Ht, hp.NHt = 0, bm, int32(P)
	hp.Pack(&sc.transfer.block)
	sc.transfer.grid = [3]uint32{2 * uint32(p.Hv) * xferTiles, uint32(P), 1}

	seg.n, seg.cuSeqlens = nSeg, outputPairs
	if hp, err = seg.hopperParams(encode); err != nil {
		sc.free()
		return nil, err
	}
	hp.Flags |= kernsrc.HopperFlagSegPairs
	hp.H0, hp.Ht, hp.NHt = starts, key.ht, int32(p.N)
	hp.Pack(&sc.output.block)
	sc.output.grid = [3]uint32{uint32(p.Hv) * tiles, uint32(nSeg), 1}

	if sp.early {
		seg.n, seg.cuSeqlens = p.N, firstsPtr
		if hp, err = seg.hopperParams(encode); err != nil {
			sc.free()
			return nil, err
		}
		hp.Flags |= kernsrc.HopperFlagSegPairs | kernsrc.HopperFlagEarlyPass
		hp.H0, hp.Ht, hp.NHt = key.h0, earlyEnds, int32(p.N)
		hp.Pack(&sc.early.block)
		sc.early.grid = [3]uint32{uint32(p.Hv) * tiles, uint32(p.N), 1}
	}

	sc.scan.grid = [3]uint32{uint32(HeadDim / sp.scanColumns), uint32(p.Hv), uint32(p.N)}
	if pack != nil {
		if sc.transfer.params, err = pack(sc.transfer.block[:]); err == nil {
			sc.output.params, err = pack(sc.output.block[:])
		}
		if err == nil && sp.early {
			sc.early.params, err = pack(sc.early.block[:])
		}
		if err == nil {
			sp := kernsrc.ScanParams{BM: bm, H0: scanStart, Starts: starts, First: firstPtr, P: int32(P), Hv: int32(p.Hv), N: int32(p.N)}
			var block [kernsrc.ScanParamsBytes]byte
			sp.Pack(&block)
			sc.scan.params, err = driver.NewKernelParams(packedArgs(block[:], kernsrc.ScanParamFields()))
		}
		if err != nil {
			sc.free()
			return nil, fmt.Errorf("gdn: kernel parameters: %w", err)
		}
	}
	sc.grave = grave
	return sc, nil
}

// free releases the call's parameters and hands its scratch to the
// graveyard (a launched graph may still read it; a caller's graph that
// captured the call may be replayed until Close); a call whose preparation
// failed (no graveyard yet: it never launched) frees the scratch at once.
func (sc *splitCall) free() {
	if sc == nil {
		return
	}
	if sc.slab != nil {
		sc.slabs.release(sc.slabKey, sc.slab)
		sc.slab = nil
	}
	if sc.mem != 0 {
		if sc.grave != nil && sc.pinned.Load() {
			sc.grave.keep(sc.mem, sc.memBytes)
		} else if sc.grave != nil {
			sc.grave.park(sc.mem, sc.memBytes)
		} else {
			sc.dev.RelaxedCapture(func() error { return sc.dev.Free(sc.mem) })
		}
		sc.mem = 0
	}
	sc.transfer.params.Free()
	sc.output.params.Free()
	sc.early.params.Free()
	sc.scan.params.Free()
}

// enqueue launches the passes on s: the early pass (an early plan only),
// transfer, scan, output. fn is the Hopper kernel of the plan's tile (the
// output and early passes).
func (sc *splitCall) enqueue(ctx *driver.Context, fn *driver.Function, plan Plan, s *driver.Stream) error {
	b := driver.Dim3{X: plan.Block[0], Y: 1, Z: 1}
	dim := func(g [3]uint32) driver.Dim3 { return driver.Dim3{X: g[0], Y: g[1], Z: g[2]} }
	xferBlock := driver.Dim3{X: sc.xferBlock, Y: 1, Z: 1}
	var err error
	if sc.plan.early {
		// The early pass is an ordinary launch (it reads what came before
		// the call); the transfer pass depends on it only for its CTAs'
		// placement: its CTAs start on the SMs the early CTAs leave once
		// every early CTA has started, and never wait for it but at the
		// end of its last CTA (kernsrc.HopperFlagAfterEarly). (Two calls,
		// not a method value: that would allocate on every launch.)
		if err := ctx.LaunchParams(fn, dim(sc.early.grid), b, plan.SharedBytes, s, sc.early.params); err != nil {
			return fmt.Errorf("gdn: launch %s (early pass): %w", plan.Variant.Name, err)
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
	if err := ctx.LaunchParamsDependent(fn, dim(sc.output.grid), b, plan.SharedBytes, s, sc.output.params); err != nil {
		return fmt.Errorf("gdn: launch %s (output pass): %w", plan.Variant.Name, err)
	}
	return nil
}
