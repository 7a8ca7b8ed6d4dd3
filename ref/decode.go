package ref

import "fmt"

// MaxDecodeTokens is the most tokens one sequence may bring to a decode
// call: one, or a few for speculative or multi-token-prediction
// verification (docs/SPEC.md, "Decode").
const MaxDecodeTokens = 8

// Decode computes a decode call in float64: every sequence of in brings 1
// to MaxDecodeTokens tokens (B sequences of T tokens, or packed with
// cu_seqlens), continues from its slot of pool and writes its final state
// back there, through the same recurrence as PoolRecurrent, with the same
// options (the full forward's in-kernel steps, the layout, the pool's
// dtype, the per-token states) but for checkpoints, which a decode call
// has none of.
func Decode(in Inputs, pool []float64, slots []int, opts PoolOptions) (PoolResult, error) {
	if err := CheckDecodeShape(in.Shape); err != nil {
		return PoolResult{}, err
	}
	if opts.CheckpointEvery != 0 {
		return PoolResult{}, fmt.Errorf("ref: checkpoint_every: a decode call keeps no checkpoints (at most %d tokens a sequence), got %d: %w", MaxDecodeTokens, opts.CheckpointEvery, ErrShape)
	}
	return PoolRecurrent(in, pool, slots, opts)
}

// CheckDecodeShape reports a shape that is not a decode call's: invalid,
// or a sequence of no tokens or of more than MaxDecodeTokens.
func CheckDecodeShape(s Shape) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.CuSeqlens == nil {
		if s.T > MaxDecodeTokens {
			return fmt.Errorf("ref: T: a decode call takes 1 to %d tokens a sequence, got %d: %w", MaxDecodeTokens, s.T, ErrShape)
		}
		return nil
	}
	for n, se := range s.Seqs() {
		if l := se[1] - se[0]; l < 1 || l > MaxDecodeTokens {
			return fmt.Errorf("ref: cu_seqlens: sequence %d has %d tokens; a decode call takes 1 to %d a sequence: %w", n, l, MaxDecodeTokens, ErrShape)
		}
	}
	return nil
}
