package gdn

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/kernsrc"
)

// FullArgs are the operands of the full forward (docs/SPEC.md, "Operations";
// FLA's chunk_gated_delta_rule): what a model layer produces, with the
// chunk-local cumulative sum and A computed inside. Shapes and dtypes are
// those of CoreArgs except:
//
//	G       [B, T, Hv]  FP32: the per-token log-gate (natural log, <= 0 in
//	                    real models); with GateInKernel, the gate's raw input a
//	ALog    [Hv]        FP32, GateInKernel only: g = -exp(ALog) softplus(a + DtBias)
//	DtBias  [Hv]        FP32, GateInKernel only
//
// and there is no A. L2Norm normalises every 128-vector of q and k to
// x / sqrt(sum(x^2) + 1e-6) first (FLA's use_qk_l2norm_in_kernel), rounded
// to fp16 (FLA rounds back to the input dtype: on bf16 inputs, fp16's three
// more bits for entries of at most 1 take about 40% off o's error).
type FullArgs struct {
	Q, K, V, G, Beta Tensor
	ALog, DtBias     Tensor
	H0               Tensor
	O, Ht            Tensor
	CuSeqlens        []int
	CuSeqlensDevice  Tensor
	Scale            float32 // 0 means 1/sqrt(128)
	L2Norm           bool
	GateInKernel     bool
}

// ValidateFull checks the arguments of a full forward as ValidateCore does
// (errors wrap ErrInvalidArgument and name the argument) and returns the
// problem size (its ADtype is FP16: the A2 computed inside).
func ValidateFull(a *FullArgs) (Problem, error) {
	if a == nil {
		return Problem{}, argErrorf("args", "nil *FullArgs")
	}
	core := a.coreTemplate(a.Q, a.K, 0, 0)
	p, err := ValidateCore(&core)
	if err != nil {
		return p, err
	}
	if a.GateInKernel {
		for _, x := range []struct {
			name string
			t    Tensor
		}{{"a_log", a.ALog}, {"dt_bias", a.DtBias}} {
			if err := checkTensor(x.name, x.t, FP32, shapeOf(p.Hv), 4); err != nil {
				return p, err
			}
		}
		// The gate's parameters are inputs too (checkNoOverlap has the rest).
		outs := [...]span{spanOf(a.O), {}}
		if p.HasHt {
			outs[1] = spanOf(a.Ht)
		}
		for i, in := range [...]span{spanOf(a.ALog), spanOf(a.DtBias)} {
			for j, out := range outs {
				if out.overlaps(in) {
					return p, overlapError([...]string{"o", "ht"}[j], out, [...]string{"a_log", "dt_bias"}[i], in)
				}
			}
		}
	} else if a.ALog.Present() || a.DtBias.Present() {
		return p, argErrorf("a_log", "A_log and dt_bias are given but GateInKernel is off")
	}
	return p, nil
}

// coreTemplate is the core forward of a with its q, k, g_cumsum and A
// buffers (A2 = A diag(beta), fp16 [B, T, Hv, 64], as gdn_prep_chunk writes
// it); validation passes a stand-in address for A (and g stands for
// g_cumsum), whose shape follows q and v.
func (a *FullArgs) coreTemplate(q, k Tensor, gcum, aPtr uintptr) CoreArgs {
	g := a.G
	if gcum != 0 {
		g = Tensor{Ptr: gcum, Bytes: a.G.Bytes, Dtype: FP32, Shape: a.G.Shape}
	}
	A := Tensor{Ptr: aPtr, Dtype: FP16}
	if len(a.Q.Shape) == 4 && len(a.V.Shape) == 4 {
		A.Shape = []int{a.Q.Shape[0], a.Q.Shape[1], a.V.Shape[2], ChunkLen}
		A.Bytes = A.Elems() * 2
	}
	if aPtr == 0 {
		A.Ptr = 1 << 12 // a stand-in: validation checks A's shape, not its memory
	}
	return CoreArgs{Q: q, K: k, V: a.V, G: g, Beta: a.Beta, A: A, H0: a.H0, O: a.O, Ht: a.Ht,
		CuSeqlens: a.CuSeqlens, CuSeqlensDevice: a.CuSeqlensDevice, Scale: a.Scale, aPrepared: true}
}

