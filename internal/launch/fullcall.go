package launch

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/scratch"
	"github.com/gdnjit/gdn/kernsrc"
)

// fullKey is everything a prepared full call depends on.
type fullKey struct {
	q, k, v, g, beta, aLog, dtBias, h0, ht, o, cuSeqlens uintptr
	b, t, hq, hv, n                                      int
	dtype, betaDtype, seqlensDtype                       dtype.Dtype
	scale                                                uint32
	l2norm, gate, betaLogits, negEigval                  bool
	seqsHash                                             uint64
	// The serving layer: the pool (its base in h0 and ht), its slot
	// table's device address (its values are data: never in the key) and
	// the states' layout.
	slots     uintptr
	poolS     int
	poolDtype dtype.Dtype
	layout    problem.Layout
	ckpt      uintptr
	ckEvery   int
}

// fullCall is a prepared full call: its scratch (its own chunk table; the
// cumulative gates, A and the normalised q and k in the slab it shares with
// the calls that write the same outputs), the packed arguments of the prep
// kernel and the core forward on the scratch.
type fullCall struct {
	key     fullKey
	seqs    []int // the boundaries its chunk table was built from (the key holds their hash)
	core    problem.Core
	lease   *scratch.Lease  // nil where the core does the whole preparation
	variant kernsrc.Variant // the chunk kernel
	fn      atomic.Pointer[driver.Function]
	prep    *prepLaunch // the chunk kernel's launch

	holdState // guarded by the cache's heldCache.mu
}

// prepLaunch is the prep kernel's launch of a full call.
type prepLaunch struct {
	grid, block [3]uint32
	shared      int
	params      *driver.KernelParams
}

// fullCache holds a Runtime's prepared full calls (see heldCache).
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

// scratchBytes is what the call is charged (scratch.Lease.Bytes).
func (e *fullCall) scratchBytes() int {
	if e.lease == nil {
		return 0
	}
	return e.lease.Bytes()
}

// sameSeqs reports whether e's chunk table was built for these boundaries.
func (e *fullCall) sameSeqs(seqs []int) bool { return slices.Equal(e.seqs, seqs) }

// free releases the call's parameters and its scratch.
func (e *fullCall) free() {
	if e.prep != nil {
		e.prep.params.Free()
		e.prep = nil
	}
	e.lease.Release()
}

// chunkPairs lists every sequence's 64-token chunks as int32 (begin, end)
// flat token pairs.
func chunkPairs(p problem.Problem) []int32 {
	var out []int32
	for n := 0; n < p.N; n++ {
		b, e := p.SeqBounds(n)
		for ; b < e; b += problem.ChunkLen {
			out = append(out, int32(b), int32(min(b+problem.ChunkLen, e)))
		}
	}
	return out
}

// fullKeyOf is the key of validated arguments a (p from
// problem.ValidateFull(a)).
func fullKeyOf(a *problem.Full, p problem.Problem) fullKey {
	key := fullKey{q: a.Q.Ptr, k: a.K.Ptr, v: a.V.Ptr, g: a.G.Ptr, beta: a.Beta.Ptr,
		aLog: a.ALog.Ptr, dtBias: a.DtBias.Ptr, h0: a.H0.Ptr, ht: a.Ht.Ptr, o: a.O.Ptr,
		b: p.B, t: p.T, hq: p.Hq, hv: p.Hv, n: p.N, dtype: p.Dtype, betaDtype: p.BetaDtype,
		seqlensDtype: p.SeqlensDtype, scale: math.Float32bits(p.Scale), l2norm: a.L2Norm,
		gate: a.GateInKernel, betaLogits: a.BetaLogits, negEigval: a.NegEigval, seqsHash: hashSeqs(p.Seqs)}
	if p.Seqs != nil {
		key.cuSeqlens = a.CuSeqlensDevice.Ptr
	}
	if p.Pool.S > 0 {
		key.h0, key.ht = a.Pool.States.Ptr, a.Pool.States.Ptr
		key.slots, key.poolS, key.poolDtype = a.Pool.SlotsDevice.Ptr, p.Pool.S, p.Pool.Dtype
	}
	key.layout = p.Layout
	key.ckpt, key.ckEvery = a.Checkpoints.Ptr, p.CkptEvery
	return key
}

