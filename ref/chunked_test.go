package ref

import (
	"github.com/gdnjit/gdn/dtype"

	"fmt"
	"math"
	"os"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// equivTol is how close the chunked form must come to the recurrence in
// float64: both are exact algebra, so only rounding separates them.
const equivTol = 1e-10

// largestEquiv records the largest Recurrent-vs-Chunked difference seen by
// TestChunkedMatchesRecurrent, for TestMain's one-line summary.
var largestEquiv struct {
	diff  float64
	name  string
	cases int
}

func TestMain(m *testing.M) {
	code := m.Run()
	if largestEquiv.cases > 0 {
		fmt.Printf("ref: largest Recurrent vs ChunkCumsum+SolveA+Chunked difference over %d cases: %.3e (%s)\n",
			largestEquiv.cases, largestEquiv.diff, largestEquiv.name)
	}
	os.Exit(code)
}

// chunkedPipeline runs the three chunked steps from raw gates.
func chunkedPipeline(in Inputs) (o, ht []float64, err error) {
	gcum, err := ChunkCumsum(in.Shape, in.G)
	if err != nil {
		return nil, nil, err
	}
	A, err := SolveA(in.Shape, in.K, in.Beta, gcum)
	if err != nil {
		return nil, nil, err
	}
	return Chunked(in, gcum, A)
}

func maxAbsDiff(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range a {
		d := math.Abs(a[i] - b[i])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		m = max(m, d)
	}
	return m
}

type equivCase struct {
	name string
	s    Shape
	opts RecipeOptions
}

// equivCases covers T around the chunk length, every GVA ratio 1..4, B = 1
// and 2, packed sequences with empty and one-token members, h0 on and off,
// strong decay, beta 0 and 1, fp16 and fp32 inputs and a custom scale.
func equivCases() []equivCase {
	var cases []equivCase
	heads := [][2]int{{1, 1}, {1, 2}, {2, 6}, {1, 4}, {2, 8}}
	variants := []struct {
		tag  string
		opts RecipeOptions
	}{
		{"h0", RecipeOptions{WithH0: true}},
		{"noh0", RecipeOptions{}},
		{"h0_strong", RecipeOptions{WithH0: true, StrongDecay: true}},
		{"h0_beta1", RecipeOptions{WithH0: true, BetaValue: Float(1)}},
		{"h0_beta0", RecipeOptions{WithH0: true, BetaValue: Float(0)}},
		{"fp16_scale", RecipeOptions{WithH0: true, Dtype: dtype.FP16, Scale: 0.3}},
		{"f32", RecipeOptions{WithH0: true, Dtype: dtype.FP32}},
	}
	i := 0
	for _, T := range []int{1, 63, 64, 65, 200} {
		for _, hd := range heads {
			for _, B := range []int{1, 2} {
				v := variants[i%len(variants)]
				i++
				cases = append(cases, equivCase{
					name: fmt.Sprintf("T%d_Hq%d_Hv%d_B%d_%s", T, hd[0], hd[1], B, v.tag),
					s:    Shape{B: B, T: T, Hq: hd[0], Hv: hd[1]},
					opts: v.opts,
				})
			}
		}
	}
	// Every variant on a short T=130 so each sees a full chunk and a tail.
	for _, v := range variants {
		cases = append(cases, equivCase{
			name: "T130_Hq1_Hv4_" + v.tag,
			s:    Shape{B: 1, T: 130, Hq: 1, Hv: 4},
			opts: v.opts,
		})
	}
	// Packed sequences, including empty and one-token ones, at both ends.
	lens := []int{0, 1, 63, 64, 65, 130, 0}
	cu := []int{0}
	for _, l := range lens {
		cu = append(cu, cu[len(cu)-1]+l)
	}
	T := cu[len(cu)-1]
	for _, hd := range [][2]int{{1, 1}, {2, 6}, {1, 4}} {
		for _, v := range variants[:5] {
			cases = append(cases, equivCase{
				name: fmt.Sprintf("varlen_Hq%d_Hv%d_%s", hd[0], hd[1], v.tag),
				s:    Shape{B: 1, T: T, Hq: hd[0], Hv: hd[1], CuSeqlens: cu},
				opts: v.opts,
			})
		}
	}
	return cases
}

func TestChunkedMatchesRecurrent(t *testing.T) {
	for i, c := range equivCases() {
		t.Run(c.name, func(t *testing.T) {
			in, err := Recipe(c.s, uint64(1000+i), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			oR, htR, err := Recurrent(in)
			if err != nil {
				t.Fatal(err)
			}
			oC, htC, err := chunkedPipeline(in)
			if err != nil {
				t.Fatal(err)
			}
			dO, dH := maxAbsDiff(oR, oC), maxAbsDiff(htR, htC)
			t.Logf("max |diff|: o %.3e ht %.3e", dO, dH)
			if d := max(dO, dH); d > largestEquiv.diff || largestEquiv.name == "" {
				largestEquiv.diff, largestEquiv.name = d, c.name
			}
			largestEquiv.cases++
			if dO > equivTol || dH > equivTol {
				t.Errorf("chunked differs from recurrent: o %.3e ht %.3e > %.0e", dO, dH, equivTol)
			}
			// Guard against a vacuous pass: the outputs must carry signal.
			if rms(oR) == 0 {
				t.Errorf("o is all zero")
			}
			if Compare64(oC, oR).NaN+Compare64(htC, htR).NaN > 0 {
				t.Errorf("non-finite values in the outputs")
			}
		})
	}
	t.Logf("largest difference over %d cases: %.3e (%s)", largestEquiv.cases, largestEquiv.diff, largestEquiv.name)
}

func rms(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	return math.Sqrt(dot(x, x) / float64(len(x)))
}

// TestEmptySequenceKeepsH0 checks that a zero-length packed sequence leaves
// its final state exactly at h0 in both forms.
func TestEmptySequenceKeepsH0(t *testing.T) {
	s := Shape{B: 1, T: 5, Hq: 1, Hv: 2, CuSeqlens: []int{0, 0, 5, 5}}
	in, err := Recipe(s, 7, RecipeOptions{WithH0: true})
	if err != nil {
		t.Fatal(err)
	}
	for name, run := range map[string]func(Inputs) ([]float64, []float64, error){
		"Recurrent": Recurrent, "Chunked": chunkedPipeline,
	} {
		_, ht, err := run(in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, n := range []int{0, 2} {
			state := ht[n*s.Hv*D*D:][:s.Hv*D*D]
			if d := maxAbsDiff(state, in.H0[n*s.Hv*D*D:][:s.Hv*D*D]); d != 0 {
				t.Errorf("%s: sequence %d is empty but its state moved by %.3e", name, n, d)
			}
		}
		if d := maxAbsDiff(ht[s.Hv*D*D:][:s.Hv*D*D], in.H0[s.Hv*D*D:][:s.Hv*D*D]); d == 0 {
			t.Errorf("%s: sequence 1 has 5 tokens but its state equals h0", name)
		}
	}
}

func TestChunkCumsum(t *testing.T) {
	// Two sequences of 3 and 66 tokens, one value head, every g = 1: the
	// running sum restarts at the sequence start and again after 64 tokens.
	s := Shape{B: 1, T: 69, Hq: 1, Hv: 1, CuSeqlens: []int{0, 3, 69}}
	g := make([]float64, 69)
	for i := range g {
		g[i] = 1
	}
	got, err := ChunkCumsum(s, g)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 2, 3}
	for i := range 64 {
		want = append(want, float64(i+1))
	}
	want = append(want, 1, 2)
	if d := maxAbsDiff(got, want); d != 0 {
		t.Errorf("ChunkCumsum = %v, want %v", got, want)
	}

	// Two heads, B = 2: the heads are independent and batches restart.
	s = Shape{B: 2, T: 2, Hq: 1, Hv: 2}
	got, err = ChunkCumsum(s, []float64{1, 10, 2, 20, 3, 30, 4, 40})
	if err != nil {
		t.Fatal(err)
	}
	want = []float64{1, 10, 3, 30, 3, 30, 7, 70}
	if d := maxAbsDiff(got, want); d != 0 {
		t.Errorf("ChunkCumsum = %v, want %v", got, want)
	}
}

// TestSolveA checks the A tensor against a dense inverse from gonum, and its
// storage: unit diagonal, zero above it and past the chunk's end.
func TestSolveA(t *testing.T) {
	s := Shape{B: 1, T: 90, Hq: 1, Hv: 2, CuSeqlens: []int{0, 70, 90}}
	in, err := Recipe(s, 3, RecipeOptions{Dtype: dtype.FP32})
	if err != nil {
		t.Fatal(err)
	}
	gcum, err := ChunkCumsum(s, in.G)
	if err != nil {
		t.Fatal(err)
	}
	A, err := SolveA(s, in.K, in.Beta, gcum)
	if err != nil {
		t.Fatal(err)
	}
	// Chunks: [0,64), [64,70), [70,90).
	for _, ch := range [][2]int{{0, 64}, {64, 6}, {70, 20}} {
		c0, L := ch[0], ch[1]
		for h := range s.Hv {
			// M = I + StrictLower(diag(beta) K K^T * Gamma), built directly.
			M := mat.NewDense(L, L, nil)
			for i := range L {
				M.Set(i, i, 1)
				for j := range i {
					ki, kj := in.K[(c0+i)*D:][:D], in.K[(c0+j)*D:][:D]
					gi, gj := gcum[(c0+i)*s.Hv+h], gcum[(c0+j)*s.Hv+h]
					M.Set(i, j, in.Beta[(c0+i)*s.Hv+h]*dot(ki, kj)*math.Exp(gi-gj))
				}
			}
			var inv mat.Dense
			if err := inv.Inverse(M); err != nil {
				t.Fatal(err)
			}
			for i := range L {
				row := A[((c0+i)*s.Hv+h)*C:][:C]
				for j := range C {
					var want float64
					if j < L {
						want = inv.At(i, j)
					}
					if j > i && row[j] != 0 {
						t.Fatalf("chunk %d head %d: A[%d][%d] = %v above the diagonal, want 0", c0, h, i, j, row[j])
					}
					if math.Abs(row[j]-want) > 1e-12 {
						t.Fatalf("chunk %d head %d: A[%d][%d] = %v, want %v", c0, h, i, j, row[j], want)
					}
				}
				if row[i] != 1 {
					t.Fatalf("chunk %d head %d: diagonal A[%d][%d] = %v, want 1", c0, h, i, i, row[i])
				}
			}
		}
	}
}

// TestStrongDecayFinite checks that g = -5 per token (exp(g_cumsum) reaches
// e^-320, below the smallest float64) gives finite values everywhere.
func TestStrongDecayFinite(t *testing.T) {
	s := Shape{B: 1, T: 128, Hq: 1, Hv: 1}
	in, err := Recipe(s, 11, RecipeOptions{WithH0: true, StrongDecay: true})
	if err != nil {
		t.Fatal(err)
	}
	gcum, _ := ChunkCumsum(s, in.G)
	A, err := SolveA(s, in.K, in.Beta, gcum)
	if err != nil {
		t.Fatal(err)
	}
	o, ht, err := Chunked(in, gcum, A)
	if err != nil {
		t.Fatal(err)
	}
	for name, x := range map[string][]float64{"A": A, "o": o, "ht": ht} {
		for i, v := range x {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%s[%d] = %v", name, i, v)
			}
		}
	}
}