// fullKey is everything a prepared full call depends on.
type fullKey struct {
	q, k, v, g, beta, aLog, dtBias, h0, ht, o, cuSeqlens uintptr
	b, t, hq, hv, n                                      int
	dtype, betaDtype, seqlensDtype                       Dtype
	scale                                                uint32
	l2norm, gate                                         bool
	seqsHash                                             uint64
}

// fullCall is a prepared full call: its scratch (its own chunk table; the
// cumulative gates, A and the normalised q and k in the slab it shares with
// the calls that write the same outputs, fullscratch.go), the packed
// arguments of the prep kernel and the core forward on the scratch.
type fullCall struct {
	key      fullKey
	seqs     []int // the boundaries its chunk table was built from (the key holds their hash)
	core     CoreArgs
	dev      scratchDevice
	grave    *scratchGraveyard
	mem      driver.DevicePtr // the chunk table
	memBytes int
	slabs    *scratchSlabs
	slab     *scratchSlab    // held until free
	slabNeed int             // the bytes of it the call uses
	variant  kernsrc.Variant // the chunk kernel
	fn       atomic.Pointer[driver.Function]
	prep     *prepLaunch // the chunk kernel's launch
	// pinned: launched on a stream that was capturing (the caller's graph
	// points into the scratch), so the scratch is kept until Close.
	pinned atomic.Bool

	holdState // guarded by the cache's heldCache.mu
}

// prepLaunch is the prep kernel's launch of a full call.
type prepLaunch struct {
	grid, block [3]uint32
	shared      int
	params      *driver.KernelParams
}

// fullCache holds a Runtime's prepared full calls (see heldCache); evicted
// scratch goes to the call cache's graveyard.
type fullCache struct {
	held heldCache[fullKey, *fullCall]
}

// The prepared full calls kept: at most fullCacheLimit, holding at most
// fullScratchLimit bytes of scratch together (the newest is kept whatever
// its size): a caller whose every call is new must not pile up scratch.
const (
	fullCacheLimit   = 64
	fullScratchLimit = 2 << 30
)

func newFullCache() *fullCache {
	c := &fullCache{}
	c.held.limit, c.held.scratchLimit = fullCacheLimit, fullScratchLimit
	return c
}

// scratchBytes is what the call needs: its table and its share of the slab
// (its own length's buffers), so that the cache keeps as many calls as when
// each call had its own buffers. (Charged the slab's whole size, a small
// call on a slab a long one had grown would count as long and be evicted
// again and again.)
func (e *fullCall) scratchBytes() int { return e.memBytes + e.slabNeed }

// sameSeqs reports whether e's chunk table was built for these boundaries.
func (e *fullCall) sameSeqs(seqs []int) bool { return slices.Equal(e.seqs, seqs) }

// free releases the call's parameters and its slab, and parks its table.
func (e *fullCall) free() {
	if e.prep != nil {
		e.prep.params.Free()
		e.prep = nil
	}
	if e.slab != nil {
		e.slabs.release(slabKey{kind: slabFull, o: e.key.o, ht: e.key.ht}, e.slab)
		e.slab = nil
	}
	if e.mem != 0 {
		switch {
		case e.grave != nil && e.pinned.Load():
			e.grave.keep(e.mem, e.memBytes)
		case e.grave != nil:
			e.grave.park(e.mem, e.memBytes)
		default:
			e.dev.RelaxedCapture(func() error { return e.dev.Free(e.mem) })
		}
		e.mem = 0
	}
}

// chunkPairs lists every sequence's 64-token chunks as int32 (begin, end)
// flat token pairs.
func chunkPairs(p Problem) []int32 {
	var out []int32
	for n := 0; n < p.N; n++ {
		b, e := p.seqBounds(n)
		for ; b < e; b += ChunkLen {
			out = append(out, int32(b), int32(min(b+ChunkLen, e)))
		}
	}
	return out
}

