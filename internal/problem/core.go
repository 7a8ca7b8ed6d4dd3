package problem

import (
	"math"
	"slices"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
)

// Core is a core forward's arguments: gdn.CoreArgs (whose documentation
// gives the shapes and rules) and the flags with which the full forward
// runs its core on its own scratch, which callers never set.
type Core struct {
	Q, K, V, G, Beta, A Tensor
	H0                  Tensor
	O, Ht               Tensor
	CuSeqlens           []int
	CuSeqlensDevice     Tensor
	Scale               float32 // 0 means 1/sqrt(128)

	// APrepared: A is the full forward's scratch, A2 = A diag(beta) as
	// gdn_prep_chunk writes it (FP16, zero above the diagonal), which the
	// kernel takes as it is (kernsrc.HopperFlagAPrepared). A caller's A is
	// FP32 or BF16.
	APrepared bool
	// QKFP16: q and k are the full forward's normalised copies, FP16
	// whatever v's dtype (the preparation writes them so; the core then runs
	// kernsrc.CoreBF16FP16QK on bf16 v).
	QKFP16 bool
	// QKNorm: q and k are the full forward's raw bf16 inputs, which the
	// core kernel L2-normalises itself (kernsrc.CoreBF16L2Norm: the copies
	// QKFP16 would read, to the bit).
	QKNorm bool
	// Fused: the full forward's whole preparation in the core kernel
	// (kernsrc.CoreBF16Fused with QKNorm, kernsrc.CoreBF16FusedNoNorm
	// without; bf16 q and k as given): G is the raw log-gate (or, with
	// GateInKernel, the gate's raw input, with ALog and DtBias), summed in
	// each chunk by the kernel, and A is a stand-in it never reads.
	Fused, GateInKernel bool
	ALog, DtBias        Tensor

	// The serving layer (docs/SPEC.md): a pool in place of h0 and ht, the
	// layout of the call's states and the checkpoints.
	Pool            Pool
	Layout          Layout
	CheckpointEvery int
	Checkpoints     Tensor
	// SeqRun: the sequences are a run of a mixed call's (Decode.SeqRun).
	SeqRun bool
}

// ValidateCore checks every argument of a core forward against
// docs/SPEC.md and returns the problem size. Errors are *gdnerr.ArgError
// naming the argument. Nothing is read from the device.
func ValidateCore(a *Core) (Problem, error) {
	var p Problem
	if a == nil {
		return p, gdnerr.Argf("args", "nil *CoreArgs")
	}
	if err := p.sizeFrom(a.Q, a.V); err != nil {
		return p, err
	}
	p.Dtype, p.QKDtype = a.Q.Dtype, a.Q.Dtype
	if a.QKFP16 {
		p.Dtype, p.QKDtype = a.V.Dtype, dtype.FP16
	}
	if a.QKNorm {
		if a.QKFP16 || p.Dtype != dtype.BF16 {
			return p, gdnerr.Argf("q", "dtype %v: the core normalises bf16 q and k only", p.Dtype)
		}
		p.QKNorm = true
	}
	if a.Fused {
		if a.QKFP16 || p.Dtype != dtype.BF16 {
			return p, gdnerr.Argf("q", "dtype %v: the fused preparation takes bf16 q and k as given", p.Dtype)
		}
		p.Fused = true
	}
	if p.Dtype != dtype.BF16 && p.Dtype != dtype.FP16 {
		return p, gdnerr.Argf("q", "dtype %v, want bf16 or fp16", p.Dtype)
	}

	if err := p.seqsFrom(a.CuSeqlens, a.CuSeqlensDevice, a.SeqRun); err != nil {
		return p, err
	}

	// Fixed arrays, not slices: validation must not allocate (Forward
	// validates every call); only a failed check builds its message.
	b, t := p.B, p.T
	aDtypes := dtypesOf(dtype.FP32, dtype.BF16)
	if a.APrepared {
		aDtypes = dtypesOf(dtype.FP16)
	}
	operands := [...]struct {
		name   string
		t      Tensor
		dtypes dtypeSet
		shape  dims
		align  int
	}{
		{"q", a.Q, dtypesOf(p.QKDtype), shapeOf(b, t, p.Hq, HeadDim), 16},
		{"k", a.K, dtypesOf(p.QKDtype), shapeOf(b, t, p.Hq, HeadDim), 16},
		{"v", a.V, dtypesOf(p.Dtype), shapeOf(b, t, p.Hv, HeadDim), 16},
		{"g", a.G, dtypesOf(dtype.FP32), shapeOf(b, t, p.Hv), 4},
		{"beta", a.Beta, dtypesOf(dtype.FP32, p.Dtype), shapeOf(b, t, p.Hv), 0}, // aligned to its element
		{"A", a.A, aDtypes, shapeOf(b, t, p.Hv, ChunkLen), 16},                  // copied in 16-byte vectors
		{"o", a.O, dtypesOf(p.Dtype), shapeOf(b, t, p.Hv, HeadDim), 16},
	}
	for _, s := range operands {
		if !s.dtypes.has(s.t.Dtype) {
			return p, gdnerr.Argf(s.name, "dtype %v, want %v", s.t.Dtype, s.dtypes)
		}
		align := s.align
		if align == 0 {
			align = s.t.Dtype.Size()
		}
		if err := checkTensor(s.name, s.t, s.t.Dtype, s.shape, align); err != nil {
			return p, err
		}
	}
	p.BetaDtype, p.ADtype = a.Beta.Dtype, a.A.Dtype

	state := shapeOf(p.N, p.Hv, HeadDim, HeadDim)
	if a.H0.Present() || a.H0.Shape != nil {
		if err := checkTensor("h0", a.H0, dtype.FP32, state, 8); err != nil {
			return p, err
		}
		p.HasH0 = true
	}
	if a.Ht.Present() || a.Ht.Shape != nil {
		if err := checkTensor("ht", a.Ht, dtype.FP32, state, 8); err != nil {
			return p, err
		}
		p.HasHt = true
	}

	if err := checkNoOverlap(a, p); err != nil {
		return p, err
	}
	if err := checkServing(a, &p); err != nil {
		return p, err
	}

	p.Scale = a.Scale
	if p.Scale == 0 {
		p.Scale = float32(1 / math.Sqrt(HeadDim))
	}
	if math.IsNaN(float64(p.Scale)) || math.IsInf(float64(p.Scale), 0) {
		return p, gdnerr.Argf("scale", "%v is not finite", p.Scale)
	}
	return p, nil
}

// OwnSlices replaces a's slices (every tensor's shape, cu_seqlens) with
// copies, for a Core that is kept beyond the call that passed it.
func (a *Core) OwnSlices() {
	a.CuSeqlens = slices.Clone(a.CuSeqlens)
	a.Pool.Slots = slices.Clone(a.Pool.Slots)
	for _, t := range [...]*Tensor{&a.Q, &a.K, &a.V, &a.G, &a.Beta, &a.A, &a.H0, &a.O, &a.Ht, &a.CuSeqlensDevice, &a.ALog, &a.DtBias,
		&a.Pool.States, &a.Pool.SlotsDevice, &a.Checkpoints} {
		t.Shape = slices.Clone(t.Shape)
	}
}
