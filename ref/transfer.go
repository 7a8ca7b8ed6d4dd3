package ref

import (
	"fmt"
	"math"
)

// Transfer is the affine map that a stretch of tokens applies to the state
// of one (sequence, value head):
//
//	S_out = M S_in + B
//
// with M [128 x 128] (key by key) and B [128 x 128] (key by value), both
// row-major. Every token is such a map (M_t = exp(g_t) (I - beta_t k_t
// k_t^T), B_t = beta_t k_t v_t^T), and maps compose: doing (M1, B1) and then
// (M2, B2) is (M2 M1, M2 B1 + B2), an associative product. This is what
// lets a long sequence be split across multiprocessors exactly: each
// segment builds its map on its own, a short scan of the maps gives every
// segment its true start state, and each segment then computes its outputs
// from that state. It is the float64 oracle for the kernels that do so.
type Transfer struct {
	M, B []float64
}

// IdentityTransfer is the map of no tokens: M = I, B = 0.
func IdentityTransfer() Transfer {
	t := Transfer{M: make([]float64, D*D), B: make([]float64, D*D)}
	for i := range D {
		t.M[i*D+i] = 1
	}
	return t
}

// SegmentTransfer returns the map of the flat tokens [lo, hi) for value head
// h (the tokens must lie inside one sequence of in.Shape; in.G is the raw
// per-token log-gate). It follows the recurrence token by token, in
// O(128^2) per token: M <- e^g (M - beta k (k^T M)) and
// B <- e^g (B - beta k (k^T B)) + beta k v^T.
func SegmentTransfer(in Inputs, h, lo, hi int) (Transfer, error) {
	if err := in.Check(); err != nil {
		return Transfer{}, err
	}
	s := in.Shape
	if h < 0 || h >= s.Hv {
		return Transfer{}, fmt.Errorf("ref: SegmentTransfer: value head %d outside [0, %d)", h, s.Hv)
	}
	inside := false
	for _, se := range s.Seqs() {
		if lo >= se[0] && hi <= se[1] && lo <= hi {
			inside = true
			break
		}
	}
	if !inside {
		return Transfer{}, fmt.Errorf("ref: SegmentTransfer: tokens [%d, %d) are not inside one sequence", lo, hi)
	}
	t := IdentityTransfer()
	hk := h / s.G()
	row := make([]float64, D)
	for tok := lo; tok < hi; tok++ {
		k := in.K[(tok*s.Hq+hk)*D:][:D]
		v := in.V[(tok*s.Hv+h)*D:][:D]
		decay := math.Exp(in.G[tok*s.Hv+h])
		beta := in.Beta[tok*s.Hv+h]
		for _, X := range [][]float64{t.M, t.B} {
			// row = k^T X; X = decay (X - beta k row).
			clear(row)
			for i := range D {
				axpy(row, k[i], X[i*D:][:D])
			}
			for i := range D {
				xi := X[i*D:][:D]
				c := beta * k[i]
				for j := range D {
					xi[j] = decay * (xi[j] - c*row[j])
				}
			}
		}
		for i := range D {
			axpy(t.B[i*D:][:D], beta*k[i], v)
		}
	}
	return t, nil
}

// Then returns the map of t followed by next: (next.M t.M, next.M t.B + next.B).
func (t Transfer) Then(next Transfer) Transfer {
	return Transfer{M: matMul(next.M, t.M), B: addMat(matMul(next.M, t.B), next.B)}
}

// Apply returns M S + B for a state S [128 x 128].
func (t Transfer) Apply(S []float64) []float64 {
	return addMat(matMul(t.M, S), t.B)
}

// SegmentStarts splits the tokens [bounds[0], bounds[len-1]) of one
// sequence, value head h, at the given bounds (increasing flat token
// indices) and returns the true state at the start of every segment and at
// the end (len(bounds) states), the way a sequence-parallel kernel gets
// them: each segment's map is built independently, then a scan applies
// them in order to the initial state S0 (nil: zero).
func SegmentStarts(in Inputs, h int, bounds []int, S0 []float64) ([][]float64, error) {
	if len(bounds) < 1 {
		return nil, fmt.Errorf("ref: SegmentStarts: no bounds")
	}
	for i := 1; i < len(bounds); i++ {
		if bounds[i] < bounds[i-1] {
			return nil, fmt.Errorf("ref: SegmentStarts: bounds %v decrease", bounds)
		}
	}
	maps := make([]Transfer, len(bounds)-1)
	for i := range maps {
		var err error
		if maps[i], err = SegmentTransfer(in, h, bounds[i], bounds[i+1]); err != nil {
			return nil, err
		}
	}
	S := make([]float64, D*D)
	copy(S, S0)
	states := [][]float64{S}
	for _, m := range maps {
		S = m.Apply(S)
		states = append(states, S)
	}
	return states, nil
}

// matMul returns the product of two 128 x 128 row-major matrices.
func matMul(a, b []float64) []float64 {
	out := make([]float64, D*D)
	for i := range D {
		oi := out[i*D:][:D]
		for k, aik := range a[i*D:][:D] {
			if aik != 0 {
				axpy(oi, aik, b[k*D:][:D])
			}
		}
	}
	return out
}

// addMat returns a + b elementwise.
func addMat(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] + b[i]
	}
	return out
}