// ForwardFull runs the full forward on device buffers, enqueued on stream
// s: the log-gate (from its raw inputs with GateInKernel) and its
// chunk-local sum, the L2 normalisation of q and k (with L2Norm), A, then
// the core forward (Forward: the same plans, sequence parallelism and graph
// cache). Arguments are validated first (ValidateFull); nothing is written
// when they are wrong. On bf16 inputs, with or without L2Norm, wherever
// the core runs unsplit at 128-wide value tiles, the core kernel does all
// of it itself (Options.PrepKernel turns that off) and the call needs no
// scratch.
// Elsewhere the first call with a set of arguments allocates the scratch
// the steps need (g_cumsum in fp32 and A2 in fp16: 132 bytes per token and
// value head; with L2Norm a copy of q and k), kept for repeated calls,
// which allocate nothing.
func (rt *Runtime) ForwardFull(a *FullArgs, s Stream) error {
	if err := rt.enter(); err != nil {
		return err
	}
	defer rt.leave()
	return rt.forwardFull(a, s)
}

// PlanOfFull returns the plan of the core forward that ForwardFull runs a
// with, after its preparation (see PlanOf). The call is prepared (and kept)
// as ForwardFull would: the first call with a set of arguments allocates
// its scratch.
func (rt *Runtime) PlanOfFull(a *FullArgs) (Plan, error) {
	if err := rt.enter(); err != nil {
		return Plan{}, err
	}
	defer rt.leave()
	e, err := rt.preparedFull(a)
	if err != nil {
		return Plan{}, err
	}
	defer rt.full.held.release(e)
	c, err := rt.calls.prepare(&e.core)
	if err != nil {
		return Plan{}, err
	}
	defer rt.calls.release(c)
	return c.plan, nil
}

