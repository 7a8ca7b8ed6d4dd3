package launch

import (
	"fmt"
	"math"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/kernsrc"
)

// hopperCall is everything that goes into the Hopper kernel's parameter
// block: each device address, each size, each dtype and the scale. The block
// is a pure function of it (hopperCall.params), which is what lets Forward
// cache encoded blocks keyed by it: equal keys give byte-identical blocks.
//
// A tensor map encodes an address, dims, strides and a box, nothing that
// belongs to an allocation: a buffer freed and another allocated at the same
// address with the same shape gets the same, still correct, block. The key
// is comparable and holds no Go pointers, so map lookups by it allocate
// nothing.
type hopperCall struct {
	q, k, v, g, beta, a, h0, ht, cuSeqlens, o       uintptr // 0 where absent
	b, t, hq, hv, n                                 int
	dtype, qkDtype, betaDtype, aDtype, seqlensDtype dtype.Dtype
	qkNorm, fused                                   bool // problem.Problem.QKNorm, .Fused: other kernel variants
	gate                                            bool // problem.Core.GateInKernel (fused)
	aLog, dtBias                                    uintptr
	scale                                           uint32 // bits of the (validated, finite) scale: equal keys, equal bytes

	// The serving layer: a pool (its base in h0 and ht), its slot table's
	// device address, slots and dtype, and the states' layout. The table's
	// values are data, read by the kernels: never part of the key, so a
	// new table every call keeps the prepared call and its graph.
	slots     uintptr
	poolS     int
	poolDtype dtype.Dtype
	layout    problem.Layout
	// Checkpoints: the buffer, the interval in chunks and the rows.
	ckpt             uintptr
	ckChunks, ckRows int

	// Not in the block, but in the plan that callCache keeps with it: the
	// chains the planner's cost model weighs (plan.ChainChunks; plan.Cache holds
	// them too), and for a split plan, whose segment tables hold token
	// positions, a hash of the boundaries themselves. Packed sequences
	// rewritten in place (same buffers, same N and T, other boundaries) must
	// not be served the plan of the old ones.
	longest, total int
	seqsHash       uint64
}

// hashSeqs is FNV-1a over the sequence boundaries; it allocates nothing.
func hashSeqs(seqs []int) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range seqs {
		for i := 0; i < 64; i += 8 {
			h ^= uint64(x>>i) & 0xff
			h *= 1099511628211
		}
	}
	return h
}

// newHopperCall reads the key of validated arguments (p from problem.ValidateCore(a)).
func newHopperCall(a *problem.Core, p problem.Problem) hopperCall {
	k := hopperCall{
		q: a.Q.Ptr, k: a.K.Ptr, v: a.V.Ptr, g: a.G.Ptr, beta: a.Beta.Ptr, a: a.A.Ptr, o: a.O.Ptr,
		b: p.B, t: p.T, hq: p.Hq, hv: p.Hv, n: p.N,
		dtype: p.Dtype, qkDtype: p.QKDtype, betaDtype: p.BetaDtype, aDtype: p.ADtype, seqlensDtype: p.SeqlensDtype, qkNorm: p.QKNorm, fused: p.Fused,
		scale: math.Float32bits(p.Scale),
	}
	if p.HasH0 {
		k.h0 = a.H0.Ptr
	}
	if p.Fused && a.GateInKernel {
		k.gate, k.aLog, k.dtBias = true, a.ALog.Ptr, a.DtBias.Ptr
	}
	if p.HasHt {
		k.ht = a.Ht.Ptr
	}
	if p.Seqs != nil {
		k.cuSeqlens = a.CuSeqlensDevice.Ptr
	}
	if p.Pool.S > 0 {
		k.h0, k.ht = a.Pool.States.Ptr, a.Pool.States.Ptr
		k.slots, k.poolS, k.poolDtype = a.Pool.SlotsDevice.Ptr, p.Pool.S, p.Pool.Dtype
	}
	k.layout = p.Layout
	if p.CkptEvery > 0 {
		k.ckpt, k.ckChunks, k.ckRows = a.Checkpoints.Ptr, p.CkptEvery/problem.ChunkLen, p.CkptRows
	}
	k.longest, k.total = plan.ChainChunks(p)
	k.seqsHash = hashSeqs(p.Seqs)
	return k
}

// tiledEncoder encodes a tensor map: driver.Context.EncodeTiled on the GPU,
// a fake in the CPU tests of the host path.
type tiledEncoder func(dt driver.TensorDtype, base driver.DevicePtr, dims, strides []uint64, box []uint32, sw driver.Swizzle) (driver.TensorMap, error)

// params fills the Hopper kernel's parameter block (kernsrc.HopperParams,
// whose layout gdn_hopper.cu static_asserts): the five tensor maps (TMA
// descriptors of q, k, v, A and o, each viewed as a 4-D tensor (innermost
// dim, heads, T, B) with 64-token boxes of 128 bytes per row, 128-byte
// swizzled), the pointers and the sizes. With cu_seqlens, B is 1 and T
// counts every token; the kernel addresses a sequence by its first token.
func (k hopperCall) params(encode tiledEncoder, out *[kernsrc.HopperParamsBytes]byte) error {
	hp, err := k.hopperParams(encode)
	if err != nil {
		return err
	}
	hp.Pack(out)
	return nil
}

