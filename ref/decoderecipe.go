package ref

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gdnjit/gdn/dtype"
)

// DecodeRecipeOptions selects the variants of a decode call's inputs
// (DecodeRecipe).
type DecodeRecipeOptions struct {
	// Dtype is what q, k and v are rounded to: BF16 (also the zero
	// value), FP16 or FP32, as in RecipeOptions.
	Dtype dtype.Dtype
	// PoolSlots is S, the pool's number of slots: 0 means N, else at
	// least N.
	PoolSlots int
	// FreshEvery, when positive, gives every FreshEvery-th sequence (n %
	// FreshEvery == FreshEvery-1) slot -1: it starts from zero and writes
	// nothing.
	FreshEvery int
	// Layout and StateDtype are the pool's: its values are drawn, rounded
	// to StateDtype (FP32 or BF16) and stored in Layout, and both are set
	// in the problem's PoolOptions.
	Layout     StateLayout
	StateDtype dtype.Dtype
	// L2Norm draws q and k without normalising them (N(0,1) rows) and
	// sets Full.L2Norm: the call normalises them.
	L2Norm bool
	// GateInKernel makes Inputs.G the gate's raw input a ~ N(0,1) and draws
	// A_log and dt_bias per head as Qwen3-Next initialises them: A_log =
	// log(U(1, 16)); dt_bias the inverse softplus of dt, log dt ~
	// U(log 0.001, log 0.1).
	GateInKernel bool
	// BetaLogits makes Inputs.Beta the logits b ~ N(0,1); NegEigval (with
	// BetaLogits) takes beta = 2 sigmoid(b).
	BetaLogits, NegEigval bool
	// Scale is copied to Inputs.Scale (0 means DefaultScale).
	Scale float64
}

// DecodeProblem is one decode call drawn by DecodeRecipe: what Decode takes.
type DecodeProblem struct {
	// Inputs are the call's tokens; H0 is nil (the pool replaces it).
	Inputs Inputs
	// Pool is [S, Hv, 128, 128] in Options.Layout.
	Pool []float64
	// Slots holds sequence n's slot: a distinct slot in [0, S), or -1.
	Slots []int
	// Options are the call's: the layout, the pool's dtype and the
	// in-kernel steps the inputs were drawn for.
	Options PoolOptions
}

// Streams of the draws DecodeRecipe adds to Recipe's (recipe.go).
const (
	streamPool uint64 = streamH0 + 1 + iota
	streamSlots
	streamGateParams
)

// DecodeRecipe returns seeded inputs for a decode call of shape s
// (CheckDecodeShape): the docs/SPEC.md recipe (Recipe) for q, k, v, g and
// beta, changed by opts as documented there; a pool of opts.PoolSlots
// states ~ N(0,1); each sequence a distinct slot of a seeded permutation of
// the pool's (or -1: FreshEvery). The same seed, shape and options always
// give the same problem; every value is already representable in the dtype
// the device reads it in (q, k, v in Dtype; g, a, beta, b, A_log, dt_bias in
// fp32; the pool in StateDtype).
func DecodeRecipe(s Shape, seed uint64, opts DecodeRecipeOptions) (DecodeProblem, error) {
	if err := CheckDecodeShape(s); err != nil {
		return DecodeProblem{}, err
	}
	n := s.N()
	numSlots := opts.PoolSlots
	if numSlots == 0 {
		numSlots = n
	}
	if numSlots < n {
		return DecodeProblem{}, fmt.Errorf("ref: opts.PoolSlots: want 0 or at least N = %d, got %d: %w", n, opts.PoolSlots, ErrShape)
	}
	if opts.FreshEvery < 0 {
		return DecodeProblem{}, fmt.Errorf("ref: opts.FreshEvery: want 0 or more, got %d: %w", opts.FreshEvery, ErrShape)
	}
	if opts.NegEigval && !opts.BetaLogits {
		return DecodeProblem{}, fmt.Errorf("ref: opts.NegEigval: needs BetaLogits: %w", ErrShape)
	}
	if err := opts.Layout.check(); err != nil {
		return DecodeProblem{}, err
	}
	round, err := stateRounding(opts.StateDtype)
	if err != nil {
		return DecodeProblem{}, err
	}
	poolLen, ok := mul(numSlots, s.Hv, D, D)
	if !ok {
		return DecodeProblem{}, fmt.Errorf("ref: opts.PoolSlots: %d slots of Hv = %d states: too large: %w", numSlots, s.Hv, ErrShape)
	}
	in, err := Recipe(s, seed, RecipeOptions{Dtype: opts.Dtype, Scale: opts.Scale})
	if err != nil {
		return DecodeProblem{}, err
	}
	rng := func(stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }
	p := DecodeProblem{Options: PoolOptions{Layout: opts.Layout, StateDtype: opts.StateDtype}}
	full := &p.Options.Full

	dt := opts.Dtype
	if dt == dtype.Invalid {
		dt = dtype.BF16
	}
	if opts.L2Norm {
		// Recipe's q and k streams, the rows left unnormalised.
		if in.Q, err = Quantize(dt, normals(rng(streamQ), s.QKLen())); err != nil {
			return DecodeProblem{}, err
		}
		if in.K, err = Quantize(dt, normals(rng(streamK), s.QKLen())); err != nil {
			return DecodeProblem{}, err
		}
		full.L2Norm = true
	}
	if opts.GateInKernel {
		in.G = QuantizeF32(normals(rng(streamG), s.GateLen()))
		full.ALog, full.DtBias = make([]float64, s.Hv), make([]float64, s.Hv)
		r := rng(streamGateParams)
		for h := range s.Hv {
			full.ALog[h] = float64(float32(math.Log(1 + 15*r.Float64())))
			dtv := math.Exp(math.Log(1e-3) + r.Float64()*math.Log(100))
			full.DtBias[h] = float64(float32(dtv + math.Log(-math.Expm1(-dtv)))) // softplus(dt_bias) = dt
		}
	}
	if opts.BetaLogits {
		in.Beta = QuantizeF32(normals(rng(streamBeta), s.GateLen()))
		full.BetaLogits, full.NegEigval = true, opts.NegEigval
	}
	p.Inputs = in

	p.Pool = normals(rng(streamPool), poolLen)
	if round != nil {
		round(p.Pool)
	} else {
		p.Pool = QuantizeF32(p.Pool)
	}
	// The layout of N(0,1) draws changes nothing of their distribution, but
	// a pool drawn as [K,V] and stored as [V,K] holds the same states in
	// both layouts: a test can compare the two calls.
	if p.Pool, err = ConvertStates(p.Pool, LayoutKV, opts.Layout); err != nil {
		return DecodeProblem{}, err
	}

	perm := rng(streamSlots).Perm(numSlots)
	p.Slots = make([]int, n)
	for i := range p.Slots {
		p.Slots[i] = perm[i]
		if opts.FreshEvery > 0 && i%opts.FreshEvery == opts.FreshEvery-1 {
			p.Slots[i] = -1
		}
	}
	return p, nil
}
