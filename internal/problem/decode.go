package problem

import (
	"math"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
)

// MaxDecodeTokens is the most tokens one sequence may bring to a decode
// call (docs/SPEC.md, "Decode").
const MaxDecodeTokens = 8

// Decode is a decode call's arguments: gdn.DecodeArgs, whose documentation
// gives the shapes and rules.
type Decode struct {
	Q, K, V, G, Beta Tensor
	ALog, DtBias     Tensor
	Pool             Pool
	O, TokenStates   Tensor
	CuSeqlens        []int
	CuSeqlensDevice  Tensor
	Scale            float32 // 0 means 1/sqrt(128)
	Layout           Layout
	L2Norm           bool
	GateInKernel     bool
	BetaLogits       bool
	NegEigval        bool

	// SeqRun: the sequences are a run of a mixed call's (mixed.go):
	// CuSeqlens and its device copy start at the run's first sequence, so
	// the offsets start above 0 and end before B*T (CheckSeqRun).
	SeqRun bool
}

// DecodeInfo is what a validated decode call tells the launch: its size
// and its pool.
type DecodeInfo struct {
	Problem
	Pool           PoolInfo
	HasTokenStates bool
}

// ValidateDecode checks every argument of a decode call against
// docs/SPEC.md ("Bad input" and "Bad input of the serving calls") and
// returns its size. Errors are *gdnerr.ArgError naming the argument;
// nothing is read from the device, and nothing is allocated unless the
// call is refused.
func ValidateDecode(a *Decode) (DecodeInfo, error) {
	var d DecodeInfo
	p := &d.Problem
	if a == nil {
		return d, gdnerr.Argf("args", "nil *DecodeArgs")
	}
	if err := p.sizeFrom(a.Q, a.V); err != nil {
		return d, err
	}
	p.Dtype, p.QKDtype = a.Q.Dtype, a.Q.Dtype
	if p.Dtype != dtype.BF16 && p.Dtype != dtype.FP16 {
		return d, gdnerr.Argf("q", "dtype %v, want bf16 or fp16", p.Dtype)
	}

	// Sequences: B x T, or packed, each of 1 to MaxDecodeTokens tokens.
	if err := p.seqsFrom(a.CuSeqlens, a.CuSeqlensDevice, a.SeqRun); err != nil {
		return d, err
	}
	if a.CuSeqlens == nil && p.T > MaxDecodeTokens {
		return d, gdnerr.Argf("T", "%d tokens a sequence; a decode call takes 1 to %d (q's shape %v)", p.T, MaxDecodeTokens, a.Q.Shape)
	}
	for n := 0; a.CuSeqlens != nil && n < p.N; n++ {
		if l := a.CuSeqlens[n+1] - a.CuSeqlens[n]; l < 1 || l > MaxDecodeTokens {
			return d, gdnerr.Argf("cu_seqlens", "sequence %d has %d tokens; a decode call takes 1 to %d a sequence", n, l, MaxDecodeTokens)
		}
	}

	b, t := p.B, p.T
	operands := [...]struct {
		name   string
		t      Tensor
		dtypes dtypeSet
		shape  dims
		align  int
	}{
		{"q", a.Q, dtypesOf(p.Dtype), shapeOf(b, t, p.Hq, HeadDim), 16},
		{"k", a.K, dtypesOf(p.Dtype), shapeOf(b, t, p.Hq, HeadDim), 16},
		{"v", a.V, dtypesOf(p.Dtype), shapeOf(b, t, p.Hv, HeadDim), 16},
		{"g", a.G, dtypesOf(dtype.FP32), shapeOf(b, t, p.Hv), 4},
		{"beta", a.Beta, dtypesOf(dtype.FP32, p.Dtype), shapeOf(b, t, p.Hv), 0}, // aligned to its element
		{"o", a.O, dtypesOf(p.Dtype), shapeOf(b, t, p.Hv, HeadDim), 16},
	}
	for _, s := range operands {
		if !s.dtypes.has(s.t.Dtype) {
			return d, gdnerr.Argf(s.name, "dtype %v, want %v", s.t.Dtype, s.dtypes)
		}
		align := s.align
		if align == 0 {
			align = s.t.Dtype.Size()
		}
		if err := checkTensor(s.name, s.t, s.t.Dtype, s.shape, align); err != nil {
			return d, err
		}
	}
	p.BetaDtype = a.Beta.Dtype

	if a.GateInKernel {
		if err := checkTensor("a_log", a.ALog, dtype.FP32, shapeOf(p.Hv), 4); err != nil {
			return d, err
		}
		if err := checkTensor("dt_bias", a.DtBias, dtype.FP32, shapeOf(p.Hv), 4); err != nil {
			return d, err
		}
	} else if a.ALog.Present() || a.DtBias.Present() {
		return d, gdnerr.Argf("a_log", "A_log and dt_bias are given but GateInKernel is off")
	}
	if a.NegEigval && !a.BetaLogits {
		return d, gdnerr.Argf("neg_eigval", "doubles sigmoid(b) of beta given as logits only (BetaLogits); beta given as it is may lie in (0, 2) without it")
	}
	if err := CheckLayout(a.Layout); err != nil {
		return d, err
	}
	if !a.Pool.Given() {
		return d, gdnerr.Argf("pool", "missing: a decode call always runs from a state pool and its slot table")
	}
	info, err := CheckPool(a.Pool, p.N, p.Hv)
	if err != nil {
		return d, err
	}
	d.Pool = info
	if a.TokenStates.Present() || a.TokenStates.Shape != nil {
		if err := checkTensor("token_states", a.TokenStates, info.Dtype, shapeOf(b*t, p.Hv, HeadDim, HeadDim), 16); err != nil {
			return d, err
		}
		d.HasTokenStates = true
	}
	if err := checkDecodeApart(a, &d); err != nil {
		return d, err
	}

	p.Scale = a.Scale
	if p.Scale == 0 {
		p.Scale = float32(1 / math.Sqrt(HeadDim))
	}
	if math.IsNaN(float64(p.Scale)) || math.IsInf(float64(p.Scale), 0) {
		return d, gdnerr.Argf("scale", "%v is not finite", p.Scale)
	}
	return d, nil
}

