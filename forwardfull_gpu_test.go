//go:build cuda

package gdn_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

// fullCase is one problem of the full-forward tests.
type fullCase struct {
	name   string
	shape  ref.Shape
	opts   ref.RecipeOptions
	l2norm bool // q and k given at 4x their norm, normalised inside
	gate   bool // g given as the gate's raw input, with A_log and dt_bias
	// rawQK (with l2norm): q and k drawn N(0, 1) per element in the input
	// dtype, as a model's projections give them, instead of 4x rows that are
	// already normalised in that dtype (whose norm maps them back onto it,
	// which hides the rounding of the normalised rows: ref's
	// TestL2NormPlacementPrecision).
	rawQK bool
}

func fullCases() []fullCase {
	one := 1.0
	return []fullCase{
		{"plain", ref.Shape{B: 2, T: 300, Hq: 2, Hv: 4}, ref.RecipeOptions{WithH0: true}, false, false, false},
		{"l2norm", ref.Shape{B: 1, T: 777, Hq: 2, Hv: 4}, ref.RecipeOptions{WithH0: true}, true, false, false},
		{"gate", ref.Shape{B: 1, T: 520, Hq: 1, Hv: 3}, ref.RecipeOptions{}, false, true, false},
		{"l2norm_gate_varlen_fp16", ref.Shape{B: 1, T: 700, Hq: 2, Hv: 4, CuSeqlens: []int{0, 0, 1, 200, 201, 600, 600, 700}},
			ref.RecipeOptions{WithH0: true, Dtype: gdn.FP16}, true, true, false},
		{"strong_decay_beta1", ref.Shape{B: 1, T: 449, Hq: 1, Hv: 2}, ref.RecipeOptions{WithH0: true, StrongDecay: true, BetaValue: &one}, false, false, false},
		{"long_G8", ref.Shape{B: 1, T: 4096, Hq: 1, Hv: 8}, ref.RecipeOptions{WithH0: true}, true, true, false},
		{"l2norm_raw", ref.Shape{B: 1, T: 640, Hq: 2, Hv: 4}, ref.RecipeOptions{WithH0: true}, true, false, true},
		{"l2norm_G4_varlen", ref.Shape{B: 1, T: 900, Hq: 2, Hv: 8, CuSeqlens: []int{0, 1, 1, 130, 500, 900}},
			ref.RecipeOptions{WithH0: true}, true, false, false},
		// G = 2: the core kernel's own L2 norm (TestFullNormInCoreBitIdentical)
		// on short, empty and one-token sequences.
		{"l2norm_G2_varlen", ref.Shape{B: 1, T: 700, Hq: 2, Hv: 4, CuSeqlens: []int{0, 0, 1, 64, 65, 300, 700}},
			ref.RecipeOptions{WithH0: true}, true, false, false},
		// The preparation inside the core kernel (kernsrc.CoreBF16Fused):
		// the gate from its raw input, strong decay with beta = 1.
		{"l2norm_gate_G2_varlen", ref.Shape{B: 1, T: 800, Hq: 2, Hv: 4, CuSeqlens: []int{0, 1, 1, 70, 333, 800}},
			ref.RecipeOptions{WithH0: true}, true, true, false},
		{"l2norm_strong_beta1", ref.Shape{B: 2, T: 300, Hq: 2, Hv: 4}, ref.RecipeOptions{WithH0: true, StrongDecay: true, BetaValue: &one}, true, false, false},
		// Scales other than the default, negative and small: the full
		// forward passes HostFullArgs.Scale on to o.
		{"l2norm_scale_negative", ref.Shape{B: 1, T: 300, Hq: 2, Hv: 4}, ref.RecipeOptions{WithH0: true, Scale: -0.3}, true, false, false},
		{"l2norm_scale_small", ref.Shape{B: 2, T: 200, Hq: 2, Hv: 4}, ref.RecipeOptions{WithH0: true, Scale: 0.01}, true, false, false},
		// The preparation inside the core kernel without the norm
		// (kernsrc.CoreBF16FusedNoNorm) on short, empty and one-token
		// sequences, with the gate from its raw input.
		{"gate_G2_varlen", ref.Shape{B: 1, T: 800, Hq: 2, Hv: 4, CuSeqlens: []int{0, 1, 1, 70, 333, 800}},
			ref.RecipeOptions{WithH0: true}, false, true, false},
	}
}

