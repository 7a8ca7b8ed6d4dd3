package gdn

import (
	"errors"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
)

// PlanFor answers what the planner gives a Runtime with default knobs: the
// core forward's plan, or the full forward's core, for batches and packed
// sequences, on any SM count; a Plan prints as the planner's.
func TestPlanFor(t *testing.T) {
	seqs := []int{0, 4096, 5096, 7596, 7896}
	for _, r := range []PlanRequest{
		{B: 8, T: 4096, Hq: 16, Hv: 32, Dtype: BF16, SMs: 132},
		{B: 8, T: 4096, Hq: 16, Hv: 32, Dtype: BF16, SMs: 132, Full: true, L2Norm: true},
		{B: 8, T: 4096, Hq: 16, Hv: 32, Dtype: FP16, SMs: 132, Full: true},
		{B: 1, T: 32768, Hq: 2, Hv: 8, Dtype: BF16, SMs: 132},
		{B: 1, T: 32768, Hq: 2, Hv: 8, Dtype: BF16, SMs: 16},
		{B: 1, T: 7896, Hq: 16, Hv: 32, CuSeqlens: seqs, Dtype: BF16, SMs: 132, Full: true},
	} {
		got, err := PlanFor(r)
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		p := problem.Problem{B: r.B, T: r.T, Hq: r.Hq, Hv: r.Hv, N: r.B, Seqs: r.CuSeqlens, Dtype: r.Dtype, QKDtype: r.Dtype}
		if r.CuSeqlens != nil {
			p.N = len(r.CuSeqlens) - 1
		}
		want, err := plan.Core(p, r.SMs, plan.Knobs{})
		if r.Full {
			want, err = plan.Full(p, r.SMs, plan.Knobs{}, r.L2Norm)
		}
		if err != nil || got != planOf(want) || got.String() != want.String() || got.Kernel != want.Variant.Name {
			t.Errorf("%+v: %v, want %v (%v)", r, got, want, err)
		}
	}
}

// A shape gdn cannot run is an *ArgError naming the field.
func TestPlanForRejects(t *testing.T) {
	good := PlanRequest{B: 2, T: 100, Hq: 2, Hv: 4, Dtype: BF16, SMs: 132}
	for _, c := range []struct {
		arg  string
		edit func(r *PlanRequest)
	}{
		{"B", func(r *PlanRequest) { r.B = 0 }},
		{"T", func(r *PlanRequest) { r.T = -1 }},
		{"Hv", func(r *PlanRequest) { r.Hv = 3 }},
		{"Dtype", func(r *PlanRequest) { r.Dtype = FP32 }},
		{"SMs", func(r *PlanRequest) { r.SMs = 0 }},
		{"cu_seqlens", func(r *PlanRequest) { r.B, r.CuSeqlens = 1, []int{0, 50, 99} }},
		{"B", func(r *PlanRequest) { r.B, r.T = 65536, 1 }},
	} {
		r := good
		c.edit(&r)
		_, err := PlanFor(r)
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want an ArgError naming it", c.arg, err)
		}
	}
	r := good
	r.B, r.T, r.CuSeqlens = 1, 200, []int{0, 60, 200}
	pl, err := PlanFor(r)
	if err != nil || !strings.HasPrefix(pl.String(), pl.Kernel+" grid=") {
		t.Errorf("packed sequences: %v, %v", pl, err)
	}
}