// preparedFull validates a and returns its prepared call, made on the
// first call with these arguments; the caller releases it
// (rt.full.held.release).
func (rt *Runtime) preparedFull(a *FullArgs) (*fullCall, error) {
	if a == nil {
		return nil, argErrorf("args", "nil *FullArgs")
	}
	args := *a
	p, err := ValidateFull(&args)
	if err != nil {
		return nil, err
	}
	key := fullKey{q: args.Q.Ptr, k: args.K.Ptr, v: args.V.Ptr, g: args.G.Ptr, beta: args.Beta.Ptr,
		aLog: args.ALog.Ptr, dtBias: args.DtBias.Ptr, h0: args.H0.Ptr, ht: args.Ht.Ptr, o: args.O.Ptr,
		b: p.B, t: p.T, hq: p.Hq, hv: p.Hv, n: p.N, dtype: p.Dtype, betaDtype: p.BetaDtype,
		seqlensDtype: p.SeqlensDtype, scale: math.Float32bits(p.Scale), l2norm: args.L2Norm,
		gate: args.GateInKernel, seqsHash: hashSeqs(p.Seqs)}
	if p.Seqs != nil {
		key.cuSeqlens = args.CuSeqlensDevice.Ptr
	}
	e, found, collided, err := rt.full.held.get(key, p.Seqs)
	if err != nil {
		return nil, err
	}
	if !found {
		if e, err = rt.newFullCall(&args, key, p); err != nil {
			return nil, err
		}
		if collided {
			alone(&e.holdState) // released (and freed) by this call alone
		} else if e, err = rt.full.held.put(key, e, p.Seqs); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// forwardFull is ForwardFull without the Close guard, for callers that
// hold it (the host path, forwardHost).
func (rt *Runtime) forwardFull(a *FullArgs, s Stream) error {
	e, err := rt.preparedFull(a)
	if err != nil {
		return err
	}
	defer rt.full.held.release(e)

	stream := rt.ctx.WrapStream(uintptr(s))
	if stream.Handle() != 0 && !e.pinned.Load() {
		// Launched into the caller's capture, the call's scratch lives on in
		// the caller's graph: keep it until Close (scratchGraveyard).
		if capturing, err := stream.IsCapturing(); err != nil || capturing {
			e.pinned.Store(true)
			e.slabs.pin(e.slab)
		}
	}
	if l := e.prep; l != nil {
		fn := e.fn.Load()
		if fn == nil {
			k, err := rt.kernel(e.variant, l.shared)
			if err != nil {
				return err
			}
			fn = k.fn
			e.fn.Store(fn)
		}
		err := rt.ctx.LaunchParams(fn, driver.Dim3{X: l.grid[0], Y: l.grid[1], Z: l.grid[2]},
			driver.Dim3{X: l.block[0], Y: l.block[1], Z: l.block[2]}, l.shared, stream, l.params)
		if err != nil {
			return fmt.Errorf("gdn: launch %s: %w", e.variant.Name, err)
		}
	}
	return rt.forward(&e.core, s)
}

// newFullCall allocates a full call's scratch and packs its prep launch.
func (rt *Runtime) newFullCall(a *FullArgs, key fullKey, p Problem) (*fullCall, error) {
	if rt.fusedPrep(a, p) {
		return rt.newFusedCall(a, key, p), nil
	}
	chunks := chunkPairs(p)
	nch := len(chunks) / 2
	tokens := p.Tokens()
	if tokens > math.MaxInt32 {
		return nil, argErrorf("q", "%d tokens: the full forward indexes tokens in 32 bits", tokens)
	}
	align := func(n int) int { return (n + 255) &^ 255 }
	tableBytes := align(4 * len(chunks))
	gBytes := align(tokens * p.Hv * 4)
	aBytes := align(tokens * p.Hv * ChunkLen * 2)
	normInCore := rt.normInCore(a, p)
	qkBytes := 0
	if a.L2Norm && !normInCore {
		qkBytes = align(tokens * p.Hq * HeadDim * 2)
	}
	e := &fullCall{key: key, seqs: slices.Clone(p.Seqs), dev: rt.calls.dev, memBytes: tableBytes, slabs: rt.calls.slabs}
	heads := prepHeads(p, nch, rt.calls.plans.sms, rt.prepHeads)
	v, err := kernsrc.PrepVariant(kernsrc.PrepChunkKernel, inputDtype(p.Dtype), heads)
	if err != nil {
		return nil, err
	}
	e.variant = v
	err = e.dev.RelaxedCapture(func() error {
		var err error
		if e.mem, err = e.dev.Alloc(e.memBytes); err != nil {
			return err
		}
		return e.dev.Upload(e.mem, unsafe.Pointer(&chunks[0]), 4*len(chunks))
	})
	if err != nil {
		e.free()
		return nil, fmt.Errorf("gdn: chunk table of a full forward (%d bytes): %w", e.memBytes, err)
	}
	slabBytes := gBytes + aBytes + 2*qkBytes
	e.slabNeed = slabBytes
	if e.slab, err = e.slabs.acquire(slabKey{kind: slabFull, o: key.o, ht: key.ht}, slabBytes); err != nil {
		e.free()
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		return nil, fmt.Errorf("gdn: scratch of a full forward (%d bytes): %w", slabBytes, err)
	}
	table := e.mem
	gcum := e.slab.mem
	A := gcum.Offset(gBytes)
	q, k := a.Q, a.K
	if a.L2Norm && !normInCore {
		qn := A.Offset(aBytes)
		kn := qn.Offset(qkBytes)
		// The preparation writes the normalised copies in fp16 (entries of at
		// most 1: three more bits than bf16).
		q = Tensor{Ptr: uintptr(qn), Bytes: qkBytes, Dtype: FP16, Shape: a.Q.Shape}
		k = Tensor{Ptr: uintptr(kn), Bytes: qkBytes, Dtype: FP16, Shape: a.K.Shape}
	}
	e.core = a.coreTemplate(q, k, uintptr(gcum), uintptr(A))
	e.core.qkFP16 = a.L2Norm && !normInCore
	e.core.qkNorm = normInCore
	// e.core is validated again at every call of this entry: it must not
	// share the caller's slices, which the caller may change once this call
	// has returned (the entry's key holds the dimensions they had).
	e.core.ownSlices()

	flags := int32(0)
	if a.GateInKernel {
		flags |= kernsrc.PrepFlagGateInKernel
	}
	if p.BetaDtype == FP32 {
		flags |= kernsrc.PrepFlagBetaFP32
	}
	if a.L2Norm {
		flags |= kernsrc.PrepFlagL2Norm
	}
	if normInCore {
		flags |= kernsrc.PrepFlagNormInCore
	}
	// One launch: the chunk kernel reads q and k as given and, with L2Norm
	// (unless the core normalises them), writes their normalised copies q
	// and k (the core forward's) itself.
	pp := kernsrc.PrepParams{Q: a.Q.Ptr, K: a.K.Ptr, QN: q.Ptr, KN: k.Ptr, Beta: a.Beta.Ptr, G: a.G.Ptr, ALog: a.ALog.Ptr,
		DtBias: a.DtBias.Ptr, GCum: uintptr(gcum), A2: uintptr(A), Chunks: uintptr(table), Hq: int32(p.Hq), Hv: int32(p.Hv), Flags: flags}
	var block [kernsrc.PrepParamsBytes]byte
	pp.Pack(&block)
	params, err := driver.NewKernelParams(packedArgs(block[:], kernsrc.PrepParamFields()))
	if err != nil {
		e.free()
		return nil, fmt.Errorf("gdn: kernel parameters: %w", err)
	}
	e.prep = &prepLaunch{grid: [3]uint32{uint32(nch), uint32(p.Hv / heads), 1},
		block: [3]uint32{kernsrc.PrepThreads, 1, 1}, shared: kernsrc.PrepChunkSharedBytes(heads), params: params}
	e.grave = rt.calls.grave
	return e, nil
}

// newFusedCall is the full call of a whose preparation the core kernel
// does (kernsrc.CoreBF16Fused with L2Norm, kernsrc.CoreBF16FusedNoNorm
// without): no scratch, no kernel before the core's; the
// core reads the raw gates (and, with GateInKernel, A_log and dt_bias).
func (rt *Runtime) newFusedCall(a *FullArgs, key fullKey, p Problem) *fullCall {
	e := &fullCall{key: key, seqs: slices.Clone(p.Seqs), dev: rt.calls.dev, slabs: rt.calls.slabs}
	e.core = a.coreTemplate(a.Q, a.K, 0, 0)
	e.core.qkNorm, e.core.fused = a.L2Norm, true
	if a.GateInKernel {
		e.core.gateInKernel, e.core.aLog, e.core.dtBias = true, a.ALog, a.DtBias
	}
	e.core.ownSlices()
	e.grave = rt.calls.grave
	return e
}

// normInCore says whether the full forward of a (p from ValidateFull)
// leaves its L2 norm to the core kernel (kernsrc.CoreBF16L2Norm): with
// L2Norm on bf16 inputs and G = Hv / Hq of at most normInCoreMaxG, wherever
// the core forward of the normalised copies would run unsplit at BV 128,
// the only plan that variant has (the few-head shapes that split keep the
// copies). Its converter warpgroup then normalises each chunk's rows of q
// and k as the preparation would have, to the bit, and the preparation
// neither reads q nor writes the copies (nor is their scratch allocated).
// Only with Options.PrepKernel (by default such calls take fusedPrep);
// Options.L2NormInPrep turns it off.
func (rt *Runtime) normInCore(a *FullArgs, p Problem) bool {
	return a.L2Norm && !rt.normInPrep && normInCoreFor(p, rt.calls.plans.sms, rt.calls.plans.variant, rt.calls.segChunks)
}

// normInCoreFor is normInCore's rule for the full forward of p with L2Norm
// on sms SMs, with Options.Variant and Options.SegmentChunks.
func normInCoreFor(p Problem, sms int, variant string, segmentChunks int) bool {
	return p.Hq != 0 && p.Hv/p.Hq <= normInCoreMaxG && coreTakesNorm(p, sms, variant, segmentChunks)
}

// fusedPrep says whether the core kernel does the full forward's whole
// preparation for a: with L2Norm (kernsrc.CoreBF16Fused) on bf16 inputs
// wherever the core forward of the normalised copies would run unsplit at
// BV 128, whatever G (Options.L2NormInPrep turns it off); without
// (kernsrc.CoreBF16FusedNoNorm) wherever the core forward of q and k as
// given would. Options.PrepKernel turns both off.
func (rt *Runtime) fusedPrep(a *FullArgs, p Problem) bool {
	if rt.prepKernel {
		return false
	}
	if a.L2Norm {
		return !rt.normInPrep && coreTakesNorm(p, rt.calls.plans.sms, rt.calls.plans.variant, rt.calls.segChunks)
	}
	return coreTakesFused(p, rt.calls.plans.sms, rt.calls.plans.variant, rt.calls.segChunks)
}

// coreTakesNorm says whether the core kernel can normalise q and k for the
// full forward of p with L2Norm: the core forward of the normalised (fp16)
// copies would run unsplit at BV 128 (coreRunsWide).
func coreTakesNorm(p Problem, sms int, variant string, segmentChunks int) bool {
	return coreRunsWide(p, FP16, sms, variant, segmentChunks)
}

// coreTakesFused says whether the core kernel can do the whole preparation
// of the full forward of p without L2Norm (kernsrc.CoreBF16FusedNoNorm):
// the core forward of q and k as given would run unsplit at BV 128.
func coreTakesFused(p Problem, sms int, variant string, segmentChunks int) bool {
	return coreRunsWide(p, p.Dtype, sms, variant, segmentChunks)
}

// coreRunsWide says whether the core forward of p on bf16 inputs, with q
// and k in qk, is planned unsplit at BV 128: the only plan of the variants
// that normalise q and k or prepare everything themselves.
func coreRunsWide(p Problem, qk Dtype, sms int, variant string, segmentChunks int) bool {
	if p.Dtype != BF16 || p.Hq == 0 {
		return false
	}
	p.QKDtype = qk
	pl, err := PlanFor(p, sms, variant, segmentChunks)
	return err == nil && pl.SegmentChunks == 0 && pl.TileWidth == 128
}

// PlanForFull is PlanFor for the core kernel of a full forward
// (ForwardFull) of p's shape and input dtype, with or without L2Norm, on
// a Runtime with Options{Variant: variant, SegmentChunks: segmentChunks}
// (and no other) on sms SMs: the variant that does the whole preparation
// itself (kernsrc.CoreBF16Fused with L2Norm, kernsrc.CoreBF16FusedNoNorm
// without) where it runs, else the core on the preparation's normalised
// copies (L2Norm) or on q and k as given.
// Runtime.PlanOfFull answers the same for prepared arguments.
func PlanForFull(p Problem, sms int, variant string, segmentChunks int, l2norm bool) (Plan, error) {
	return PlanFor(fullCoreProblem(withN(p), sms, variant, segmentChunks, l2norm), sms, variant, segmentChunks)
}

// fullCoreProblem is the core problem of a full forward of p (its input
// dtype, N set) on a Runtime with default Options but variant and
// segmentChunks: with L2Norm, the fused preparation's (fusedPrep) or the
// normalised copies'; without, the fused preparation's without the norm
// (coreTakesFused) or q and k as given.
func fullCoreProblem(p Problem, sms int, variant string, segmentChunks int, l2norm bool) Problem {
	p.QKDtype, p.QKNorm, p.Fused, p.ADtype = p.Dtype, false, false, FP16
	switch {
	case l2norm && coreTakesNorm(p, sms, variant, segmentChunks):
		p.QKNorm, p.Fused = true, true
	case l2norm:
		p.QKDtype = FP16
	case coreTakesFused(p, sms, variant, segmentChunks):
		p.Fused = true
	}
	return p
}

// withN is p with N set from B or Seqs where it is not.
func withN(p Problem) Problem {
	if p.N == 0 {
		p.N = p.B
		if p.Seqs != nil {
			p.N = len(p.Seqs) - 1
		}
	}
	return p
}

// KernelsFor lists the kernel variants a Runtime with default Options on
// sms SMs runs p (a Problem of the core forward's dtypes: Dtype and
// Hq, Hv, B, T or Seqs) with: the core forward's kernel and, where the plan
// splits, its transfer pass and the scan; with full, also those of
// ForwardFull on the same shape, with and without L2Norm (its preparation
// kernel, and its core on the normalised copies, or the core that does the
// whole preparation itself).
// `gdn warmup --shapes` compiles them ahead of the first call.
func KernelsFor(p Problem, sms int, full bool) ([]kernsrc.Variant, error) {
	p = withN(p)
	p.QKDtype, p.QKNorm = p.Dtype, false
	var out []kernsrc.Variant
	add := func(v kernsrc.Variant) {
		for _, w := range out {
			if w.Name == v.Name {
				return
			}
		}
		out = append(out, v)
	}
	core := func(p Problem) error {
		pl, err := PlanFor(p, sms, "", 0)
		if err != nil {
			return err
		}
		add(pl.Variant)
		if pl.SegmentChunks > 0 {
			xfer := pl.TileWidth
			if pl.TransferTileWidth > 0 {
				xfer = pl.TransferTileWidth
			}
			v, err := kernsrc.HopperTransferVariant(coreDtype(p), xfer/64)
			if err != nil {
				return err
			}
			add(v)
			scan, err := kernsrc.ScanVariant(pl.ScanColumns)
			if err != nil {
				return err
			}
			add(scan)
		}
		return nil
	}
	if err := core(p); err != nil || !full {
		return out, err
	}
	// With L2Norm the core that does the whole preparation (fusedPrep) or
	// the core on the normalised copies; without it the core that does the
	// preparation without the norm, or the core forward's plan. The
	// preparation kernel runs wherever the core does not fuse it.
	for _, l2norm := range []bool{true, false} {
		if err := core(fullCoreProblem(p, sms, "", 0, l2norm)); err != nil {
			return nil, err
		}
	}
	_, chunks := chainChunks(p)
	prep, err := kernsrc.PrepVariant(kernsrc.PrepChunkKernel, inputDtype(p.Dtype), prepHeads(p, chunks, sms, 0))
	if err != nil {
		return nil, err
	}
	add(prep)
	return out, nil
}

// normInCoreMaxG is the largest G for which the core kernel normalises q
// and k (normInCore). The preparation's copies are written once per key
// head, by one CTA in G, while every one of the G value heads' core CTAs
// normalises its own tiles: measured (docs/PERF.md v25, the full forward,
// three calls), sym32_8kx4 (G = 1) 1.18x-1.24x, q35_4kx8 and q35_1kx8
// (G = 2) 0.97x-1.03x, q397_4kx8 (G = 4) 0.98x and 0.99x. At G = 2 it
// costs no time and saves the copies' scratch.
const normInCoreMaxG = 2

// prepMinBlocksPerSM is the fewest prep blocks per SM that prepHeads
// accepts for blocks of several heads. Measured (docs/PERF.md v16): four
// heads a block paid on tp8_32k's 1,024 blocks (7.8 an SM: 1.03x) and lost
// on tp8_8k's 256 (1.9 an SM: 0.93x), where too few blocks are left to
// hide each one's chain of dependent steps.
const prepMinBlocksPerSM = 4

// prepHeads returns how many value heads each block of the prep kernel
// takes (one of kernsrc.PrepHeads) for p, cut into chunks chunks, on sms
// SMs: the most that divide G = Hv / Hq while the grid keeps at least
// prepMinBlocksPerSM blocks an SM. capHeads > 0 (Options.PrepHeads)
// replaces the grid rule by a cap.
func prepHeads(p Problem, chunks, sms, capHeads int) int {
	g := p.Hv / p.Hq
	for _, h := range kernsrc.PrepHeads() {
		if g%h != 0 {
			continue
		}
		if capHeads > 0 && h <= capHeads || capHeads == 0 && (h == 1 || chunks*p.Hv/h >= prepMinBlocksPerSM*sms) {
			return h
		}
	}
	return 1
}
