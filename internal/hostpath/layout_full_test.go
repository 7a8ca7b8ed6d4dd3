package hostpath

import (
	"errors"
	"math"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/problem"
)

// fullHostArgs is a small packed full call with every optional input: the
// gate's raw input with A_log and dt_bias, h0, the final state.
func fullHostArgs() *FullArgs {
	c := layoutArgs()
	return &FullArgs{B: c.B, T: c.T, Hq: c.Hq, Hv: c.Hv, CuSeqlens: c.CuSeqlens, Dtype: c.Dtype,
		Q: c.Q, K: c.K, V: c.V, G: c.G, Beta: c.Beta, ALog: []float32{-1.5, 0.25}, DtBias: []float32{0.5, -2}, H0: c.H0,
		FinalState: true, L2Norm: true, GateInKernel: true}
}

// The problem.Full of a full host call, bound to an address, pass ValidateFull:
// the gate's parameters are there exactly when GateInKernel is on, the
// switches (beta's as logits too) travel, no A is laid out, and the tensors do not overlap.
func TestFullHostLayoutValidates(t *testing.T) {
	for _, edit := range []func(h *FullArgs){
		func(h *FullArgs) {},
		func(h *FullArgs) {
			h.Dtype, h.BetaDtype, h.SeqlensDtype, h.L2Norm = dtype.FP16, dtype.FP16, dtype.Int64, false
		},
		func(h *FullArgs) {
			h.ALog, h.DtBias, h.GateInKernel, h.H0, h.FinalState, h.CuSeqlens = nil, nil, false, nil, false, nil
		},
		func(h *FullArgs) { h.BetaLogits = true },
		func(h *FullArgs) { h.BetaLogits, h.NegEigval = true, true },
	} {
		h := fullHostArgs()
		edit(h)
		l, err := NewFullLayout(h)
		if err != nil {
			t.Fatal(err)
		}
		a := l.fullArgs(layoutBase)
		p, err := problem.ValidateFull(a)
		if err != nil {
			t.Fatalf("%+v: %v", h, err)
		}
		if a.L2Norm != h.L2Norm || a.GateInKernel != h.GateInKernel || a.ALog.Present() != h.GateInKernel ||
			a.BetaLogits != h.BetaLogits || a.NegEigval != h.NegEigval ||
			a.DtBias.Present() != h.GateInKernel || p.HasH0 != (h.H0 != nil) || p.HasHt != h.FinalState || p.Dtype != h.Dtype {
			t.Errorf("args %+v (problem %+v) from %+v", a, p, h)
		}
		if l.tensors[tensorA].Shape != nil {
			t.Error("a full call lays out an A")
		}
		checkPlacement(t, l)
	}
}

// A_log and dt_bias are copied as they are (fp32), beside the rest.
func TestFullHostLayoutEncodes(t *testing.T) {
	h := fullHostArgs()
	l, err := NewFullLayout(h)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, l.total)
	l.encodeInputs(buf)
	a := l.fullArgs(0)
	for _, x := range []struct {
		t    problem.Tensor
		want []float32
	}{{a.ALog, h.ALog}, {a.DtBias, h.DtBias}, {a.G, h.G}} {
		got := asFloat32(buf[x.t.Ptr:], len(x.want))
		for i := range x.want {
			if got[i] != x.want[i] {
				t.Fatalf("value %d = %v, want %v", i, got[i], x.want[i])
			}
		}
	}
}

// Bad full host calls are errors naming the argument, before anything is
// allocated; the gate's parameters are refused without GateInKernel (they
// would be ignored, and g taken as the log-gate) and required with it.
func TestFullHostLayoutErrors(t *testing.T) {
	for _, c := range []struct {
		arg  string
		edit func(h *FullArgs)
	}{
		{"a_log", func(h *FullArgs) { h.ALog = nil }},
		{"dt_bias", func(h *FullArgs) { h.DtBias = nil }},
		{"a_log", func(h *FullArgs) { h.ALog = append(h.ALog, 1) }},
		{"dt_bias", func(h *FullArgs) { h.DtBias = h.DtBias[:1] }},
		{"a_log", func(h *FullArgs) { h.GateInKernel, h.DtBias = false, nil }},
		{"dt_bias", func(h *FullArgs) { h.GateInKernel, h.ALog = false, nil }},
		{"g", func(h *FullArgs) { h.G = h.G[1:] }},
		{"q", func(h *FullArgs) { h.Q = nil }},
		{"beta", func(h *FullArgs) { h.Beta = append(h.Beta, 0) }},
		{"h0", func(h *FullArgs) { h.H0 = h.H0[:7] }},
		{"cu_seqlens", func(h *FullArgs) { h.CuSeqlens = []int{0, 3, 2, 5} }},
		{"Dtype", func(h *FullArgs) { h.Dtype = dtype.FP32 }},
		{"BetaDtype", func(h *FullArgs) { h.BetaDtype = dtype.FP16 }},
		{"SeqlensDtype", func(h *FullArgs) { h.SeqlensDtype = dtype.BF16 }},
		{"Hv", func(h *FullArgs) { h.Hq, h.Hv = 2, 3 }},
		{"T", func(h *FullArgs) { h.T = 0 }},
		{"scale", func(h *FullArgs) { h.Scale = float32(math.Inf(1)) }},
		{"cu_seqlens", func(h *FullArgs) { h.CuSeqlens, h.H0, h.FinalState = manySeqs(h.T), nil, false }},
		{"B", func(h *FullArgs) { h.CuSeqlens, h.B, h.T = nil, problem.MaxSeqs+1, 1 }},
		{"neg_eigval", func(h *FullArgs) { h.NegEigval = true }},
	} {
		h := fullHostArgs()
		c.edit(h)
		_, err := NewFullLayout(h)
		var ae *gdnerr.ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !errors.Is(err, gdnerr.ErrInvalidArgument) {
			t.Errorf("%s: %v", c.arg, err)
		}
	}
	var ae *gdnerr.ArgError
	if _, err := NewFullLayout(nil); !errors.As(err, &ae) || ae.Arg != "args" {
		t.Errorf("nil args: %v", err)
	}
}
