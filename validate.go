package gdn

import (
	"fmt"
	"math"
	"slices"
)

// HeadDim is the head dimension K = V the kernels are built for.
const HeadDim = 128

// ChunkLen is the chunk length C of the chunked algorithm.
const ChunkLen = 64

// CoreArgs are the operands of the core forward (docs/SPEC.md, "Operations"):
// the caller computed g_cumsum and A. Shapes follow FLA's layout:
//
//	Q, K        [B, T, Hq, 128]   BF16 or FP16
//	V           [B, T, Hv, 128]   same dtype as Q
//	G           [B, T, Hv]        FP32, chunk-local cumulative log-gate
//	Beta        [B, T, Hv]        FP32 or the dtype of Q
//	A           [B, T, Hv, 64]    FP32 or BF16
//	H0          [N, Hv, 128, 128] FP32, optional (Ptr 0: zero state)
//	O           [B, T, Hv, 128]   dtype of V, written
//	Ht          [N, Hv, 128, 128] FP32, optional, written
//
// For packed variable-length sequences set B = 1 and give the boundaries
// twice: CuSeqlens on the host (validated, and used to plan) and
// CuSeqlensDevice, the same values in device memory (Int32 or Int64, shape
// [N+1]) that the kernel reads; they must hold the same values (the kernel
// clamps what it reads to the B*T tokens, but cannot check more). N is the
// number of sequences: B, or len(CuSeqlens)-1, at most 65535.
//
// Device pointers must be aligned: q, k, v, o and A to 16 bytes (they are
// copied in 16-byte vectors), h0 and ht to 8, g and beta to 4; cudaMalloc's
// are. Every tensor is dense and row-major in exactly its shape.
//
// The kernels compute in fp16 on the tensor cores (fp32 accumulation, fp32
// state): values of v, and of the state they build, beyond fp16's range
// (|x| > 65504) overflow to Inf, which shows in o and ht. Normalised q and k
// and unit-scale v, what the models feed it, are far inside.
type CoreArgs struct {
	Q, K, V, G, Beta, A Tensor
	H0                  Tensor
	O, Ht               Tensor
	CuSeqlens           []int
	CuSeqlensDevice     Tensor
	Scale               float32 // 0 means 1/sqrt(128)

	// aPrepared: A is the full forward's scratch, A2 = A diag(beta) as
	// gdn_prep_chunk writes it (FP16, zero above the diagonal), which the
	// kernel takes as it is (kernsrc.HopperFlagAPrepared). Never set by
	// callers: a public A is FP32 or BF16.
	aPrepared bool
	// qkFP16: q and k are the full forward's normalised copies, FP16
	// whatever v's dtype (the preparation writes them so; the core then runs
	// kernsrc.CoreBF16FP16QK on bf16 v). Never set by callers.
	qkFP16 bool
	// qkNorm: q and k are the full forward's raw bf16 inputs, which the
	// core kernel L2-normalises itself (kernsrc.CoreBF16L2Norm: the copies
	// qkFP16 would read, to the bit). Never set by callers.
	qkNorm bool
	// fused: the full forward's whole preparation in the core kernel
	// (kernsrc.CoreBF16Fused with qkNorm, kernsrc.CoreBF16FusedNoNorm
	// without; bf16 q and k as given): G is the raw log-gate (or, with
	// gateInKernel, the gate's raw input, with aLog and dtBias), summed in
	// each chunk by the kernel, and A is a stand-in it never reads. Never set
	// by callers.
	fused, gateInKernel bool
	aLog, dtBias        Tensor
}

// Problem is the validated size of a call.
type Problem struct {
	B, T, Hq, Hv int
	N            int   // number of sequences
	Seqs         []int // cu_seqlens (N+1 offsets into the B*T tokens); nil without varlen
	Dtype        Dtype // of v and o, and of q and k but for QKDtype
	QKDtype      Dtype // of q and k: Dtype (or unset), or FP16 for the full forward's normalised copies (CoreArgs.qkFP16)
	QKNorm       bool  // the core kernel L2-normalises q and k (the full forward's L2Norm, bf16, CoreArgs.qkNorm)
	Fused        bool  // the core kernel does the full forward's preparation (with QKNorm, after its L2 norm; CoreArgs.fused)
	BetaDtype    Dtype
	ADtype       Dtype // FP16 only for the full forward's prepared A2 (CoreArgs.aPrepared)
	SeqlensDtype Dtype // of CuSeqlensDevice; DtypeInvalid without varlen
	HasH0, HasHt bool
	Scale        float32
}

// Tokens is B*T.
func (p Problem) Tokens() int { return p.B * p.T }

