package ref

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name  string
		got   Errors
		want  Errors
		pass  Tolerance // a line e must pass
		fails Tolerance // a line e must fail ({} when only NaN/Missing fail)
	}{
		// diff (0, 0.5): ratio sqrt(0.25 / 25) = 0.1.
		{"known pair", Compare64([]float64{3, 4.5}, []float64{3, 4}), Errors{Ratio: 0.1, MaxAbs: 0.5},
			Tolerance{0.1, 0.5}, Tolerance{0.09, 1}},
		{"float32", Compare32([]float32{3, 4.5}, []float64{3, 4}), Errors{Ratio: 0.1, MaxAbs: 0.5},
			Tolerance{0.2, 0.6}, Tolerance{1, 0.4}},
		{"exact", Compare64([]float64{1, -2}, []float64{1, -2}), Errors{},
			Tolerance{}, Tolerance{-1, -1}},
		// ref all zero: ratio is RMS(out) = sqrt((9 + 16) / 2).
		{"zero ref", Compare64([]float64{3, -4}, []float64{0, 0}), Errors{Ratio: math.Sqrt(12.5), MaxAbs: 4},
			Tolerance{4, 4}, Tolerance{3, 4}},
		{"NaN", Compare32([]float32{float32(math.NaN()), 4}, []float64{3, 4}), Errors{NaN: 1},
			Tolerance{}, Tolerance{1, 1}},
		{"Inf", Compare64([]float64{math.Inf(-1), 4}, []float64{3, 4}), Errors{NaN: 1},
			Tolerance{}, Tolerance{1, 1}},
		{"short", Compare64([]float64{3}, []float64{3, 4}), Errors{Missing: 1},
			Tolerance{}, Tolerance{1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.got
			if math.Abs(e.Ratio-tc.want.Ratio) > 1e-15 || e.MaxAbs != tc.want.MaxAbs ||
				e.NaN != tc.want.NaN || e.Missing != tc.want.Missing {
				t.Fatalf("got %+v, want %+v", e, tc.want)
			}
			passes := e.NaN == 0 && e.Missing == 0
			if err := e.Within(tc.pass); passes && err != nil {
				t.Errorf("Within(%+v) = %v, want nil", tc.pass, err)
			}
			if err := e.Within(tc.pass); !passes && err == nil {
				t.Errorf("Within(%+v) = nil, want a failure for NaN/missing", tc.pass)
			}
			err := e.Within(tc.fails)
			if err == nil || !errors.Is(err, ErrTolerance) {
				t.Errorf("Within(%+v) = %v, want an error wrapping ErrTolerance", tc.fails, err)
			}
			if e.NaN > 0 && (err == nil || !strings.Contains(err.Error(), "NaN")) {
				t.Errorf("Within(%+v) = %v, want it to mention NaN", tc.fails, err)
			}
		})
	}
	if s := (Errors{Ratio: 1.5e-3, MaxAbs: 2e-2, NaN: 3}).String(); s != "ratio 1.500e-03 max 2.000e-02 nan 3" {
		t.Errorf("String() = %q", s)
	}
	if PassO != (Tolerance{6e-3, 2e-2}) || PassHt != (Tolerance{4e-3, 1.5e-2}) {
		t.Errorf("pass lines differ from docs/SPEC.md: o %+v ht %+v", PassO, PassHt)
	}
	if PassDecodeO != (Tolerance{2e-3, 2e-2}) || PassDecodeState != (Tolerance{4e-3, 3e-3}) {
		t.Errorf("decode pass lines differ from docs/SPEC.md: o %+v state %+v", PassDecodeO, PassDecodeState)
	}
}

// TestPassLineOnRounding checks the pass line against a real perturbation:
// the float64 reference output rounded to bf16 (as a kernel stores o) passes
// PassO, and a wrong scale does not.
func TestPassLineOnRounding(t *testing.T) {
	in, err := Recipe(Shape{B: 1, T: 100, Hq: 1, Hv: 2}, 4, RecipeOptions{WithH0: true})
	if err != nil {
		t.Fatal(err)
	}
	o, _, err := Recurrent(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := Compare64(QuantizeBF16(o), o).Within(PassO); err != nil {
		t.Errorf("bf16-rounded o fails the pass line: %v", err)
	}
	wrong := make([]float64, len(o))
	for i := range o {
		wrong[i] = o[i] * 1.02
	}
	if err := Compare64(wrong, o).Within(PassO); err == nil {
		t.Errorf("o off by 2%% passes the pass line")
	}
}

// A decode call's o rounded to bf16, as the kernel stores it, passes
// PassDecodeO; o off by 0.3% does not, nor does a state off by 4e-3.
func TestDecodePassLinesOnRounding(t *testing.T) {
	p, err := DecodeRecipe(Shape{B: 64, T: 1, Hq: 1, Hv: 2}, 5, DecodeRecipeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Decode(p.Inputs, p.Pool, p.Slots, p.Options)
	if err != nil {
		t.Fatal(err)
	}
	if err := Compare64(QuantizeBF16(res.O), res.O).Within(PassDecodeO); err != nil {
		t.Errorf("bf16-rounded o fails the decode line: %v", err)
	}
	wrong := make([]float64, len(res.O))
	for i, x := range res.O {
		wrong[i] = x * 1.003
	}
	if err := Compare64(wrong, res.O).Within(PassDecodeO); err == nil {
		t.Error("o off by 0.3% passes the decode line")
	}
	if err := Compare64(QuantizeF32(res.Pool), res.Pool).Within(PassDecodeState); err != nil {
		t.Errorf("the fp32-rounded pool fails the state line: %v", err)
	}
	shifted := append([]float64(nil), res.Pool...)
	shifted[7] += 4e-3
	if err := Compare64(shifted, res.Pool).Within(PassDecodeState); err == nil {
		t.Error("a state entry off by 4e-3 passes the state line")
	}
}
