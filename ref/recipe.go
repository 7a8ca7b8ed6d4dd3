package ref

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gdnjit/gdn/dtype"
)

// Quantize returns x rounded to d (BF16, FP16 or FP32) and widened back to
// float64: the values a kernel that reads d sees.
func Quantize(d dtype.Dtype, x []float64) ([]float64, error) {
	switch d {
	case dtype.BF16:
		return QuantizeBF16(x), nil
	case dtype.FP16:
		return QuantizeFP16(x), nil
	case dtype.FP32:
		return QuantizeF32(x), nil
	}
	return nil, fmt.Errorf("ref: dtype %v: want bf16, fp16 or fp32: %w", d, ErrShape)
}

// RecipeOptions selects the variants of the docs/SPEC.md input recipe.
type RecipeOptions struct {
	// Dtype is what q, k and v are rounded to (after L2 normalisation of
	// q and k): BF16 (also the zero value, dtype.Invalid), FP16 or FP32.
	// g, beta and h0 are always rounded to float32, as the kernel reads them
	// in fp32.
	Dtype dtype.Dtype
	// WithH0 draws h0 ~ N(0,1); without it H0 is nil (zero initial state).
	WithH0 bool
	// StrongDecay sets g = -5 for every token and head, so exp underflows
	// across a chunk.
	StrongDecay bool
	// BetaValue, when non-nil, sets every beta to *BetaValue (docs/SPEC.md tests 0
	// and 1) instead of sigmoid(N(0,1)).
	BetaValue *float64
	// Scale is copied to Inputs.Scale (0 means DefaultScale).
	Scale float64
}

// ZeroGateHead reports whether value head h has g = 0 (no decay) in the
// recipe: a quarter of the value heads, those with h % 4 == 0 (so head 0
// always, and exactly Hv/4 heads when Hv is a multiple of 4).
func ZeroGateHead(h int) bool { return h%4 == 0 }

// Each tensor draws from its own PCG stream, so switching one option (say
// WithH0) leaves the other tensors of a seed unchanged.
const (
	streamQ uint64 = 0x9e3779b97f4a7c15 + iota
	streamK
	streamV
	streamG
	streamBeta
	streamH0
)

// Recipe returns seeded inputs for s following docs/SPEC.md (FlashQLA's benchmark
// recipe): q, k L2-normalised per token and head; v ~ N(0,1);
// g = logsigmoid(N(0,1))/16 except g = 0 on the ZeroGateHead heads;
// beta = sigmoid(N(0,1)); h0 ~ N(0,1) when opts.WithH0. The same seed,
// shape and options always give the same inputs (math/rand/v2 PCG).
func Recipe(s Shape, seed uint64, opts RecipeOptions) (Inputs, error) {
	if err := s.Validate(); err != nil {
		return Inputs{}, err
	}
	dt := opts.Dtype
	if dt == dtype.Invalid {
		dt = dtype.BF16
	}
	if dt != dtype.BF16 && dt != dtype.FP16 && dt != dtype.FP32 {
		return Inputs{}, fmt.Errorf("ref: opts.Dtype: want bf16, fp16 or fp32, got %v: %w", opts.Dtype, ErrShape)
	}
	if b := opts.BetaValue; b != nil && (math.IsNaN(*b) || math.IsInf(*b, 0)) {
		return Inputs{}, fmt.Errorf("ref: opts.BetaValue: want a finite number, got %v: %w", *b, ErrShape)
	}
	if math.IsNaN(opts.Scale) || math.IsInf(opts.Scale, 0) {
		return Inputs{}, fmt.Errorf("ref: opts.Scale: want a finite number, got %v: %w", opts.Scale, ErrShape)
	}
	rng := func(stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }
	in := Inputs{Shape: s, Scale: opts.Scale}
	var err error
	if in.Q, err = Quantize(dt, unitRows(rng(streamQ), s.QKLen())); err != nil {
		return Inputs{}, err
	}
	if in.K, err = Quantize(dt, unitRows(rng(streamK), s.QKLen())); err != nil {
		return Inputs{}, err
	}
	if in.V, err = Quantize(dt, normals(rng(streamV), s.VLen())); err != nil {
		return Inputs{}, err
	}

	in.G = make([]float64, s.GateLen())
	r := rng(streamG)
	for i := range in.G {
		switch {
		case opts.StrongDecay:
			in.G[i] = -5
		case ZeroGateHead(i % s.Hv):
			in.G[i] = 0
		default:
			in.G[i] = float64(float32(LogSigmoid(r.NormFloat64()) / 16))
		}
	}

	in.Beta = make([]float64, s.GateLen())
	r = rng(streamBeta)
	for i := range in.Beta {
		if opts.BetaValue != nil {
			in.Beta[i] = float64(float32(*opts.BetaValue))
		} else {
			in.Beta[i] = float64(float32(Sigmoid(r.NormFloat64())))
		}
	}

	if opts.WithH0 {
		in.H0 = QuantizeF32(normals(rng(streamH0), s.StateLen()))
	}
	return in, nil
}

// normals returns n draws from N(0,1).
func normals(r *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = r.NormFloat64()
	}
	return x
}

// unitRows returns n normal draws with every consecutive D-vector (one token
// of one head) scaled to unit L2 norm.
func unitRows(r *rand.Rand, n int) []float64 {
	x := normals(r, n)
	for i := 0; i < n; i += D {
		row := x[i : i+D]
		norm := math.Sqrt(dot(row, row))
		if norm == 0 {
			continue // measure-zero; leave the zero vector rather than divide by 0
		}
		for j := range row {
			row[j] /= norm
		}
	}
	return x
}

// LogSigmoid returns log(1/(1+exp(-x))) without overflow for large |x|: the
// recipe's raw log-gate is LogSigmoid(N(0,1))/16.
func LogSigmoid(x float64) float64 {
	if x >= 0 {
		return -math.Log1p(math.Exp(-x))
	}
	return x - math.Log1p(math.Exp(x))
}

// Sigmoid returns 1/(1+exp(-x)) without overflow for large |x|: the recipe's
// beta is Sigmoid(N(0,1)).
func Sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// Float returns a pointer to x, for RecipeOptions.BetaValue.
func Float(x float64) *float64 { return &x }
