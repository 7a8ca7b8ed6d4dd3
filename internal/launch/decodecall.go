package launch

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/kernsrc"
)

// decodeKey is everything a prepared decode call depends on. The slot
// table's address is in it, its contents are not: they are data the
// kernel reads, and changing them keeps the prepared call.
type decodeKey struct {
	q, k, v, g, beta, aLog, dtBias, pool, slots, o, tokenStates, cuSeqlens uintptr
	b, t, hq, hv, n, s                                                     int
	dtype, betaDtype, seqlensDtype, poolDtype                              dtype.Dtype
	layout                                                                 problem.Layout
	scale                                                                  uint32
	flags                                                                  int32
	seqsHash                                                               uint64
}

// decodeCall is a prepared decode call: its kernel, its grid and its
// packed parameter block in C memory.
type decodeCall struct {
	key     decodeKey
	seqs    []int // the boundaries it was prepared for (the key holds their hash)
	variant kernsrc.Variant
	grid    [3]uint32
	params  *driver.KernelParams
	fn      atomic.Pointer[driver.Function]

	holdState // guarded by the cache's heldCache.mu
}

// decodeCacheLimit bounds the prepared decode calls kept: each holds a
// parameter block and nothing on the device.
const decodeCacheLimit = 256

func (e *decodeCall) scratchBytes() int        { return 0 }
func (e *decodeCall) sameSeqs(seqs []int) bool { return slices.Equal(e.seqs, seqs) }
func (e *decodeCall) free()                    { e.params.Free() }

// decodeVariantOf is the decode kernel for a validated call in layout.
func decodeVariantOf(d problem.DecodeInfo, layout problem.Layout) (kernsrc.Variant, error) {
	kl := kernsrc.DecodeKV
	if layout == problem.LayoutVK {
		kl = kernsrc.DecodeVK
	}
	return kernsrc.DecodeVariant(plan.InputDtype(d.Dtype), kl, d.Pool.Dtype == dtype.BF16)
}

// decodeCache holds a Launcher's prepared decode calls (see heldCache).
type decodeCache struct {
	held heldCache[decodeKey, *decodeCall]
}

// init sets the cache's bound (a zero decodeCache keeps one call).
func (c *decodeCache) init() { c.held.limit = decodeCacheLimit }

// decodeFlags are the kernel's flags for a validated call.
func decodeFlags(a *problem.Decode, d problem.DecodeInfo) int32 {
	var f int32
	set := func(on bool, bit int32) {
		if on {
			f |= bit
		}
	}
	set(a.L2Norm, kernsrc.DecodeFlagL2Norm)
	set(a.GateInKernel, kernsrc.DecodeFlagGateInKernel)
	set(d.BetaDtype == dtype.FP32, kernsrc.DecodeFlagBetaFP32)
	set(a.BetaLogits, kernsrc.DecodeFlagBetaLogits)
	set(a.NegEigval, kernsrc.DecodeFlagNegEigval)
	set(d.Seqs != nil, kernsrc.DecodeFlagVarlen)
	set(d.SeqlensDtype == dtype.Int64, kernsrc.DecodeFlagSeqlensInt64)
	return f
}

// newDecodeKey is the key of validated arguments (d from
// problem.ValidateDecode(a)).
func newDecodeKey(a *problem.Decode, d problem.DecodeInfo) decodeKey {
	k := decodeKey{q: a.Q.Ptr, k: a.K.Ptr, v: a.V.Ptr, g: a.G.Ptr, beta: a.Beta.Ptr, pool: a.Pool.States.Ptr,
		slots: a.Pool.SlotsDevice.Ptr, o: a.O.Ptr, b: d.B, t: d.T, hq: d.Hq, hv: d.Hv, n: d.N, s: d.Pool.S,
		dtype: d.Dtype, betaDtype: d.BetaDtype, seqlensDtype: d.SeqlensDtype, poolDtype: d.Pool.Dtype,
		layout: a.Layout, scale: math.Float32bits(d.Scale), flags: decodeFlags(a, d), seqsHash: hashSeqs(d.Seqs)}
	if a.GateInKernel {
		k.aLog, k.dtBias = a.ALog.Ptr, a.DtBias.Ptr
	}
	if d.HasTokenStates {
		k.tokenStates = a.TokenStates.Ptr
	}
	if d.Seqs != nil {
		k.cuSeqlens = a.CuSeqlensDevice.Ptr
	}
	return k
}

