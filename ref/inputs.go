package ref

import (
	"fmt"
	"math"
)

// Inputs holds one forward call's inputs as flat float64 tensors in the
// layouts of the package comment.
type Inputs struct {
	// Shape gives B, T, Hq, Hv and the optional cu_seqlens.
	Shape Shape
	// Q and K are [B, T, Hq, 128]; V is [B, T, Hv, 128].
	Q, K, V []float64
	// G is the raw per-token log-gate [B, T, Hv] (not the cumsum).
	G []float64
	// Beta is [B, T, Hv].
	Beta []float64
	// H0 is the initial state [N, Hv, 128, 128]; nil means zero.
	H0 []float64
	// Scale multiplies the output; 0 means DefaultScale.
	Scale float64
}

// DefaultScale is the output scale used when Inputs.Scale is 0: 128^-0.5.
var DefaultScale = 1 / math.Sqrt(D)

// Check validates the shape and the length of every slice, naming the first
// bad field in the error.
func (in Inputs) Check() error { return in.check(true) }

// check validates in; Chunked passes requireG = false because it takes the
// gates as g_cumsum instead of in.G.
func (in Inputs) check(requireG bool) error {
	s := in.Shape
	if err := s.Validate(); err != nil {
		return err
	}
	if err := checkLen("q", len(in.Q), s.QKLen(), "B*T*Hq*128"); err != nil {
		return err
	}
	if err := checkLen("k", len(in.K), s.QKLen(), "B*T*Hq*128"); err != nil {
		return err
	}
	if err := checkLen("v", len(in.V), s.VLen(), "B*T*Hv*128"); err != nil {
		return err
	}
	if requireG || in.G != nil {
		if err := checkLen("g", len(in.G), s.GateLen(), "B*T*Hv"); err != nil {
			return err
		}
	}
	if err := checkLen("beta", len(in.Beta), s.GateLen(), "B*T*Hv"); err != nil {
		return err
	}
	if in.H0 != nil {
		if err := checkLen("h0", len(in.H0), s.StateLen(), "N*Hv*128*128"); err != nil {
			return err
		}
	}
	if math.IsNaN(in.Scale) || math.IsInf(in.Scale, 0) {
		return fmt.Errorf("ref: scale: want a finite number, got %v: %w", in.Scale, ErrShape)
	}
	return nil
}

// EffectiveScale returns Scale, or DefaultScale when Scale is 0.
func (in Inputs) EffectiveScale() float64 {
	if in.Scale == 0 {
		return DefaultScale
	}
	return in.Scale
}

// initState copies state (n, h) of h0 into S, or zeroes S when h0 is nil.
func initState(S, h0 []float64, n, h, hv int) {
	if h0 == nil {
		clear(S)
		return
	}
	copy(S, h0[(n*hv+h)*D*D:][:D*D])
}
