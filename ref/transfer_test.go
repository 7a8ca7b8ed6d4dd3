package ref

import (
	"math"
	"testing"

	"github.com/gdnjit/gdn/dtype"
)

// prefix returns the inputs of the first t tokens of a B = 1 problem
// without cu_seqlens (the layouts put tokens outermost).
func prefix(in Inputs, t int) Inputs {
	s := in.Shape
	p := in
	p.Shape.T = t
	p.Q, p.K = in.Q[:t*s.Hq*D], in.K[:t*s.Hq*D]
	p.V = in.V[:t*s.Hv*D]
	p.G, p.Beta = in.G[:t*s.Hv], in.Beta[:t*s.Hv]
	return p
}

// maxRelDiff is max|a-b| over max|b| (b the ground truth).
func maxRelDiff(a, b []float64) float64 {
	var d, m float64
	for i := range a {
		d = math.Max(d, math.Abs(a[i]-b[i]))
		m = math.Max(m, math.Abs(b[i]))
	}
	if m == 0 {
		return d
	}
	return d / m
}

// Segments built independently and joined by a scan give the recurrence's
// own state at every boundary: with decay, without (the g = 0 head, where
// the map carries everything), under strong decay and with beta = 1.
func TestSegmentStartsMatchRecurrent(t *testing.T) {
	one := 1.0
	cases := []struct {
		name string
		opts RecipeOptions
	}{
		{"recipe", RecipeOptions{WithH0: true}},
		{"strong", RecipeOptions{WithH0: true, StrongDecay: true}},
		{"beta1_noh0", RecipeOptions{BetaValue: &one}},
	}
	s := Shape{B: 1, T: 300, Hq: 2, Hv: 4}
	bounds := []int{0, 1, 63, 64, 65, 130, 200, 300}
	for i, c := range cases {
		in, err := Recipe(s, uint64(70+i), c.opts)
		if err != nil {
			t.Fatal(err)
		}
		for h := range s.Hv {
			var S0 []float64
			if in.H0 != nil {
				S0 = in.H0[h*D*D:][:D*D]
			}
			states, err := SegmentStarts(in, h, bounds, S0)
			if err != nil {
				t.Fatal(err)
			}
			for b, tok := range bounds {
				if tok == 0 {
					continue
				}
				_, ht, err := Recurrent(prefix(in, tok))
				if err != nil {
					t.Fatal(err)
				}
				want := ht[h*D*D:][:D*D]
				if d := maxRelDiff(states[b], want); d > 1e-10 || math.IsNaN(d) {
					t.Errorf("%s head %d (zero gate %v), state at token %d: relative difference %.3g", c.name, h, ZeroGateHead(h), tok, d)
				}
			}
		}
	}
}

// A segment of a packed sequence (cu_seqlens) starts from that sequence's
// h0, not from the previous sequence.
func TestSegmentStartsVarlen(t *testing.T) {
	s := Shape{B: 1, T: 250, Hq: 1, Hv: 2, CuSeqlens: []int{0, 70, 250}}
	in, err := Recipe(s, 9, RecipeOptions{WithH0: true})
	if err != nil {
		t.Fatal(err)
	}
	_, ht, err := Recurrent(in)
	if err != nil {
		t.Fatal(err)
	}
	for h := range s.Hv {
		S0 := in.H0[(1*s.Hv+h)*D*D:][:D*D]
		states, err := SegmentStarts(in, h, []int{70, 128, 129, 250}, S0)
		if err != nil {
			t.Fatal(err)
		}
		if d := maxRelDiff(states[3], ht[(1*s.Hv+h)*D*D:][:D*D]); d > 1e-10 {
			t.Errorf("head %d: end state of sequence 1 differs by %.3g", h, d)
		}
	}
	if _, err := SegmentTransfer(in, 0, 60, 80); err == nil {
		t.Error("a segment across two sequences accepted")
	}
	if _, err := SegmentTransfer(in, 2, 0, 10); err == nil {
		t.Error("value head 2 of 2 accepted")
	}
	if _, err := SegmentStarts(in, 0, []int{100, 90}, nil); err == nil {
		t.Error("decreasing bounds accepted")
	}
}

