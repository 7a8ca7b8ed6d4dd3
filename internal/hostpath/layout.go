package hostpath

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/problem"
)

// Moving a host call's tensors to the device and back. Every tensor of a
// call lives in one block, at an aligned offset, in its device encoding:
// inputs first, outputs after. The same offsets serve the device
// allocation and the host staging buffer, so one copy moves all inputs and
// one all outputs, and one allocation holds everything.

// layoutAlign separates tensors within the block: cudaMalloc's alignment,
// more than any tensor needs (16 bytes).
const layoutAlign = 256

// tensorID names one tensor of a host call, of the core or the full
// forward: both go through the same layout, staging and conversion; only
// the set of inputs differs (A for the core; A_log and dt_bias for the full
// forward's in-kernel gate).
type tensorID uint8

const (
	tensorQ tensorID = iota
	tensorK
	tensorV
	tensorG
	tensorBeta
	tensorA      // core forward only
	tensorALog   // full forward with GateInKernel only
	tensorDtBias // full forward with GateInKernel only
	tensorH0
	tensorCu // cu_seqlens, the device copy
	tensorO
	tensorHt
	numTensors
)

// callTensors are the tensors of one host call by id; absent ones are zero.
type callTensors [numTensors]problem.Tensor

// layoutSlot is one tensor of a layout.
type layoutSlot struct {
	id   tensorID
	t    *problem.Tensor // &Layout.tensors[id]
	off  int             // byte offset in the block
	src  []float32       // host values of a floating-point input
	ints []int           // host values of cu_seqlens
}

// Layout places the tensors of one host call (HostCoreArgs or
// HostFullArgs) in a block.
type Layout struct {
	tensors   callTensors // Dtype, Shape and Bytes set; bind sets Ptr in a copy
	cuSeqlens []int
	scale     float32
	// full marks a full-forward call (HostFullArgs), with its switches.
	full, l2norm, gateInKernel, betaLogits, negEigval bool
	in, out                                           []layoutSlot
	inBytes                                           int // inputs occupy [0, inBytes)
	total                                             int // outputs occupy [inBytes, total)
}

// hostSpec is what HostCoreArgs and HostFullArgs have in common: sizes,
// sequences, dtypes and the inputs both forwards take. The inputs of one
// forward alone come to layout as extra hostInputs.
type hostSpec struct {
	b, t, hq, hv             int
	n                        int // sequences, set by check
	cuSeqlens                []int
	dtype, betaDt, seqlensDt dtype.Dtype // defaults applied
	q, k, v, g, beta, h0     []float32
	finalState               bool
	scale                    float32
}

// hostInput is one floating-point input of a host call.
type hostInput struct {
	name  string // as errors name it
	id    tensorID
	dt    dtype.Dtype
	shape []int
	src   []float32
}

// check applies the rules both forwards share (errors name the argument,
// as Forward's do) and sets s.n: every rule of ValidateCore that the host
// values decide, so that a host call fails before it allocates anything
// and an upload never returns Args that Forward refuses. It replaces
// s.cuSeqlens with a copy: what is checked is what the layout encodes and
// what an upload's Args hold, whatever the caller does with its slice
// later.
func (s *hostSpec) check() error {
	s.cuSeqlens = slices.Clone(s.cuSeqlens)
	if dim, msg := problem.CheckSizes(s.b, s.t, s.hq, s.hv); msg != "" {
		return gdnerr.Argf(dim, "%s", msg)
	}
	if s.dtype != dtype.BF16 && s.dtype != dtype.FP16 {
		return gdnerr.Argf("Dtype", "%v, want bf16 or fp16", s.dtype)
	}
	if s.betaDt != dtype.FP32 && s.betaDt != s.dtype {
		return gdnerr.Argf("BetaDtype", "%v, want fp32 or the input dtype %v", s.betaDt, s.dtype)
	}
	if s.seqlensDt != dtype.Int32 && s.seqlensDt != dtype.Int64 {
		return gdnerr.Argf("SeqlensDtype", "%v, want int32 or int64", s.seqlensDt)
	}
	s.n = s.b
	if s.cuSeqlens != nil {
		if err := problem.CheckCuSeqlens(s.cuSeqlens, s.b, s.t); err != nil {
			return err
		}
		s.n = len(s.cuSeqlens) - 1
		if s.n > problem.MaxSeqs {
			return gdnerr.Argf("cu_seqlens", "%d sequences, at most %d per call", s.n, problem.MaxSeqs)
		}
		if s.seqlensDt == dtype.Int32 && s.cuSeqlens[s.n] > math.MaxInt32 {
			return gdnerr.Argf("cu_seqlens", "offset %d does not fit int32", s.cuSeqlens[s.n])
		}
	} else if s.n > problem.MaxSeqs {
		return gdnerr.Argf("B", "B = %d sequences, at most %d per call", s.b, problem.MaxSeqs)
	}
	if x := float64(s.scale); math.IsNaN(x) || math.IsInf(x, 0) {
		return gdnerr.Argf("scale", "%v is not finite", s.scale)
	}
	return nil
}

