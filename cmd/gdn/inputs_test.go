package main

import (
	"math"
	"slices"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/ref"
)

// widen64 turns values of dt (already rounded to it) into float64, and
// checks that they are.
func widen64(x []float32, dt gdn.Dtype) []float64 {
	round := roundFunc(dt)
	out := make([]float64, len(x))
	for i, v := range x {
		if round(v) != v {
			panic("a value is not rounded to its dtype")
		}
		out[i] = float64(v)
	}
	return out
}

func f64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// testShape has a full chunk, tail chunks, a one-token sequence and G = 2.
var testShape = ref.Shape{B: 1, T: 200, Hq: 2, Hv: 4, CuSeqlens: []int{0, 130, 131, 200}}

func TestGenInputsRecipe(t *testing.T) {
	for _, dt := range []gdn.Dtype{gdn.BF16, gdn.FP16} {
		t.Run(dt.String(), func(t *testing.T) {
			h := genInputs(testShape, dt, 7)
			s := testShape
			if got, want := h.Bytes(), inputBytes(s, 2); got != want {
				t.Errorf("Bytes() = %d, inputBytes = %d", got, want)
			}
			// Unit rows (to 16-bit rounding).
			for name, x := range map[string][]float32{"q": h.Q, "k": h.K} {
				v := widen64(x, dt)
				for r := 0; r < len(v); r += ref.D {
					n := 0.0
					for _, e := range v[r : r+ref.D] {
						n += e * e
					}
					if math.Abs(math.Sqrt(n)-1) > 1e-2 {
						t.Fatalf("%s row %d: norm %v, want 1", name, r/ref.D, math.Sqrt(n))
					}
				}
			}
			for i, g := range h.GRaw {
				zero := ref.ZeroGateHead(i % s.Hv)
				if zero && g != 0 || !zero && !(g < 0 && g > -2) {
					t.Fatalf("g[%d] = %v (head %d)", i, g, i%s.Hv)
				}
				if b := h.Beta[i]; !(b > 0 && b < 1) {
					t.Fatalf("beta[%d] = %v, want in (0,1)", i, b)
				}
			}
			if len(h.H0) != s.StateLen() {
				t.Fatalf("len(h0) = %d, want %d", len(h.H0), s.StateLen())
			}
		})
	}
}

// TestGenInputsMatchReference checks g_cumsum and A against the float64
// reference computed from the same (rounded) inputs, and the chunked
// forward built on them against the recurrence.
func TestGenInputsMatchReference(t *testing.T) {
	s := testShape
	h := genInputs(s, gdn.BF16, 3)
	k := widen64(h.K, gdn.BF16)
	gcum, err := ref.ChunkCumsum(s, f64(h.GRaw))
	if err != nil {
		t.Fatal(err)
	}
	if e := ref.Compare32(h.G, gcum); e.MaxAbs > 1e-6 || e.NaN > 0 {
		t.Errorf("g_cumsum vs ref.ChunkCumsum: %v", e)
	}
	A, err := ref.SolveA(s, k, f64(h.Beta), gcum)
	if err != nil {
		t.Fatal(err)
	}
	if e := ref.Compare32(h.A, A); e.Ratio > 1e-5 || e.NaN > 0 {
		t.Errorf("A vs ref.SolveA: %v", e)
	}
	in := ref.Inputs{Shape: s, Q: widen64(h.Q, gdn.BF16), K: k, V: widen64(h.V, gdn.BF16),
		G: f64(h.GRaw), Beta: f64(h.Beta), H0: f64(h.H0)}
	oRef, htRef, err := ref.Recurrent(in)
	if err != nil {
		t.Fatal(err)
	}
	o, ht, err := ref.Chunked(in, f64(h.G), f64(h.A))
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.Compare64(o, oRef).Within(ref.PassO); err != nil {
		t.Errorf("o: %v", err)
	}
	if err := ref.Compare64(ht, htRef).Within(ref.PassHt); err != nil {
		t.Errorf("ht: %v", err)
	}
}

func TestGenInputsSeeded(t *testing.T) {
	a := genInputs(testShape, gdn.BF16, 11)
	b := genInputs(testShape, gdn.BF16, 11)
	c := genInputs(testShape, gdn.BF16, 12)
	if !slices.Equal(a.V, b.V) || !slices.Equal(a.A, b.A) || !slices.Equal(a.H0, b.H0) {
		t.Error("same seed gave different inputs")
	}
	if slices.Equal(a.V, c.V) || slices.Equal(a.Q, c.Q) {
		t.Error("different seeds gave the same inputs")
	}
}

func TestChunkList(t *testing.T) {
	got := chunkList(ref.Shape{B: 1, T: 130, Hq: 1, Hv: 1, CuSeqlens: []int{0, 65, 65, 130}})
	want := []chunk{{0, 64}, {64, 1}, {65, 64}, {129, 1}}
	if !slices.Equal(got, want) {
		t.Errorf("chunkList = %v, want %v", got, want)
	}
}

// BenchmarkGenInputs draws q35_1kx8 (8192 tokens, Hq 16, Hv 32); the largest
// suite case is 16 times that.
func BenchmarkGenInputs(b *testing.B) {
	c, _ := ref.CaseByName("q35_1kx8")
	for b.Loop() {
		genInputs(c.Shape(), gdn.BF16, 1)
	}
}