// fullCaseInputs draws a case's inputs: the recipe, with q and k at 4x
// their norm for L2Norm (4x is exact in bf16 and fp16: the device gets
// exactly these values) and, for the in-kernel gate, g replaced by the
// gate's raw input a ~ N(0, 1) with per-head A_log and dt_bias. It returns
// the reference's inputs and options and the same call for the host.
func fullCaseInputs(t *testing.T, c fullCase, seed uint64) (ref.Inputs, ref.FullOptions, *gdn.HostFullArgs) {
	t.Helper()
	s := c.shape
	in, err := ref.Recipe(s, seed, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	dt := recipeDtype(c.opts)
	var fo ref.FullOptions
	if c.l2norm && c.rawQK {
		rng := rand.New(rand.NewPCG(seed, 99))
		for _, x := range [][]float64{in.Q, in.K} {
			for i := range x {
				x[i] = rng.NormFloat64()
			}
		}
		if dt == gdn.FP16 {
			in.Q, in.K = ref.QuantizeFP16(in.Q), ref.QuantizeFP16(in.K)
		} else {
			in.Q, in.K = ref.QuantizeBF16(in.Q), ref.QuantizeBF16(in.K)
		}
		fo.L2Norm = true
	} else if c.l2norm {
		for i := range in.Q {
			in.Q[i] *= 4
		}
		for i := range in.K {
			in.K[i] *= 4
		}
		fo.L2Norm = true
	}
	if c.gate {
		rng := rand.New(rand.NewPCG(seed, 77))
		for i := range in.G {
			in.G[i] = float64(float32(rng.NormFloat64()))
		}
		fo.ALog, fo.DtBias = make([]float64, s.Hv), make([]float64, s.Hv)
		for h := range fo.ALog {
			fo.ALog[h] = float64(float32(math.Log(0.3 + 0.4*float64(h))))
			fo.DtBias[h] = float64(float32(0.25*float64(h) - 0.5))
		}
	}
	h := &gdn.HostFullArgs{B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: dt,
		Q: f32(in.Q), K: f32(in.K), V: f32(in.V), G: f32(in.G), Beta: f32(in.Beta), ALog: f32(fo.ALog), DtBias: f32(fo.DtBias),
		H0: f32(in.H0), FinalState: true, L2Norm: c.l2norm, GateInKernel: c.gate, Scale: float32(in.Scale)}
	return in, fo, h
}

// checkFull holds o and ht to ref.Full at the pass lines of docs/SPEC.md.
func checkFull(t *testing.T, in ref.Inputs, fo ref.FullOptions, gotO, gotHt []float32) (o, ht ref.Errors) {
	t.Helper()
	wantO, wantHt, err := ref.Full(in, fo)
	if err != nil {
		t.Fatal(err)
	}
	o, ht = ref.Compare32(gotO, wantO), ref.Compare32(gotHt, wantHt)
	if err := o.Within(ref.PassO); err != nil {
		t.Errorf("o: %v", err)
	}
	if err := ht.Within(ref.PassHt); err != nil {
		t.Errorf("ht: %v", err)
	}
	return o, ht
}

// runFullCase uploads a case (UploadFull), runs ForwardFull on poisoned
// outputs and holds o and ht to ref.Full.
func runFullCase(t *testing.T, r *gdn.Runtime, c fullCase, seed uint64) (o, ht ref.Errors) {
	t.Helper()
	in, fo, res := runFullRaw(t, r, c, seed)
	return checkFull(t, in, fo, res.O, res.Ht)
}

// runFullRaw runs a case as runFullCase does and returns its inputs and
// the device's outputs.
func runFullRaw(t *testing.T, r *gdn.Runtime, c fullCase, seed uint64) (ref.Inputs, ref.FullOptions, *gdn.HostCoreResult) {
	t.Helper()
	in, fo, h := fullCaseInputs(t, c, seed)
	up, err := r.UploadFull(h)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Free()
	fa := up.Args
	// Twice: the first call prepares, the second runs the prepared call.
	var res *gdn.HostCoreResult
	for call := 0; call < 2; call++ {
		ctx := tuning.Context(r)
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
		if res, err = up.Download(); err != nil {
			t.Fatal(err)
		}
	}
	return in, fo, res
}

// The full forward from raw gates against ref.Full: log-gates given or
// computed from A_log, dt_bias and a; q and k normalised inside or not;
// packed sequences with empty and one-token ones; fp16; strong decay and
// beta = 1; sequences with G = 4 and 8; the same through a split plan,
// plain and early (the EarlyFirstSegment knob); and
// the preparation in blocks of four value heads wherever four divide G
// (the PrepHeads knob; a test shape's grid is too small for the full
// forward to choose them itself).
func TestFullMatchesReference(t *testing.T) {
	for _, o := range []tuning.Knobs{{}, {SegmentChunks: 2}, {SegmentChunks: 2, EarlyFirstSegment: 1}, {PrepHeads: 4}} {
		r := splitRuntime(t, withKnobs(gdn.Options{}, o))
		name := fmt.Sprintf("seg%d_prep%d", o.SegmentChunks, o.PrepHeads)
		if o.EarlyFirstSegment > 0 {
			name = fmt.Sprintf("seg%d_early_prep%d", o.SegmentChunks, o.PrepHeads)
		}
		for i, c := range fullCases() {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				o, ht := runFullCase(t, r, c, uint64(100+i))
				t.Logf("full o %v ht %v", o, ht)
				// Unnormalised q and k show the normalised copies' rounding:
				// fp16 copies give about 1.7e-3 (the core's own error), bf16
				// ones about 3.3e-3 (ref's TestL2NormPlacementPrecision).
				if c.rawQK && o.Ratio > 2.5e-3 {
					t.Errorf("o ratio %.3e on unnormalised q and k: over 2.5e-3, the normalised copies lose precision", o.Ratio)
				}
			})
		}
	}
}

