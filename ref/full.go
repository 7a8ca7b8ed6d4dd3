package ref

import (
	"fmt"
	"math"
)

// The full forward (FLA's chunk_gated_delta_rule; docs/SPEC.md, "Full
// forward") takes what a model layer produces: raw per-token log-gates, or
// the gate's own raw inputs, and q and k that may still need their L2
// normalisation. These are the float64 definitions of those two steps; the
// recurrence after them is Recurrent's.

// L2NormEps is the epsilon of the in-kernel L2 normalisation:
// x / sqrt(sum(x^2) + eps), as FLA's use_qk_l2norm_in_kernel computes it.
const L2NormEps = 1e-6

// L2Normalize returns x with every 128-vector (one token of one head)
// scaled to x / sqrt(sum(x^2) + L2NormEps). A zero vector stays zero.
func L2Normalize(x []float64) ([]float64, error) {
	if len(x)%D != 0 {
		return nil, fmt.Errorf("ref: L2Normalize: %d values, not a multiple of %d: %w", len(x), D, ErrShape)
	}
	out := make([]float64, len(x))
	for r := 0; r < len(x); r += D {
		row := x[r : r+D]
		inv := 1 / math.Sqrt(dot(row, row)+L2NormEps)
		for j, v := range row {
			out[r+j] = v * inv
		}
	}
	return out, nil
}

// Softplus is log(1 + e^x), taken as x above 20 (where the two agree to
// within float64's rounding), as FLA's gate does.
func Softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// GateFromRaw computes the per-token log-gate of FLA's use_gate_in_kernel:
//
//	g[t, h] = -exp(aLog[h]) * softplus(a[t, h] + dtBias[h])
//
// for a [tokens, Hv] (flat), aLog and dtBias [Hv]. The result is <= 0.
func GateFromRaw(a, aLog, dtBias []float64) ([]float64, error) {
	hv := len(aLog)
	if hv == 0 || len(dtBias) != hv {
		return nil, fmt.Errorf("ref: GateFromRaw: A_log has %d heads, dt_bias %d: want the same, at least 1: %w", hv, len(dtBias), ErrShape)
	}
	if len(a)%hv != 0 {
		return nil, fmt.Errorf("ref: GateFromRaw: %d gate inputs, not a multiple of Hv = %d: %w", len(a), hv, ErrShape)
	}
	g := make([]float64, len(a))
	for i, x := range a {
		h := i % hv
		g[i] = -math.Exp(aLog[h]) * Softplus(x+dtBias[h])
	}
	return g, nil
}

// FullOptions are the in-kernel steps of the full forward.
type FullOptions struct {
	// L2Norm normalises q and k (L2Normalize) before the recurrence.
	L2Norm bool
	// ALog and DtBias, when set, make Inputs.G the gate's raw input a
	// [B, T, Hv], turned into the log-gate by GateFromRaw.
	ALog, DtBias []float64
	// BetaLogits makes Inputs.Beta the logits b of beta, turned into beta
	// by BetaFromLogits: sigmoid(b).
	BetaLogits bool
	// NegEigval (with BetaLogits only) makes beta 2 sigmoid(b), in (0, 2).
	NegEigval bool
}

// Full computes the full forward in float64: the in-kernel steps of opts,
// then Recurrent. It returns o [B,T,Hv,128] and ht [N,Hv,128,128].
func Full(in Inputs, opts FullOptions) (o, ht []float64, err error) {
	if in, err = opts.prepare(in); err != nil {
		return nil, nil, err
	}
	return Recurrent(in)
}

// prepare checks in and returns it with the in-kernel steps of opts
// applied: q and k normalised, g from its raw input, beta from its logits.
// The slices it replaces are new; in's own are never written.
func (opts FullOptions) prepare(in Inputs) (Inputs, error) {
	if err := in.Check(); err != nil {
		return Inputs{}, err
	}
	if opts.NegEigval && !opts.BetaLogits {
		// Beta as given is used as given, in (0, 2) or not: the option
		// would silently do nothing.
		return Inputs{}, fmt.Errorf("ref: neg_eigval: doubles sigmoid(b) of beta logits only (BetaLogits); give beta in (0, 2) as it is: %w", ErrShape)
	}
	var err error
	if opts.L2Norm {
		if in.Q, err = L2Normalize(in.Q); err != nil {
			return Inputs{}, err
		}
		if in.K, err = L2Normalize(in.K); err != nil {
			return Inputs{}, err
		}
	}
	if opts.ALog != nil || opts.DtBias != nil {
		if len(opts.ALog) != in.Shape.Hv {
			return Inputs{}, fmt.Errorf("ref: a_log: has %d heads, want Hv = %d: %w", len(opts.ALog), in.Shape.Hv, ErrShape)
		}
		if in.G, err = GateFromRaw(in.G, opts.ALog, opts.DtBias); err != nil {
			return Inputs{}, err
		}
	}
	if opts.BetaLogits {
		in.Beta = BetaFromLogits(in.Beta, opts.NegEigval)
	}
	return in, nil
}
