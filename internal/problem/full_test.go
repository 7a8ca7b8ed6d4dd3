package problem_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/problem/problemtest"
)

// problem.ValidateFull accepts what the full forward takes and names the argument
// of what it does not: the gate's parameters only with GateInKernel, of
// shape [Hv] in fp32; everything else as problem.ValidateCore.
func TestValidateFull(t *testing.T) {
	a := problemtest.Full(2, 100, 2, 4)
	p, err := problem.ValidateFull(a)
	if err != nil || p.Hv != 4 || p.N != 2 || p.ADtype != dtype.FP16 {
		t.Fatalf("valid args: %+v, %v", p, err)
	}
	hv := problem.Tensor{Ptr: 1 << 30, Bytes: 16, Dtype: dtype.FP32, Shape: []int{4}}
	cases := map[string]func(*problem.Full){
		"a_log":   func(a *problem.Full) { a.GateInKernel = true },
		"dt_bias": func(a *problem.Full) { a.GateInKernel, a.ALog = true, hv },
		"q":       func(a *problem.Full) { a.Q.Shape = []int{2, 100, 2} },
		"g":       func(a *problem.Full) { a.G.Dtype = dtype.BF16 },
		// neg_eigval only applies to beta given as logits.
		"neg_eigval": func(a *problem.Full) { a.NegEigval = true },
	}
	for want, mutate := range cases {
		b := *problemtest.Full(2, 100, 2, 4)
		mutate(&b)
		_, err := problem.ValidateFull(&b)
		var ae *gdnerr.ArgError
		if !errors.As(err, &ae) || ae.Arg != want || !errors.Is(err, gdnerr.ErrInvalidArgument) {
			t.Errorf("%s: %v", want, err)
		}
	}
	b := *problemtest.Full(2, 100, 2, 4)
	b.ALog = hv
	if _, err := problem.ValidateFull(&b); err == nil {
		t.Error("A_log without GateInKernel accepted")
	}
	b.GateInKernel, b.DtBias = true, hv
	if _, err := problem.ValidateFull(&b); err != nil {
		t.Errorf("gate in kernel: %v", err)
	}
	if _, err := problem.ValidateFull(nil); err == nil {
		t.Error("nil accepted")
	}
	for _, neg := range []bool{false, true} {
		b := *problemtest.Full(2, 100, 2, 4)
		b.BetaLogits, b.NegEigval = true, neg
		if _, err := problem.ValidateFull(&b); err != nil {
			t.Errorf("beta logits (neg_eigval %v): %v", neg, err)
		}
	}
}

// The full forward's outputs must not overlap its gate parameters either.
func TestValidateFullOverlaps(t *testing.T) {
	a := problemtest.Full(2, 100, 2, 4)
	a.GateInKernel = true
	a.ALog = problem.Tensor{Ptr: a.O.Ptr + 64, Bytes: 16, Dtype: dtype.FP32, Shape: []int{4}}
	a.DtBias = problem.Tensor{Ptr: 1 << 43, Bytes: 16, Dtype: dtype.FP32, Shape: []int{4}}
	_, err := problem.ValidateFull(a)
	var ae *gdnerr.ArgError
	if !errors.As(err, &ae) || ae.Arg != "o" || !strings.Contains(err.Error(), "a_log") {
		t.Errorf("o over a_log: %v", err)
	}
	a.ALog.Ptr = 1 << 44
	if _, err := problem.ValidateFull(a); err != nil {
		t.Errorf("apart: %v", err)
	}
}

// A prepared full call is validated again at every call: it keeps slices
// of its own (OwnSlices, in the launcher's newFullCall), so a caller that reuses its shape
// slices for other calls once this one has returned does not change what
// the entry computes.
func TestOwnSlices(t *testing.T) {
	a := problemtest.Varlen()
	kept := *a
	kept.OwnSlices()
	before, err := problem.ValidateCore(&kept)
	if err != nil {
		t.Fatal(err)
	}
	for _, t := range []*problem.Tensor{&a.Q, &a.K, &a.V, &a.G, &a.Beta, &a.A, &a.H0, &a.O, &a.Ht, &a.CuSeqlensDevice} {
		t.Shape[0] = 7 // the caller's next problem, in the same slices
	}
	a.CuSeqlens[1] = 9
	after, err := problem.ValidateCore(&kept)
	if err != nil || after.String() != before.String() || kept.CuSeqlens[1] != 1000 {
		t.Errorf("kept args changed with the caller's slices: %v / %v (%v)", before, after, err)
	}
}