// With L2Norm on bf16 inputs the core runs on the preparation's fp16
// copies of q and k (the bf16_fp16qk variants), at either tile width: each
// forced (the Variant knob, by the bf16 name that picks the tile) on the
// bf16 L2Norm cases, and the planner's own choice named in PlanOfFull;
// without L2Norm the plain bf16 variant.
func TestFullFP16QKBothTiles(t *testing.T) {
	var cases []fullCase
	for _, c := range fullCases() {
		if c.l2norm && recipeDtype(c.opts) == gdn.BF16 {
			cases = append(cases, c)
		}
	}
	for _, tile := range []string{"bv64", "bv128"} {
		r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{Variant: "gdn_hopper_bf16_" + tile}))
		for i, c := range cases {
			t.Run(tile+"/"+c.name, func(t *testing.T) {
				o, ht := runFullCase(t, r, c, uint64(300+i))
				t.Logf("full %s o %v ht %v", tile, o, ht)
				if c.rawQK && o.Ratio > 2.5e-3 {
					t.Errorf("o ratio %.3e on unnormalised q and k: over 2.5e-3", o.Ratio)
				}
				_, _, h := fullCaseInputs(t, c, 1)
				up, err := r.UploadFull(h)
				if err != nil {
					t.Fatal(err)
				}
				defer up.Free()
				pl, err := r.PlanOfFull(up.Args)
				// At BV 128 the core does the whole preparation where it runs
				// unsplit (TestFullFused); split, it takes the copies.
				want := "gdn_hopper_bf16_fp16qk_" + tile
				if tile == "bv128" && pl.SegmentChunks == 0 {
					want = "gdn_hopper_bf16_fused_bv128"
				}
				if err != nil || pl.Kernel != want {
					t.Errorf("PlanOfFull: %v (%v), want %s", pl.Kernel, err, want)
				}
			})
		}
	}
	r := testRuntime(t)
	for _, l2 := range []bool{true, false} {
		c := fullCases()[1] // l2norm, bf16
		c.l2norm = l2
		_, _, h := fullCaseInputs(t, c, 2)
		up, err := r.UploadFull(h)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := r.PlanOfFull(up.Args)
		up.Free()
		if err != nil || strings.Contains(pl.Kernel, "_fp16qk_") != l2 {
			t.Errorf("L2Norm %v: the planner's variant %s (%v)", l2, pl.Kernel, err)
		}
	}
}

