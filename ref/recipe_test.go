package ref

import (
	"github.com/gdnjit/gdn/dtype"

	"math"
	"reflect"
	"slices"
	"testing"
)

func TestRecipeDeterministic(t *testing.T) {
	s := Shape{B: 2, T: 70, Hq: 2, Hv: 8}
	opts := RecipeOptions{WithH0: true}
	a, err := Recipe(s, 42, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Recipe(s, 42, opts)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different inputs")
	}
	c, _ := Recipe(s, 43, opts)
	for name, pair := range map[string][2][]float64{
		"q": {a.Q, c.Q}, "k": {a.K, c.K}, "v": {a.V, c.V},
		"g": {a.G, c.G}, "beta": {a.Beta, c.Beta}, "h0": {a.H0, c.H0},
	} {
		if slices.Equal(pair[0], pair[1]) {
			t.Errorf("%s: seeds 42 and 43 gave the same values", name)
		}
	}
	// Each tensor has its own stream: dropping h0 leaves the others alone.
	d, _ := Recipe(s, 42, RecipeOptions{})
	if d.H0 != nil {
		t.Errorf("WithH0 false: H0 has %d elements, want nil", len(d.H0))
	}
	d.H0 = a.H0
	if !reflect.DeepEqual(a, d) {
		t.Errorf("WithH0 changed tensors other than h0")
	}
}

func TestRecipeValues(t *testing.T) {
	s := Shape{B: 1, T: 100, Hq: 2, Hv: 8}
	for _, tc := range []struct {
		dtype    dtype.Dtype
		quantize func([]float64) []float64
		normTol  float64
	}{
		{dtype.Invalid, QuantizeBF16, 8e-3}, // the zero value means bf16
		{dtype.BF16, QuantizeBF16, 8e-3},    // bf16 keeps 8 bits: relative error <= 2^-9 per element
		{dtype.FP16, QuantizeFP16, 1e-3},
		{dtype.FP32, QuantizeF32, 1e-6},
	} {
		t.Run(tc.dtype.String(), func(t *testing.T) {
			in, err := Recipe(s, 1, RecipeOptions{Dtype: tc.dtype, WithH0: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := in.Check(); err != nil {
				t.Fatal(err)
			}
			for name, x := range map[string][]float64{"q": in.Q, "k": in.K, "v": in.V} {
				if !slices.Equal(tc.quantize(x), x) {
					t.Errorf("%s is not already rounded to %v", name, tc.dtype)
				}
			}
			for name, x := range map[string][]float64{"q": in.Q, "k": in.K} {
				for i := 0; i < len(x); i += D {
					row := x[i : i+D]
					if n := math.Sqrt(dot(row, row)); math.Abs(n-1) > tc.normTol {
						t.Fatalf("%s row %d: norm %v, want 1 within %v", name, i/D, n, tc.normTol)
					}
				}
			}
			if r := rms(in.V); math.Abs(r-1) > 0.05 {
				t.Errorf("v: RMS %v, want about 1 for N(0,1)", r)
			}
			if r := rms(in.H0); math.Abs(r-1) > 0.05 {
				t.Errorf("h0: RMS %v, want about 1 for N(0,1)", r)
			}
			for name, x := range map[string][]float64{"g": in.G, "beta": in.Beta, "h0": in.H0} {
				if !slices.Equal(QuantizeF32(x), x) {
					t.Errorf("%s is not rounded to float32", name)
				}
			}
			for i, g := range in.G {
				h := i % s.Hv
				switch {
				case ZeroGateHead(h) && g != 0:
					t.Fatalf("g[%d] (head %d) = %v, want 0 on a zero-gate head", i, h, g)
				case !ZeroGateHead(h) && !(g < 0 && g > -1):
					// logsigmoid(x)/16 < 0, and > -1 unless x < -16.
					t.Fatalf("g[%d] (head %d) = %v, want in (-1, 0)", i, h, g)
				}
			}
			for i, b := range in.Beta {
				if !(b > 0 && b < 1) {
					t.Fatalf("beta[%d] = %v, want in (0, 1)", i, b)
				}
			}
		})
	}
	zero := 0
	for h := range s.Hv {
		if ZeroGateHead(h) {
			zero++
		}
	}
	if zero != s.Hv/4 {
		t.Errorf("%d zero-gate heads of %d, want a quarter", zero, s.Hv)
	}
}

func TestRecipeOptions(t *testing.T) {
	s := Shape{B: 1, T: 10, Hq: 1, Hv: 4}
	in, err := Recipe(s, 1, RecipeOptions{StrongDecay: true, BetaValue: Float(1), Scale: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	for i := range in.G {
		if in.G[i] != -5 || in.Beta[i] != 1 {
			t.Fatalf("token-head %d: g %v beta %v, want -5 and 1", i, in.G[i], in.Beta[i])
		}
	}
	if in.H0 != nil || in.Scale != 0.25 {
		t.Errorf("H0 %v Scale %v, want nil and 0.25", in.H0 != nil, in.Scale)
	}
	in, _ = Recipe(s, 1, RecipeOptions{BetaValue: Float(0)})
	for i, b := range in.Beta {
		if b != 0 {
			t.Fatalf("beta[%d] = %v, want 0", i, b)
		}
	}
}

func TestQuantize(t *testing.T) {
	x := []float64{1 + 1.0/512, 1e-30}
	for _, tc := range []struct {
		d    dtype.Dtype
		want []float64
	}{
		{dtype.BF16, QuantizeBF16(x)}, {dtype.FP16, QuantizeFP16(x)}, {dtype.FP32, QuantizeF32(x)},
	} {
		got, err := Quantize(tc.d, x)
		if err != nil || got[0] != tc.want[0] || got[1] != tc.want[1] {
			t.Errorf("Quantize(%v) = %v, %v; want %v", tc.d, got, err, tc.want)
		}
	}
	for _, d := range []dtype.Dtype{dtype.Invalid, dtype.Int32, dtype.Dtype(9)} {
		if _, err := Quantize(d, x); err == nil {
			t.Errorf("Quantize(%v): want an error", d)
		}
	}
}