// preparedFull validates a and returns its prepared call, made on the
// first call with these arguments; the caller releases it
// (l.full.held.release).
func (l *Launcher) preparedFull(a *problem.Full) (*fullCall, error) {
	if a == nil {
		return nil, gdnerr.Argf("args", "nil *FullArgs")
	}
	args := *a
	p, err := problem.ValidateFull(&args)
	if err != nil {
		return nil, err
	}
	key := fullKeyOf(&args, p)
	e, found, collided, err := l.full.held.get(key, p.Seqs)
	if err != nil {
		return nil, err
	}
	if !found {
		if e, err = l.newFullCall(&args, key, p); err != nil {
			return nil, err
		}
		if collided {
			alone(&e.holdState) // released (and freed) by this call alone
		} else if e, err = l.full.held.put(key, e, p.Seqs); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// ForwardFull runs the full forward of a on stream s (a CUstream handle):
// its prepared call's preparation kernel (unless the core does it), then
// the core forward.
func (l *Launcher) ForwardFull(a problem.Full, s uintptr) error {
	e, err := l.preparedFull(&a)
	if err != nil {
		return err
	}
	defer l.full.held.release(e)

	stream := l.ctx.WrapStream(s)
	if e.lease != nil && stream.Handle() != 0 && !e.lease.Kept() {
		// Launched into the caller's capture, the call's scratch lives on in
		// the caller's graph: keep it until Close (scratch.Lease.Keep).
		if capturing, err := stream.IsCapturing(); err != nil || capturing {
			e.lease.Keep()
		}
	}
	if pl := e.prep; pl != nil {
		fn := e.fn.Load()
		if fn == nil {
			k, err := l.kernels.load(e.variant, pl.shared)
			if err != nil {
				return err
			}
			fn = k.fn
			e.fn.Store(fn)
		}
		err := l.ctx.LaunchParams(fn, driver.Dim3{X: pl.grid[0], Y: pl.grid[1], Z: pl.grid[2]},
			driver.Dim3{X: pl.block[0], Y: pl.block[1], Z: pl.block[2]}, pl.shared, stream, pl.params)
		if err != nil {
			return fmt.Errorf("gdn: launch %s: %w", e.variant.Name, err)
		}
	}
	// The entry's core holds the slot table it was prepared with; this
	// call's (the same device table, other values maybe) is what the
	// core's validation must see.
	core := e.core
	core.Pool.Slots = a.Pool.Slots
	return l.Forward(core, s)
}

// takesFused says whether the full forward of a runs in the fused core
// (plan.FusedPrep), which writes no checkpoints and takes beta as given: a
// call that keeps checkpoints or gives beta's logits runs the preparation
// kernel (a flag for either inside the fused kernel cost its hot loop 6%
// on the many-head rows).
func (l *Launcher) takesFused(a *problem.Full, p problem.Problem) bool {
	return p.CkptEvery == 0 && !a.BetaLogits && plan.FusedPrep(p, l.sms, l.knobs, a.L2Norm)
}

// newFullCall allocates a full call's scratch and packs its prep launch.
func (l *Launcher) newFullCall(a *problem.Full, key fullKey, p problem.Problem) (*fullCall, error) {
	if l.takesFused(a, p) {
		return newFusedCall(a, key, p), nil
	}
	chunks := chunkPairs(p)
	nch := len(chunks) / 2
	tokens := p.Tokens()
	if tokens > math.MaxInt32 {
		return nil, gdnerr.Argf("q", "%d tokens: the full forward indexes tokens in 32 bits", tokens)
	}
	align := func(n int) int { return (n + 255) &^ 255 }
	gBytes := align(tokens * p.Hv * 4)
	aBytes := align(tokens * p.Hv * problem.ChunkLen * 2)
	normInCore := plan.NormInCore(p, l.sms, l.knobs, a.L2Norm)
	qkBytes := 0
	if a.L2Norm && !normInCore {
		qkBytes = align(tokens * p.Hq * problem.HeadDim * 2)
	}
	e := &fullCall{key: key, seqs: slices.Clone(p.Seqs)}
	heads := plan.PrepHeads(p, nch, l.sms, l.knobs.PrepHeads)
	v, err := kernsrc.PrepVariant(kernsrc.PrepChunkKernel, plan.InputDtype(p.Dtype), heads)
	if err != nil {
		return nil, err
	}
	e.variant = v
	slabBytes := gBytes + aBytes + 2*qkBytes
	e.lease, err = l.pool.Allocate(chunks, scratch.Key{Kind: scratch.FullBuffers, O: key.o, Ht: key.ht}, slabBytes)
	if err != nil {
		if errors.Is(err, gdnerr.ErrClosed) {
			return nil, err
		}
		return nil, fmt.Errorf("gdn: scratch of a full forward: %w", err)
	}
	table := e.lease.Table()
	gcum := e.lease.Slab()
	A := gcum.Offset(gBytes)
	q, k := a.Q, a.K
	if a.L2Norm && !normInCore {
		qn := A.Offset(aBytes)
		kn := qn.Offset(qkBytes)
		// The preparation writes the normalised copies in fp16 (entries of at
		// most 1: three more bits than bf16).
		q = problem.Tensor{Ptr: uintptr(qn), Bytes: qkBytes, Dtype: dtype.FP16, Shape: a.Q.Shape}
		k = problem.Tensor{Ptr: uintptr(kn), Bytes: qkBytes, Dtype: dtype.FP16, Shape: a.K.Shape}
	}
	e.core = a.CoreTemplate(q, k, uintptr(gcum), uintptr(A))
	e.core.QKFP16 = a.L2Norm && !normInCore
	e.core.QKNorm = normInCore
	// e.core is validated again at every call of this entry: it must not
	// share the caller's slices, which the caller may change once this call
	// has returned (the entry's key holds the dimensions they had).
	e.core.OwnSlices()

	flags := prepFlags(a, p, normInCore)
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
	return e, nil
}

// prepFlags are the prep kernel's flags for validated arguments a (p from
// problem.ValidateFull(a)); normInCore: the core normalises q and k itself.
func prepFlags(a *problem.Full, p problem.Problem, normInCore bool) int32 {
	flags := int32(0)
	if a.GateInKernel {
		flags |= kernsrc.PrepFlagGateInKernel
	}
	if p.BetaDtype == dtype.FP32 {
		flags |= kernsrc.PrepFlagBetaFP32
	}
	if a.L2Norm {
		flags |= kernsrc.PrepFlagL2Norm
	}
	if normInCore {
		flags |= kernsrc.PrepFlagNormInCore
	}
	if a.BetaLogits {
		flags |= kernsrc.PrepFlagBetaLogits
	}
	if a.NegEigval {
		flags |= kernsrc.PrepFlagNegEigval
	}
	return flags
}

// newFusedCall is the full call of a whose preparation the core kernel
// does (kernsrc.CoreBF16Fused with L2Norm, kernsrc.CoreBF16FusedNoNorm
// without): no scratch, no kernel before the core's; the core reads the
// raw gates (and, with GateInKernel, A_log and dt_bias) and beta as given.
func newFusedCall(a *problem.Full, key fullKey, p problem.Problem) *fullCall {
	e := &fullCall{key: key, seqs: slices.Clone(p.Seqs)}
	e.core = a.CoreTemplate(a.Q, a.K, 0, 0)
	e.core.QKNorm, e.core.Fused = a.L2Norm, true
	if a.GateInKernel {
		e.core.GateInKernel, e.core.ALog, e.core.DtBias = true, a.ALog, a.DtBias
	}
	e.core.OwnSlices()
	return e
}
