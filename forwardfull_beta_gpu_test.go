//go:build cuda

package gdn_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

// betaLogitsPath is one way the full forward runs: the knobs that force
// it, and what its plan must be.
type betaLogitsPath struct {
	name  string
	knobs tuning.Knobs
	bf16  bool                                // runs bf16 cases only (its knobs force a bf16 variant)
	check func(pl gdn.Plan, l2norm bool) bool // the plan is the path's
}

// The paths that read beta: where beta as given would take the core that
// does the whole preparation (the fused variants), beta's logits take the
// preparation kernel instead (the fused core reads beta as given); the
// preparation kernel before the core at the same tile; and a split plan
// (the preparation kernel, then the core's passes on its A2); fp16 inputs
// never fuse.
func betaLogitsPaths() []betaLogitsPath {
	notFused := func(pl gdn.Plan, _ bool) bool { return !strings.Contains(pl.Kernel, "fused") }
	return []betaLogitsPath{
		{"would_fuse", tuning.Knobs{Variant: "gdn_hopper_bf16_bv128", SegmentChunks: -1}, true, notFused},
		{"prep_kernel", tuning.Knobs{Variant: "gdn_hopper_bf16_bv128", SegmentChunks: -1, PrepKernel: true}, true, notFused},
		{"split", tuning.Knobs{SegmentChunks: 2}, false, func(pl gdn.Plan, l2 bool) bool {
			return notFused(pl, l2) && pl.SegmentChunks > 0
		}},
		{"planner", tuning.Knobs{}, false, func(gdn.Plan, bool) bool { return true }},
	}
}

// betaLogitsInputs draws case c's inputs (fullCaseInputs) with beta
// replaced by logits b ~ N(0, 1), in betaDt as the device reads them, for
// a call with BetaLogits.
func betaLogitsInputs(t *testing.T, c fullCase, seed uint64, betaDt gdn.Dtype) (ref.Inputs, ref.FullOptions, *gdn.HostFullArgs) {
	t.Helper()
	in, fo, h := fullCaseInputs(t, c, seed)
	rng := rand.New(rand.NewPCG(seed, 55))
	b := make([]float64, len(in.Beta))
	for i := range b {
		b[i] = float64(float32(rng.NormFloat64()))
	}
	switch betaDt {
	case gdn.BF16:
		b = ref.QuantizeBF16(b)
	case gdn.FP16:
		b = ref.QuantizeFP16(b)
	}
	in.Beta = b
	fo.BetaLogits = true
	h.Beta, h.BetaDtype, h.BetaLogits = f32(b), betaDt, true
	return in, fo, h
}

