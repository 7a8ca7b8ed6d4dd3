package ref

import (
	"github.com/gdnjit/gdn/dtype"

	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestRecurrentOneToken checks Recurrent against the recurrence solved by
// hand for one token. With e = exp(g), c = k.q and p = h0^T k:
//
//	S  = e (h0 - beta k p^T) + beta k v^T
//	o  = scale S^T q = scale (e h0^T q - e beta c p + beta c v)
func TestRecurrentOneToken(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Shape
		opts RecipeOptions
	}{
		{"h0", Shape{B: 1, T: 1, Hq: 1, Hv: 1}, RecipeOptions{WithH0: true, Dtype: dtype.FP32}},
		{"h0_gva2", Shape{B: 1, T: 1, Hq: 1, Hv: 2}, RecipeOptions{WithH0: true, Dtype: dtype.FP32, Scale: 0.7}},
		{"noh0_B2", Shape{B: 2, T: 1, Hq: 2, Hv: 4}, RecipeOptions{Dtype: dtype.FP32}},
		{"strong", Shape{B: 1, T: 1, Hq: 1, Hv: 3}, RecipeOptions{WithH0: true, StrongDecay: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := Recipe(tc.s, 5, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			o, ht, err := Recurrent(in)
			if err != nil {
				t.Fatal(err)
			}
			s := tc.s
			scale := in.EffectiveScale()
			for n := range s.B {
				for h := range s.Hv {
					hk := h / s.G()
					q := in.Q[(n*s.Hq+hk)*D:][:D]
					k := in.K[(n*s.Hq+hk)*D:][:D]
					v := in.V[(n*s.Hv+h)*D:][:D]
					e := math.Exp(in.G[n*s.Hv+h])
					b := in.Beta[n*s.Hv+h]
					h0 := make([]float64, D*D)
					if in.H0 != nil {
						h0 = in.H0[(n*s.Hv+h)*D*D:][:D*D]
					}
					c := dot(k, q)
					for j := range D {
						var h0q, p float64 // (h0^T q)_j and (h0^T k)_j
						for i := range D {
							h0q += h0[i*D+j] * q[i]
							p += h0[i*D+j] * k[i]
						}
						want := scale * (e*h0q - e*b*c*p + b*c*v[j])
						if got := o[(n*s.Hv+h)*D+j]; math.Abs(got-want) > 1e-12 {
							t.Fatalf("o[n=%d,h=%d,%d] = %v, want %v", n, h, j, got, want)
						}
						for i := range D {
							wantS := e*(h0[i*D+j]-b*k[i]*p) + b*k[i]*v[j]
							if got := ht[((n*s.Hv+h)*D+i)*D+j]; math.Abs(got-wantS) > 1e-12 {
								t.Fatalf("ht[n=%d,h=%d,%d,%d] = %v, want %v", n, h, i, j, got, wantS)
							}
						}
					}
				}
			}
		})
	}
}

// TestRecurrentByHand checks numbers worked out on paper: k = q = e_0,
// v = all ones, beta = 1/2, g = log(1/2), h0 = 2 on its first row.
// S = 1/2 (h0 - 1/2 e_0 e_0^T h0) + 1/2 e_0 1^T has first row
// 1/2 (2 - 1) + 1/2 = 1 and zeros elsewhere, so o = scale * 1.
func TestRecurrentByHand(t *testing.T) {
	s := Shape{B: 1, T: 1, Hq: 1, Hv: 1}
	in := Inputs{
		Shape: s,
		Q:     make([]float64, D), K: make([]float64, D), V: make([]float64, D),
		G: []float64{math.Log(0.5)}, Beta: []float64{0.5},
		H0: make([]float64, D*D), Scale: 2,
	}
	in.Q[0], in.K[0] = 1, 1
	for j := range D {
		in.V[j] = 1
		in.H0[j] = 2
	}
	o, ht, err := Recurrent(in)
	if err != nil {
		t.Fatal(err)
	}
	for j := range D {
		if math.Abs(o[j]-2) > 1e-15 {
			t.Fatalf("o[%d] = %v, want 2", j, o[j])
		}
		if math.Abs(ht[j]-1) > 1e-15 {
			t.Fatalf("ht[0][%d] = %v, want 1", j, ht[j])
		}
	}
	for i := D; i < D*D; i++ {
		if ht[i] != 0 {
			t.Fatalf("ht[%d][%d] = %v, want 0", i/D, i%D, ht[i])
		}
	}
}

// TestRecurrentDense checks several tokens against the recurrence written
// with dense gonum matrices, S = exp(g) (I - beta k k^T) S + beta k v^T,
// an implementation that shares no code with Recurrent.
func TestRecurrentDense(t *testing.T) {
	s := Shape{B: 1, T: 5, Hq: 2, Hv: 4}
	in, err := Recipe(s, 9, RecipeOptions{WithH0: true})
	if err != nil {
		t.Fatal(err)
	}
	o, ht, err := Recurrent(in)
	if err != nil {
		t.Fatal(err)
	}
	scale := in.EffectiveScale()
	for h := range s.Hv {
		hk := h / s.G()
		S := mat.NewDense(D, D, append([]float64(nil), in.H0[h*D*D:][:D*D]...))
		for tok := range s.T {
			k := mat.NewVecDense(D, append([]float64(nil), in.K[(tok*s.Hq+hk)*D:][:D]...))
			q := mat.NewVecDense(D, append([]float64(nil), in.Q[(tok*s.Hq+hk)*D:][:D]...))
			v := mat.NewVecDense(D, append([]float64(nil), in.V[(tok*s.Hv+h)*D:][:D]...))
			b := in.Beta[tok*s.Hv+h]
			var P, next, kv mat.Dense
			P.Outer(-b, k, k) // -beta k k^T
			for i := range D {
				P.Set(i, i, P.At(i, i)+1)
			}
			next.Mul(&P, S)
			next.Scale(math.Exp(in.G[tok*s.Hv+h]), &next)
			kv.Outer(b, k, v)
			next.Add(&next, &kv)
			S = &next
			var out mat.VecDense
			out.MulVec(S.T(), q)
			for j := range D {
				want := scale * out.AtVec(j)
				if got := o[(tok*s.Hv+h)*D+j]; math.Abs(got-want) > 1e-12 {
					t.Fatalf("o[t=%d,h=%d,%d] = %v, want %v", tok, h, j, got, want)
				}
			}
		}
		for i := range D {
			for j := range D {
				if got, want := ht[(h*D+i)*D+j], S.At(i, j); math.Abs(got-want) > 1e-12 {
					t.Fatalf("ht[h=%d,%d,%d] = %v, want %v", h, i, j, got, want)
				}
			}
		}
	}
}