// bt is the shape [B, T, last...].
func (s *hostSpec) bt(last ...int) []int { return append([]int{s.b, s.t}, last...) }

// layout lays out the tensors of a checked spec: q, k, v, g, beta, extra
// (in order), h0, cu_seqlens; then the outputs o and ht.
func (s *hostSpec) layout(extra ...hostInput) (*Layout, error) {
	state := []int{s.n, s.hv, problem.HeadDim, problem.HeadDim}
	l := &Layout{cuSeqlens: s.cuSeqlens, scale: s.scale}
	// slot describes one tensor of l.tensors and returns its layout slot.
	slot := func(id tensorID, dt dtype.Dtype, shape []int) layoutSlot {
		t := &l.tensors[id]
		*t = problem.Tensor{Dtype: dt, Shape: shape}
		t.Bytes = t.Elems() * dt.Size()
		return layoutSlot{id: id, t: t}
	}
	inputs := append([]hostInput{
		{"q", tensorQ, s.dtype, s.bt(s.hq, problem.HeadDim), s.q},
		{"k", tensorK, s.dtype, s.bt(s.hq, problem.HeadDim), s.k},
		{"v", tensorV, s.dtype, s.bt(s.hv, problem.HeadDim), s.v},
		{"g", tensorG, dtype.FP32, s.bt(s.hv), s.g},
		{"beta", tensorBeta, s.betaDt, s.bt(s.hv), s.beta},
	}, extra...)
	if s.h0 != nil {
		inputs = append(inputs, hostInput{"h0", tensorH0, dtype.FP32, state, s.h0})
	}
	for _, in := range inputs {
		sl := slot(in.id, in.dt, in.shape)
		if len(in.src) != sl.t.Elems() {
			return nil, gdnerr.Argf(in.name, "%d values, want %d for B=%d T=%d Hq=%d Hv=%d", len(in.src), sl.t.Elems(), s.b, s.t, s.hq, s.hv)
		}
		sl.src = in.src
		l.in = append(l.in, sl)
	}
	if s.cuSeqlens != nil {
		sl := slot(tensorCu, s.seqlensDt, []int{len(s.cuSeqlens)})
		sl.ints = s.cuSeqlens
		l.in = append(l.in, sl)
	}
	l.out = append(l.out, slot(tensorO, s.dtype, s.bt(s.hv, problem.HeadDim)))
	if s.finalState {
		l.out = append(l.out, slot(tensorHt, dtype.FP32, state))
	}

	off := 0
	place := func(slots []layoutSlot) {
		for i := range slots {
			slots[i].off = off
			off += (slots[i].t.Bytes + layoutAlign - 1) / layoutAlign * layoutAlign
		}
	}
	place(l.in)
	l.inBytes = off
	place(l.out)
	l.total = off
	return l, nil
}