// decodeParams are the kernel's parameters for key k (every address the
// kernel reads is in the key).
func decodeParams(k decodeKey) kernsrc.DecodeParams {
	return kernsrc.DecodeParams{Q: k.q, K: k.k, V: k.v, G: k.g, Beta: k.beta, ALog: k.aLog, DtBias: k.dtBias,
		Pool: k.pool, Slots: k.slots, O: k.o, TokenStates: k.tokenStates, CuSeqlens: k.cuSeqlens,
		Scale: math.Float32frombits(k.scale), T: int32(k.t), Hq: int32(k.hq), Hv: int32(k.hv), N: int32(k.n), Flags: k.flags}
}

// newDecodeCall packs a prepared call's parameters into C memory.
func newDecodeCall(k decodeKey, d problem.DecodeInfo) (*decodeCall, error) {
	v, err := decodeVariantOf(d, k.layout)
	if err != nil {
		return nil, err
	}
	var block [kernsrc.DecodeParamsBytes]byte
	pp := decodeParams(k)
	pp.Pack(&block)
	params, err := driver.NewKernelParams(new(driver.Args).Bytes(block[:], 8))
	if err != nil {
		return nil, fmt.Errorf("gdn: kernel parameters: %w", err)
	}
	return &decodeCall{key: k, seqs: slices.Clone(d.Seqs), variant: v, params: params,
		grid: [3]uint32{problem.HeadDim / kernsrc.DecodeColumns, uint32(d.Hv), uint32(d.N)}}, nil
}

// preparedDecode validates a and returns its prepared call, made on the
// first call with these arguments; the caller releases it
// (l.decode.held.release).
func (l *Launcher) preparedDecode(a *problem.Decode) (*decodeCall, error) {
	if a == nil {
		return nil, gdnerr.Argf("args", "nil *DecodeArgs")
	}
	d, err := problem.ValidateDecode(a)
	if err != nil {
		return nil, err
	}
	key := newDecodeKey(a, d)
	e, found, collided, err := l.decode.held.get(key, d.Seqs)
	if err != nil {
		return nil, err
	}
	if found {
		return e, nil
	}
	if e, err = newDecodeCall(key, d); err != nil {
		return nil, err
	}
	if collided {
		alone(&e.holdState) // released (and freed) by this call alone
		return e, nil
	}
	return l.decode.held.put(key, e, d.Seqs)
}

// Decode runs the decode call a on stream s (a CUstream handle): one
// launch of the decode kernel, on the caller's stream, so it may be
// captured into the caller's graph. Arguments are validated first; nothing
// is launched or written when they are wrong. A repeated call (the same
// arguments but for the slot table's contents) allocates nothing.
func (l *Launcher) Decode(a problem.Decode, s uintptr) error {
	e, err := l.preparedDecode(&a)
	if err != nil {
		return err
	}
	defer l.decode.held.release(e)
	fn := e.fn.Load()
	if fn == nil {
		k, err := l.kernels.load(e.variant, 0)
		if err != nil {
			return err
		}
		fn = k.fn
		e.fn.Store(fn)
	}
	stream := l.ctx.WrapStream(s)
	grid := driver.Dim3{X: e.grid[0], Y: e.grid[1], Z: e.grid[2]}
	if err := l.ctx.LaunchParams(fn, grid, driver.Dim3{X: kernsrc.DecodeThreads, Y: 1, Z: 1}, 0, stream, e.params); err != nil {
		return fmt.Errorf("gdn: launch %s: %w", e.variant.Name, err)
	}
	return nil
}

// DecodeCalls returns the number of prepared decode calls kept (tests:
// a call whose slot table alone changed must not add one).
func (l *Launcher) DecodeCalls() int { return l.decode.held.len() }