// hopperParams returns the values of k's parameter block, unpacked, for
// callers that adjust them (the passes of a split plan).
func (k hopperCall) hopperParams(encode tiledEncoder) (kernsrc.HopperParams, error) {
	var hp kernsrc.HopperParams
	tensorDtype := func(d dtype.Dtype) driver.TensorDtype {
		if d == dtype.FP16 {
			return driver.TensorF16
		}
		return driver.TensorBF16
	}
	in, qk := tensorDtype(k.dtype), tensorDtype(k.qkDtype)
	tokens := func(dt driver.TensorDtype, base uintptr, inner, heads int, box0 uint32) (driver.TensorMap, error) {
		m := kernsrc.HopperTensorMap{ElemBytes: dt.Size(), Inner: inner, Heads: heads, T: k.t, B: k.b, BoxInner: int(box0)}
		return encode(dt, driver.DevicePtr(base), m.Dims(), m.Strides(), m.Box(), driver.Swizzle128B)
	}
	var err error
	if hp.MapQ, err = tokens(qk, k.q, problem.HeadDim, k.hq, 64); err != nil {
		return hp, fmt.Errorf("gdn: tensor map of q: %w", err)
	}
	if hp.MapK, err = tokens(qk, k.k, problem.HeadDim, k.hq, 64); err != nil {
		return hp, fmt.Errorf("gdn: tensor map of k: %w", err)
	}
	if hp.MapV, err = tokens(in, k.v, problem.HeadDim, k.hv, 64); err != nil {
		return hp, fmt.Errorf("gdn: tensor map of v: %w", err)
	}
	if hp.MapO, err = tokens(in, k.o, problem.HeadDim, k.hv, 64); err != nil {
		return hp, fmt.Errorf("gdn: tensor map of o: %w", err)
	}
	switch k.aDtype {
	case dtype.FP32:
		hp.MapA, err = tokens(driver.TensorF32, k.a, problem.ChunkLen, k.hv, 32)
	case dtype.FP16: // the full forward's A2 (problem.Core.APrepared)
		hp.MapA, err = tokens(driver.TensorF16, k.a, problem.ChunkLen, k.hv, 64)
	default:
		hp.MapA, err = tokens(driver.TensorBF16, k.a, problem.ChunkLen, k.hv, 64)
	}
	if err != nil {
		return hp, fmt.Errorf("gdn: tensor map of A: %w", err)
	}
	hp.G, hp.Beta, hp.O = k.g, k.beta, k.o
	hp.H0, hp.Ht, hp.CuSeqlens = k.h0, k.ht, k.cuSeqlens
	hp.Scale = math.Float32frombits(k.scale)
	hp.T, hp.Hq, hp.Hv, hp.N, hp.NHt = int32(k.t), int32(k.hq), int32(k.hv), int32(k.n), int32(k.n)
	if k.betaDtype == dtype.FP32 {
		hp.Flags |= kernsrc.HopperFlagBetaFP32
	}
	switch k.aDtype {
	case dtype.FP32:
		hp.Flags |= kernsrc.HopperFlagAFP32
	case dtype.FP16:
		hp.Flags |= kernsrc.HopperFlagAPrepared
	}
	if k.seqlensDtype == dtype.Int64 {
		hp.Flags |= kernsrc.HopperFlagSeqlensInt64
	}
	if k.gate {
		hp.Flags |= kernsrc.HopperFlagGateInKernel
		hp.ALog, hp.DtBias = k.aLog, k.dtBias
	}
	hp.Flags |= k.stateFlags()
	if k.poolS > 0 {
		hp.Slots, hp.PoolSlots = k.slots, int32(k.poolS)
	}
	hp.Ckpt, hp.CkChunks, hp.CkRows = k.ckpt, int32(k.ckChunks), int32(k.ckRows)
	return hp, nil
}

// stateFlags are the Hopper flags of the caller's states' format: [V,K],
// a pool, a bf16 pool (kernsrc.HopperStateFlags).
func (k hopperCall) stateFlags() int32 {
	var f int32
	if k.layout == problem.LayoutVK {
		f |= kernsrc.HopperFlagStateVK
	}
	if k.poolS > 0 {
		f |= kernsrc.HopperFlagPoolSlots
		if k.poolDtype == dtype.BF16 {
			f |= kernsrc.HopperFlagPoolBF16
		}
	}
	return f
}

// scanFlags are the same for the scan's h0 (kernsrc.ScanFlag*).
func (k hopperCall) scanFlags() int32 {
	var f int32
	if k.layout == problem.LayoutVK {
		f |= kernsrc.ScanFlagVK
	}
	if k.poolS > 0 {
		f |= kernsrc.ScanFlagSlots
		if k.poolDtype == dtype.BF16 {
			f |= kernsrc.ScanFlagBF16
		}
	}
	return f
}