// NewCoreLayout checks h (errors name the argument, as Forward's do) and
// lays its tensors out.
func NewCoreLayout(h *CoreArgs) (*Layout, error) {
	if h == nil {
		return nil, gdnerr.Argf("args", "nil *HostCoreArgs")
	}
	s := hostSpec{b: h.B, t: h.T, hq: h.Hq, hv: h.Hv, cuSeqlens: h.CuSeqlens, dtype: h.Dtype,
		betaDt: orDefault(h.BetaDtype, dtype.FP32), seqlensDt: orDefault(h.SeqlensDtype, dtype.Int32),
		q: h.Q, k: h.K, v: h.V, g: h.G, beta: h.Beta, h0: h.H0, finalState: h.FinalState, scale: h.Scale}
	if err := s.check(); err != nil {
		return nil, err
	}
	aDt := orDefault(h.ADtype, dtype.FP32)
	if aDt != dtype.FP32 && aDt != dtype.BF16 {
		return nil, gdnerr.Argf("ADtype", "%v, want fp32 or bf16", aDt)
	}
	return s.layout(hostInput{"A", tensorA, aDt, s.bt(s.hv, problem.ChunkLen), h.A})
}

// NewFullLayout checks h (errors name the argument, as ForwardFull's
// do) and lays its tensors out; the gate's parameters A_log and dt_bias are
// inputs when GateInKernel is on, and refused when it is off (given
// without it, they would be silently ignored).
func NewFullLayout(h *FullArgs) (*Layout, error) {
	if h == nil {
		return nil, gdnerr.Argf("args", "nil *HostFullArgs")
	}
	if h.NegEigval && !h.BetaLogits {
		return nil, gdnerr.Argf("neg_eigval", "set without beta_logits: it applies to beta given as logits (2 sigmoid(b))")
	}
	s := hostSpec{b: h.B, t: h.T, hq: h.Hq, hv: h.Hv, cuSeqlens: h.CuSeqlens, dtype: h.Dtype,
		betaDt: orDefault(h.BetaDtype, dtype.FP32), seqlensDt: orDefault(h.SeqlensDtype, dtype.Int32),
		q: h.Q, k: h.K, v: h.V, g: h.G, beta: h.Beta, h0: h.H0, finalState: h.FinalState, scale: h.Scale}
	if err := s.check(); err != nil {
		return nil, err
	}
	var extra []hostInput
	switch {
	case h.GateInKernel:
		for _, x := range []struct {
			name string
			id   tensorID
			src  []float32
		}{{"a_log", tensorALog, h.ALog}, {"dt_bias", tensorDtBias, h.DtBias}} {
			if x.src == nil {
				return nil, gdnerr.Argf(x.name, "GateInKernel needs it: %d values, one per value head", h.Hv)
			}
			extra = append(extra, hostInput{x.name, x.id, dtype.FP32, []int{s.hv}, x.src})
		}
	case h.ALog != nil:
		return nil, gdnerr.Argf("a_log", "given but GateInKernel is off (g would be taken as the log-gate itself)")
	case h.DtBias != nil:
		return nil, gdnerr.Argf("dt_bias", "given but GateInKernel is off (g would be taken as the log-gate itself)")
	}
	l, err := s.layout(extra...)
	if err != nil {
		return nil, err
	}
	l.full, l.l2norm, l.gateInKernel = true, h.L2Norm, h.GateInKernel
	l.betaLogits, l.negEigval = h.BetaLogits, h.NegEigval
	return l, nil
}

// encodeInputs writes every input in its device encoding into buf, which
// holds at least inBytes bytes, on all cores.
func (l *Layout) encodeInputs(buf []byte) {
	l.encodeInts(buf)
	l.encodeRun(buf, cutPieces(l.in, pieceBytes)).run()
}

// encodeInts writes the integer inputs (cu_seqlens) into buf.
func (l *Layout) encodeInts(buf []byte) {
	for _, s := range l.in {
		if s.ints == nil {
			continue
		}
		dst := buf[s.off : s.off+s.t.Bytes]
		for i, v := range s.ints { // checked to fit at layout time
			if s.t.Dtype == dtype.Int64 {
				binary.NativeEndian.PutUint64(dst[8*i:], uint64(v))
			} else {
				binary.NativeEndian.PutUint32(dst[4*i:], uint32(v))
			}
		}
	}
}

// encodeRun converts the floating-point inputs of pieces (cut from l.in)
// into buf.
func (l *Layout) encodeRun(buf []byte, pieces []convPiece) *convRun {
	return &convRun{pieces: pieces, work: func(p *convPiece, lo, hi int) {
		s := &l.in[p.slot]
		encodeRange(buf[s.off:s.off+s.t.Bytes], s.t.Dtype, s.src, lo, hi)
	}}
}