// Joining maps is associative, so a tree or a scan in any grouping gives
// the same states.
func TestTransferAssociative(t *testing.T) {
	s := Shape{B: 1, T: 200, Hq: 1, Hv: 2}
	in, err := Recipe(s, 5, RecipeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := make([]Transfer, 3)
	for i, b := range [][2]int{{0, 50}, {50, 130}, {130, 200}} {
		if m[i], err = SegmentTransfer(in, 1, b[0], b[1]); err != nil {
			t.Fatal(err)
		}
	}
	left := m[0].Then(m[1]).Then(m[2])
	right := m[0].Then(m[1].Then(m[2]))
	whole, err := SegmentTransfer(in, 1, 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]Transfer{{left, right}, {left, whole}} {
		if d := math.Max(maxRelDiff(pair[0].M, pair[1].M), maxRelDiff(pair[0].B, pair[1].B)); d > 1e-12 {
			t.Errorf("maps differ by %.3g", d)
		}
	}
	id := IdentityTransfer()
	if d := maxRelDiff(id.Then(m[1]).M, m[1].M); d != 0 {
		t.Errorf("identity then m differs by %.3g", d)
	}
}

// One chunk's map in the closed forms the kernels compute it by:
//
//	M = gamma (I - K^T A0 diag(beta) K)          gamma = e^{g_last}, A0 the ungated A
//	B = (K * e^{g_last - g})^T A diag(beta) V    A the gated one
//
// with g the chunk-local cumsum.
func TestChunkTransferClosedForm(t *testing.T) {
	s := Shape{B: 1, T: 64, Hq: 1, Hv: 4}
	in, err := Recipe(s, 11, RecipeOptions{Dtype: dtype.FP32})
	if err != nil {
		t.Fatal(err)
	}
	gcum, err := ChunkCumsum(s, in.G)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := SolveA(s, in.K, in.Beta, gcum)
	if err != nil {
		t.Fatal(err)
	}
	a0, err := SolveA(s, in.K, in.Beta, make([]float64, len(gcum)))
	if err != nil {
		t.Fatal(err)
	}
	const C = 64
	for h := range s.Hv {
		got, err := SegmentTransfer(in, h, 0, C)
		if err != nil {
			t.Fatal(err)
		}
		k := func(j, d int) float64 { return in.K[j*D+d] } // Hq = 1
		v := func(j, e int) float64 { return in.V[(j*s.Hv+h)*D+e] }
		beta := func(j int) float64 { return in.Beta[j*s.Hv+h] }
		g := func(j int) float64 { return gcum[j*s.Hv+h] }
		A := func(a []float64, i, j int) float64 { return a[(i*s.Hv+h)*C+j] }
		gl := g(C - 1)
		// X = A0 diag(beta) K and Y = A diag(beta) V, [C x 128].
		X := make([]float64, C*D)
		Y := make([]float64, C*D)
		for i := range C {
			for j := range C {
				x0, y0 := A(a0, i, j)*beta(j), A(ag, i, j)*beta(j)
				for d := range D {
					X[i*D+d] += x0 * k(j, d)
					Y[i*D+d] += y0 * v(j, d)
				}
			}
		}
		M := make([]float64, D*D)
		B := make([]float64, D*D)
		for r := range D {
			for c := range D {
				var m, b float64
				for i := range C {
					m += k(i, r) * X[i*D+c]
					b += k(i, r) * math.Exp(gl-g(i)) * Y[i*D+c]
				}
				id := 0.0
				if r == c {
					id = 1
				}
				M[r*D+c] = math.Exp(gl) * (id - m)
				B[r*D+c] = b
			}
		}
		if d := math.Max(maxRelDiff(M, got.M), maxRelDiff(B, got.B)); d > 1e-10 {
			t.Errorf("head %d (zero gate %v): closed forms differ from the recurrence by %.3g", h, ZeroGateHead(h), d)
		}
	}
}