// checkDecodeApart refuses outputs (o, token_states) that share memory
// with an input or with each other, and a pool that shares memory with
// anything: other CTAs read the inputs while a CTA writes its outputs, and
// the pool is read and written in place. Fixed arrays: nothing allocated
// unless it fails.
func checkDecodeApart(a *Decode, d *DecodeInfo) error {
	var cu span
	if d.Seqs != nil {
		cu = span{a.CuSeqlensDevice.Ptr, uintptr(d.N+1) * uintptr(a.CuSeqlensDevice.Dtype.Size())}
	}
	var gate [2]span
	if a.GateInKernel {
		gate = [2]span{spanOf(a.ALog), spanOf(a.DtBias)}
	}
	slots := span{a.Pool.SlotsDevice.Ptr, uintptr(d.N) * 4}
	ins := [...]span{spanOf(a.Q), spanOf(a.K), spanOf(a.V), spanOf(a.G), spanOf(a.Beta), gate[0], gate[1], cu, slots}
	names := [...]string{"q", "k", "v", "g", "beta", "a_log", "dt_bias", "cu_seqlens (device)", "slots (device)"}
	o := spanOf(a.O)
	var ts span
	if d.HasTokenStates {
		ts = spanOf(a.TokenStates)
	}
	for i, in := range ins {
		if o.overlaps(in) {
			return decodeOverlap("o", o, names[i], in)
		}
		if ts.overlaps(in) {
			return decodeOverlap("token_states", ts, names[i], in)
		}
	}
	if ts.overlaps(o) {
		return gdnerr.Argf("token_states", "shares memory with o: the two outputs must not overlap")
	}
	all := [...]span{ins[0], ins[1], ins[2], ins[3], ins[4], ins[5], ins[6], ins[7], o, ts}
	allNames := [...]string{"q", "k", "v", "g", "beta", "a_log", "dt_bias", "cu_seqlens (device)", "o", "token_states"}
	return checkPoolApart(a.Pool, allNames[:], all[:])
}

func decodeOverlap(out string, o span, in string, i span) error {
	return gdnerr.Argf(out, "shares memory with %s (output [%#x, %#x), input [%#x, %#x)): outputs must not overlap inputs",
		in, o.p, o.p+o.n, i.p, i.p+i.n)
}