// Beta given as logits, sigmoid(b) and with NegEigval 2 sigmoid(b),
// against ref.Full at the o and ht lines, on every path that reads beta
// (betaLogitsPaths), fp32 beta and beta in q's dtype, with and without the
// L2 norm and the gate from its raw input, packed sequences with empty and
// one-token ones. Both flags run on the same buffers one after the other,
// so that a prepared call (or its graph) kept for one of them and served
// to the other shows: the flags are part of the calls' keys. Outputs are
// poisoned (NaN) before each call.
func TestFullBetaLogits(t *testing.T) {
	cases := []fullCase{
		{"l2norm_gate_varlen", ref.Shape{B: 1, T: 800, Hq: 2, Hv: 4, CuSeqlens: []int{0, 1, 1, 70, 333, 800}},
			ref.RecipeOptions{WithH0: true}, true, true, false},
		{"plain", ref.Shape{B: 2, T: 300, Hq: 2, Hv: 4}, ref.RecipeOptions{WithH0: true}, false, false, false},
		{"l2norm_gate_varlen_fp16", ref.Shape{B: 1, T: 700, Hq: 2, Hv: 4, CuSeqlens: []int{0, 0, 1, 200, 201, 600, 600, 700}},
			ref.RecipeOptions{WithH0: true, Dtype: gdn.FP16}, true, true, false},
	}
	ran := map[string]int{}
	for _, path := range betaLogitsPaths() {
		r := splitRuntime(t, withKnobs(gdn.Options{}, path.knobs))
		for i, c := range cases {
			dt := recipeDtype(c.opts)
			if path.bf16 && dt != gdn.BF16 {
				continue
			}
			for _, betaDt := range []gdn.Dtype{gdn.FP32, dt} {
				t.Run(path.name+"/"+c.name+"/beta_"+betaDt.String(), func(t *testing.T) {
					seed := uint64(900 + 10*i)
					in, fo, h := betaLogitsInputs(t, c, seed, betaDt)
					up, err := r.UploadFull(h)
					if err != nil {
						t.Fatal(err)
					}
					defer up.Free()
					if !up.Args.BetaLogits || up.Args.NegEigval {
						t.Fatalf("uploaded args: BetaLogits %v, NegEigval %v", up.Args.BetaLogits, up.Args.NegEigval)
					}
					for _, neg := range []bool{false, true, false} {
						fa := *up.Args
						fa.NegEigval = neg
						pl, err := r.PlanOfFull(&fa)
						if err != nil || !path.check(pl, c.l2norm) {
							t.Fatalf("plan %s (segments of %d chunks), %v: not the %s path", pl.Kernel, pl.SegmentChunks, err, path.name)
						}
						res := runFullArgs(t, r, &fa, up)
						fo.NegEigval = neg
						o, ht := checkFull(t, in, fo, res.O, res.Ht)
						t.Logf("%s neg_eigval %v: o %v ht %v", pl.Kernel, neg, o, ht)
					}
					ran[path.name]++
				})
			}
		}
	}
	for _, path := range betaLogitsPaths() {
		want := 6
		if path.bf16 {
			want = 4
		}
		if ran[path.name] != want {
			t.Errorf("path %s ran %d cases, want %d", path.name, ran[path.name], want)
		}
	}
}

// runFullArgs runs ForwardFull of fa (on up's buffers) twice, the first
// call preparing and the second running the prepared call, each on
// outputs poisoned with NaN, and returns the outputs.
func runFullArgs(t *testing.T, r *gdn.Runtime, fa *gdn.FullArgs, up *gdn.DeviceFullArgs) *gdn.HostCoreResult {
	t.Helper()
	ctx := tuning.Context(r)
	var res *gdn.HostCoreResult
	for call := 0; call < 2; call++ {
		if err := ctx.MemsetD16(driverPtr(fa.O.Ptr), 0x7fff, fa.O.Elems(), nil); err != nil {
			t.Fatal(err)
		}
		if err := ctx.MemsetD32(driverPtr(fa.Ht.Ptr), 0x7fc00000, fa.Ht.Elems(), nil); err != nil {
			t.Fatal(err)
		}
		if err := r.ForwardFull(fa, 0); err != nil {
			t.Fatal(err)
		}
		if err := ctx.WrapStream(0).Synchronize(); err != nil {
			t.Fatal(err)
		}
		var err error
		if res, err = up.Download(); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// NegEigval without BetaLogits is refused naming neg_eigval, on the device
// path and the host path, with nothing launched (the poisoned o stays so).
func TestFullNegEigvalNeedsBetaLogits(t *testing.T) {
	r := testRuntime(t)
	c := fullCase{"plain", ref.Shape{B: 1, T: 130, Hq: 1, Hv: 2}, ref.RecipeOptions{}, false, false, false}
	_, _, h := fullCaseInputs(t, c, 5)
	up, err := r.UploadFull(h)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Free()
	fa := *up.Args
	fa.NegEigval = true
	var ae *gdn.ArgError
	if err := r.ForwardFull(&fa, 0); !errors.As(err, &ae) || ae.Arg != "neg_eigval" {
		t.Errorf("ForwardFull: %v, want an error naming neg_eigval", err)
	}
	if err := tuning.Context(r).WrapStream(0).Synchronize(); err != nil {
		t.Fatal(err)
	}
	res, err := up.Download()
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range res.O {
		if !math.IsNaN(float64(x)) { // UploadFull fills o with NaN; nothing may have written it
			t.Fatalf("o[%d] = %v written by a refused call", i, x)
		}
	}
	h.NegEigval = true
	if _, err := r.ForwardFullHost(h); !errors.As(err, &ae) || ae.Arg != "neg_eigval" {
		t.Errorf("ForwardFullHost: %v, want an error naming neg_eigval", err)
	}
}