// bind returns the call's tensors for a block at device address base.
func (l *Layout) bind(base driver.DevicePtr) *callTensors {
	t := l.tensors
	for _, slots := range [][]layoutSlot{l.in, l.out} {
		for _, s := range slots {
			t[s.id].Ptr = uintptr(base.Offset(s.off))
		}
	}
	return &t
}

// coreArgs returns the problem.Core of a core call bound at base.
func (l *Layout) coreArgs(base driver.DevicePtr) *problem.Core {
	t := l.bind(base)
	return &problem.Core{Q: t[tensorQ], K: t[tensorK], V: t[tensorV], G: t[tensorG], Beta: t[tensorBeta], A: t[tensorA],
		H0: t[tensorH0], O: t[tensorO], Ht: t[tensorHt], CuSeqlens: l.cuSeqlens, CuSeqlensDevice: t[tensorCu], Scale: l.scale}
}

// fullArgs returns the problem.Full of a full call bound at base.
func (l *Layout) fullArgs(base driver.DevicePtr) *problem.Full {
	t := l.bind(base)
	return &problem.Full{Q: t[tensorQ], K: t[tensorK], V: t[tensorV], G: t[tensorG], Beta: t[tensorBeta],
		ALog: t[tensorALog], DtBias: t[tensorDtBias], H0: t[tensorH0], O: t[tensorO], Ht: t[tensorHt],
		CuSeqlens: l.cuSeqlens, CuSeqlensDevice: t[tensorCu], Scale: l.scale, L2Norm: l.l2norm, GateInKernel: l.gateInKernel,
		BetaLogits: l.betaLogits, NegEigval: l.negEigval}
}

// results points res.O (and res.Ht when the call returns the final state)
// at slices of the outputs' lengths, reusing their arrays when large
// enough, and returns them in the order of l.out. Without a final state,
// res.Ht keeps its array at length 0.
func (l *Layout) results(res *Result) [][]float32 {
	fit := func(x []float32, n int) []float32 {
		if cap(x) >= n {
			return x[:n]
		}
		return make([]float32, n)
	}
	res.Ht = res.Ht[:0]
	dsts := make([][]float32, len(l.out))
	for i, s := range l.out {
		if s.id == tensorO {
			res.O = fit(res.O, s.t.Elems())
			dsts[i] = res.O
		} else {
			res.Ht = fit(res.Ht, s.t.Elems())
			dsts[i] = res.Ht
		}
	}
	return dsts
}

// decodeRun widens the outputs of pieces (cut from l.out) in buf, the
// whole block as copied back from the device, into dsts (from results).
func (l *Layout) decodeRun(buf []byte, dsts [][]float32, pieces []convPiece) *convRun {
	return &convRun{pieces: pieces, work: func(p *convPiece, lo, hi int) {
		s := &l.out[p.slot]
		decodeRange(dsts[p.slot], buf[s.off:s.off+s.t.Bytes], s.t.Dtype, lo, hi)
	}}
}

// decodeOutputs widens the outputs in buf (the whole block, as copied back
// from the device) to float32 on all cores, into res (see results).
func (l *Layout) decodeOutputs(buf []byte, res *Result) {
	l.decodeRun(buf, l.results(res), cutPieces(l.out, pieceBytes)).run()
}

// poisonOutputs fills the outputs of a call bound at base with NaN on the
// legacy default stream, so that an element the kernel does not write
// cannot pass for a result.
func (l *Layout) poisonOutputs(ctx *driver.Context, base driver.DevicePtr) error {
	for _, s := range l.out {
		t, p := s.t, base.Offset(s.off)
		var err error
		if t.Dtype.Size() == 2 {
			err = ctx.MemsetD16(p, 0x7fff, t.Elems(), nil)
		} else {
			err = ctx.MemsetD32(p, 0x7fffffff, t.Elems(), nil)
		}
		if err != nil {
			return fmt.Errorf("fill outputs with NaN: %w", err)
		}
	}
	return nil
}