// checkPlannedVariant checks that r plans the full call h with the core
// variant want (PlanOfFull).
func checkPlannedVariant(t *testing.T, r *gdn.Runtime, h *gdn.HostFullArgs, want string) {
	t.Helper()
	up, err := r.UploadFull(h)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := r.PlanOfFull(up.Args)
	up.Free()
	if err != nil || pl.Kernel != want {
		t.Errorf("PlanOfFull: %v (%v), want %s", pl.Kernel, err, want)
	}
}

// Bad full-forward arguments are errors naming the argument.
func TestFullBadInput(t *testing.T) {
	r := testRuntime(t)
	err := r.ForwardFull(&gdn.FullArgs{GateInKernel: true}, 0)
	if err == nil {
		t.Fatal("empty args accepted")
	}
	if err := r.ForwardFull(nil, 0); err == nil {
		t.Fatal("nil args accepted")
	}
}

// A serving loop's calls: the same buffers, new sequence boundaries on
// every call (the packed batch changes). Each call matches the reference,
// and the full forward's working buffers stay one slab, allocated once
// (scratch.Pool's slabs), not once a call.
func TestFullNewBoundariesEachCall(t *testing.T) {
	r, err := gdn.Open(gdn.Options{}) // its own Runtime: the slab counts are this test's
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const T = 900
	c := fullCase{"serving", ref.Shape{B: 1, T: T, Hq: 2, Hv: 4, CuSeqlens: []int{0, 300, 600, T}},
		ref.RecipeOptions{WithH0: true}, true, false, false}
	in, fo, h := fullCaseInputs(t, c, 7)
	up, err := r.UploadFull(h)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Free()
	ctx := tuning.Context(r)
	rng := rand.New(rand.NewPCG(7, 8))
	const calls = 12
	for call := range calls {
		b1 := rng.IntN(T + 1)
		b2 := b1 + rng.IntN(T+1-b1)
		seqs := []int{0, b1, b2, T}
		s32 := []int32{0, int32(b1), int32(b2), T}
		dev, err := ctx.Alloc(16)
		if err != nil {
			t.Fatal(err)
		}
		defer ctx.Free(dev) // at the end: the cached calls that name it are not launched again
		if err := ctx.CopyToDevice(dev, unsafe.Pointer(&s32[0]), 16); err != nil {
			t.Fatal(err)
		}
		fa := *up.Args
		fa.CuSeqlens = seqs
		fa.CuSeqlensDevice = gdn.Tensor{Ptr: uintptr(dev), Bytes: 16, Dtype: gdn.Int32, Shape: []int{4}}
		if err := ctx.MemsetD16(driverPtr(fa.O.Ptr), 0x7fff, fa.O.Elems(), nil); err != nil {
			t.Fatal(err)
		}
		if err := ctx.MemsetD32(driverPtr(fa.Ht.Ptr), 0x7fc00000, fa.Ht.Elems(), nil); err != nil {
			t.Fatal(err)
		}
		if err := r.ForwardFull(&fa, 0); err != nil {
			t.Fatal(err)
		}
		if err := ctx.WrapStream(0).Synchronize(); err != nil {
			t.Fatal(err)
		}
		res, err := up.Download()
		if err != nil {
			t.Fatal(err)
		}
		at := in
		at.Shape.CuSeqlens = seqs
		o, ht := checkFull(t, at, fo, res.O, res.Ht)
		t.Logf("call %d, boundaries %v: o %v ht %v", call, seqs, o, ht)
	}
	if live, allocs := gdn.FullSlabCounts(r); live != 1 || allocs != 1 {
		t.Errorf("after %d calls with new boundaries: %d slabs in use, %d allocated; want 1, 1", calls, live, allocs)
	}
}