// seqBounds returns sequence n's tokens [b, e) as flat indices into the
// B*T tokens (without cu_seqlens, sequence n is batch row n).
func (p Problem) seqBounds(n int) (b, e int) {
	if p.Seqs != nil {
		return p.Seqs[n], p.Seqs[n+1]
	}
	return n * p.T, (n + 1) * p.T
}

// G is the number of value heads per query/key head (Hv/Hq).
func (p Problem) G() int { return p.Hv / p.Hq }

// ValidateCore checks every argument of a core forward against docs/SPEC.md and
// returns the problem size. Errors wrap ErrInvalidArgument and name the
// argument. Nothing is launched or read from the device.
func ValidateCore(a *CoreArgs) (Problem, error) {
	var p Problem
	if a == nil {
		return p, argErrorf("args", "nil *CoreArgs")
	}
	if len(a.Q.Shape) != 4 {
		return p, argErrorf("q", "rank %d, want 4: [B, T, Hq, %d]", len(a.Q.Shape), HeadDim)
	}
	p.B, p.T, p.Hq = a.Q.Shape[0], a.Q.Shape[1], a.Q.Shape[2]
	if a.Q.Shape[3] != HeadDim {
		return p, argErrorf("q", "head dimension %d, want %d", a.Q.Shape[3], HeadDim)
	}
	if len(a.V.Shape) != 4 {
		return p, argErrorf("v", "rank %d, want 4: [B, T, Hv, %d]", len(a.V.Shape), HeadDim)
	}
	p.Hv = a.V.Shape[2]
	if dim, msg := checkSizes(p.B, p.T, p.Hq, p.Hv); msg != "" {
		arg, shape := "q", a.Q.Shape
		if dim == "Hv" {
			arg, shape = "v", a.V.Shape
		}
		return p, argErrorf(arg, "%s (shape %v)", msg, shape)
	}
	p.Dtype, p.QKDtype = a.Q.Dtype, a.Q.Dtype
	if a.qkFP16 {
		p.Dtype, p.QKDtype = a.V.Dtype, FP16
	}
	if a.qkNorm {
		if a.qkFP16 || p.Dtype != BF16 {
			return p, argErrorf("q", "dtype %v: the core normalises bf16 q and k only", p.Dtype)
		}
		p.QKNorm = true
	}
	if a.fused {
		if a.qkFP16 || p.Dtype != BF16 {
			return p, argErrorf("q", "dtype %v: the fused preparation takes bf16 q and k as given", p.Dtype)
		}
		p.Fused = true
	}
	if p.Dtype != BF16 && p.Dtype != FP16 {
		return p, argErrorf("q", "dtype %v, want bf16 or fp16", p.Dtype)
	}

	// Sequences.
	p.N = p.B
	if p.N > maxSeqs {
		return p, argErrorf("q", "B = %d sequences, at most %d per call", p.B, maxSeqs)
	}
	if a.CuSeqlens != nil {
		if err := checkCuSeqlens(a.CuSeqlens, p.B, p.T); err != nil {
			return p, err
		}
		p.N = len(a.CuSeqlens) - 1
		if p.N > maxSeqs {
			return p, argErrorf("cu_seqlens", "%d sequences, at most %d per call", p.N, maxSeqs)
		}
		p.Seqs = a.CuSeqlens
		d := a.CuSeqlensDevice
		if d.Dtype != Int32 && d.Dtype != Int64 {
			return p, argErrorf("cu_seqlens (device)", "dtype %v, want int32 or int64", d.Dtype)
		}
		if err := checkTensor("cu_seqlens (device)", d, d.Dtype, shapeOf(p.N+1), d.Dtype.Size()); err != nil {
			return p, err
		}
		p.SeqlensDtype = d.Dtype
	} else if a.CuSeqlensDevice.Present() {
		return p, argErrorf("cu_seqlens", "the device copy is given but the host copy (CuSeqlens) is not: both are needed")
	}

	// Fixed arrays, not slices: validation must not allocate (Forward
	// validates every call); only a failed check builds its message.
	b, t := p.B, p.T
	aDtypes := dtypesOf(FP32, BF16)
	if a.aPrepared {
		aDtypes = dtypesOf(FP16)
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
		{"g", a.G, dtypesOf(FP32), shapeOf(b, t, p.Hv), 4},
		{"beta", a.Beta, dtypesOf(FP32, p.Dtype), shapeOf(b, t, p.Hv), 0}, // aligned to its element
		{"A", a.A, aDtypes, shapeOf(b, t, p.Hv, ChunkLen), 16},            // copied in 16-byte vectors
		{"o", a.O, dtypesOf(p.Dtype), shapeOf(b, t, p.Hv, HeadDim), 16},
	}
	for _, s := range operands {
		if !s.dtypes.has(s.t.Dtype) {
			return p, argErrorf(s.name, "dtype %v, want %v", s.t.Dtype, s.dtypes)
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
		if err := checkTensor("h0", a.H0, FP32, state, 8); err != nil {
			return p, err
		}
		p.HasH0 = true
	}
	if a.Ht.Present() || a.Ht.Shape != nil {
		if err := checkTensor("ht", a.Ht, FP32, state, 8); err != nil {
			return p, err
		}
		p.HasHt = true
	}

	if err := checkNoOverlap(a, p); err != nil {
		return p, err
	}

	p.Scale = a.Scale
	if p.Scale == 0 {
		p.Scale = float32(1 / math.Sqrt(HeadDim))
	}
	if math.IsNaN(float64(p.Scale)) || math.IsInf(float64(p.Scale), 0) {
		return p, argErrorf("scale", "%v is not finite", p.Scale)
	}
	return p, nil
}

// ownSlices replaces a's slices (every tensor's shape, cu_seqlens) with
// copies, for a CoreArgs that is kept beyond the call that passed it.
func (a *CoreArgs) ownSlices() {
	a.CuSeqlens = slices.Clone(a.CuSeqlens)
	for _, t := range [...]*Tensor{&a.Q, &a.K, &a.V, &a.G, &a.Beta, &a.A, &a.H0, &a.O, &a.Ht, &a.CuSeqlensDevice, &a.aLog, &a.dtBias} {
		t.Shape = slices.Clone(t.Shape)
	}
}

// checkNoOverlap refuses outputs (o, ht) that share memory with an input or
// with each other: the kernels' CTAs read their inputs while other CTAs
// write outputs, so an overlap gives a wrong answer, not an error. ht may be
// h0 itself (the state updated in place): each CTA reads its own part of h0
// before it writes that part of ht. A prepared A (the full forward's own
// scratch, or validation's stand-in address) is not the caller's and is
// left out. The extents come from p (the shapes are checked by now): a few
// dozen nanoseconds a call, nothing allocated unless it fails.
func checkNoOverlap(a *CoreArgs, p Problem) error {
	tok, hv := uintptr(p.B*p.T), uintptr(p.Hv)
	vo := tok * hv * HeadDim * uintptr(p.Dtype.Size())
	qk := tok * uintptr(p.Hq) * HeadDim * uintptr(p.QKDtype.Size())
	state := uintptr(p.N) * hv * HeadDim * HeadDim * 4
	var aBytes, h0Bytes, cuBytes uintptr
	if !a.aPrepared {
		aBytes = tok * hv * ChunkLen * uintptr(a.A.Dtype.Size())
	}
	if p.HasH0 {
		h0Bytes = state
	}
	if a.CuSeqlens != nil {
		cuBytes = uintptr(p.N+1) * uintptr(a.CuSeqlensDevice.Dtype.Size())
	}
	ins := [...]span{{a.Q.Ptr, qk}, {a.K.Ptr, qk}, {a.V.Ptr, vo}, {a.G.Ptr, tok * hv * 4},
		{a.Beta.Ptr, tok * hv * uintptr(a.Beta.Dtype.Size())}, {a.A.Ptr, aBytes}, {a.H0.Ptr, h0Bytes}, {a.CuSeqlensDevice.Ptr, cuBytes}}
	names := [...]string{"q", "k", "v", "g", "beta", "A", "h0", "cu_seqlens (device)"}
	const h0 = 6
	o := span{a.O.Ptr, vo}
	ht := span{a.Ht.Ptr, 0}
	if p.HasHt {
		ht.n = state
	}
	for i, in := range ins {
		if o.overlaps(in) {
			return overlapError("o", o, names[i], in)
		}
		if ht.overlaps(in) && !(i == h0 && ht.p == in.p) {
			return overlapError("ht", ht, names[i], in)
		}
	}
	if ht.overlaps(o) {
		return argErrorf("ht", "shares memory with o: the two outputs must not overlap")
	}
	return nil
}

// span is the bytes [p, p + n) of a tensor; n = 0 overlaps nothing.
type span struct{ p, n uintptr }

func (x span) overlaps(y span) bool { return x.n > 0 && y.n > 0 && x.p < y.p+y.n && y.p < x.p+x.n }

func overlapError(out string, o span, in string, i span) error {
	return argErrorf(out, "shares memory with %s (output [%#x, %#x), input [%#x, %#x)): outputs must not overlap inputs (ht may be h0 itself)",
		in, o.p, o.p+o.n, i.p, i.p+i.n)
}

// spanOf is the bytes t's shape covers from its pointer.
func spanOf(t Tensor) span { return span{t.Ptr, uintptr(t.Elems() * t.Dtype.Size())} }

// maxHeads bounds Hq and Hv: the preparation and scan kernels run one grid
// row (grid.y, at most 65535) per value head; no model comes close, and
// with B*T below 2^31 it keeps every element count and byte size far from
// overflowing.
const maxHeads = 65535

// maxSeqs is the most sequences one call runs (the grid's y dimension).
const maxSeqs = 65535

// checkSizes checks the problem dimensions; it returns the offending one
// ("B", "T", "Hq" or "Hv") and what is wrong, or "" when all is well.
func checkSizes(b, t, hq, hv int) (dim, msg string) {
	switch {
	case b < 1:
		return "B", fmt.Sprintf("B = %d, want at least 1", b)
	case t < 1:
		return "T", fmt.Sprintf("T = %d, want at least 1", t)
	case hq < 1 || hq > maxHeads:
		return "Hq", fmt.Sprintf("Hq = %d query/key heads, want 1 to %d", hq, maxHeads)
	case hv < 1 || hv > maxHeads:
		return "Hv", fmt.Sprintf("Hv = %d value heads, want 1 to %d", hv, maxHeads)
	case hv%hq != 0:
		return "Hv", fmt.Sprintf("Hv = %d value heads must be a multiple of Hq = %d query/key heads", hv, hq)
	case t > math.MaxInt32/b:
		return "T", fmt.Sprintf("B*T = %d*%d tokens, at most %d", b, t, math.MaxInt32)
	}
	return "", ""
}

// checkCuSeqlens applies the rules of docs/SPEC.md: B = 1, starts at 0, never decreases,
// ends at B*T; empty sequences are allowed.
func checkCuSeqlens(cu []int, b, t int) error {
	if b != 1 {
		return argErrorf("cu_seqlens", "packed sequences need B = 1, got B = %d", b)
	}
	if len(cu) < 2 {
		return argErrorf("cu_seqlens", "%d offsets, want at least 2 (N+1 for N sequences)", len(cu))
	}
	if cu[0] != 0 {
		return argErrorf("cu_seqlens", "starts at %d, want 0", cu[0])
	}
	for i := 1; i < len(cu); i++ {
		if cu[i] < cu[i-1] {
			return argErrorf("cu_seqlens", "decreases at index %d (%d after %d)", i, cu[i], cu[i-1])
		}
	}
	if last := cu[len(cu)-1]; last != b*t {
		return argErrorf("cu_seqlens", "ends at %d, want B*T = %d", last, b*t)
	}
	return nil
}

// checkTensor verifies shape, dtype, pointer, alignment and size of one operand.
func checkTensor(name string, t Tensor, dtype Dtype, shape dims, align int) error {
	if t.Dtype != dtype {
		return argErrorf(name, "dtype %v, want %v", t.Dtype, dtype)
	}
	if len(t.Shape) != shape.n {
		return argErrorf(name, "rank %d (shape %v), want shape %v", len(t.Shape), t.Shape, shape.ints())
	}
	for i, d := range shape.d[:shape.n] {
		if t.Shape[i] != d {
			return argErrorf(name, "shape %v, want %v", t.Shape, shape.ints())
		}
	}
	if t.Ptr == 0 {
		return argErrorf(name, "nil device pointer")
	}
	if t.Ptr%uintptr(align) != 0 {
		return argErrorf(name, "device pointer %#x is not %d-byte aligned", t.Ptr, align)
	}
	if need := t.Elems() * dtype.Size(); t.Bytes < need {
		return argErrorf(name, "buffer holds %d bytes, shape %v of %v needs %d", t.Bytes, shape.ints(), dtype, need)
	}
	return nil
}

// dims is an expected shape of up to four dimensions, held by value: a
// []int passed on to an error message would escape to the heap on every
// call, failed or not.
type dims struct {
	n int
	d [4]int
}

func shapeOf(d ...int) dims {
	var s dims
	s.n = copy(s.d[:], d)
	return s
}

// ints returns the shape as a slice, for messages.
func (s dims) ints() []int { return append([]int(nil), s.d[:s.n]...) }

// dtypeSet is the one or two dtypes an operand may have, by value (see dims).
type dtypeSet struct {
	n int
	d [2]Dtype
}

func dtypesOf(d ...Dtype) dtypeSet {
	var s dtypeSet
	s.n = copy(s.d[:], d)
	return s
}

func (s dtypeSet) has(d Dtype) bool {
	for _, x := range s.d[:s.n] {
		if d == x {
			return true
		}
	}
	return false
}

// String lists the set: "fp32 or bf16".
func (s dtypeSet) String() string {
	out := ""
	for i, d := range s.d[:s.n] {
		if i > 0 {
			out += " or "
		}
		out += d.String()
	}
	return out
}

func (p Problem) String() string {
	return fmt.Sprintf("B=%d T=%d Hq=%d Hv=%d N=%d %v", p.B, p.T, p.Hq, p.Hv, p.N, p.Dtype)
}
