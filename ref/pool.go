package ref

import (
	"fmt"

	"github.com/gdnjit/gdn/dtype"
)

// A state pool (docs/SPEC.md, "State pool") holds S states per value head,
// [S, Hv, 128, 128], in a serving engine's cache. A call's slot table
// gives each sequence n its slot: the sequence starts from pool[slots[n]]
// and its final state is written back there; a negative slot starts from
// zero and writes nothing. Slots the table does not name keep their bits.

// PoolOptions are the choices of a pooled call beyond its inputs.
type PoolOptions struct {
	// Layout is the layout of the pool, the checkpoints and the per-token
	// states.
	Layout StateLayout
	// StateDtype is the pool's element type: FP32 (also the zero value,
	// dtype.Invalid) or BF16. With BF16 each state the call writes (pool
	// slots, checkpoints, per-token states) is rounded to bf16, to nearest
	// even, once, as it is written; the recurrence runs on unrounded
	// states and reads the pool's values as they are.
	StateDtype dtype.Dtype
	// Full holds the full forward's in-kernel steps (L2 norm, the gate
	// from A_log and dt_bias, beta from logits); the zero value takes q,
	// k, the per-token log-gate g and beta as given.
	Full FullOptions
	// CheckpointEvery, when not 0, asks for checkpoints at this interval
	// (a positive multiple of C; checkpoint.go).
	CheckpointEvery int
	// TokenStates asks for the state after every token: the states a
	// decode call keeps for rolling back speculative tokens (the reference
	// computes them for any call).
	TokenStates bool
}

// PoolResult is what a pooled call produces. Every slice is new: the
// call's arguments are never written.
type PoolResult struct {
	// O is [B, T, Hv, 128].
	O []float64
	// Pool is the pool after the call: each named slot holds its
	// sequence's final state; every other value is the input pool's.
	Pool []float64
	// Checkpoints are the rows of CheckpointStarts at CheckpointEvery,
	// [rows, Hv, 128, 128] in Layout; nil without CheckpointEvery.
	Checkpoints []float64
	// TokenStates is [B*T, Hv, 128, 128] in Layout: row t holds the state
	// after token t of the flattened token axis (the rows of O); nil
	// without PoolOptions.TokenStates. A sequence's last row is its final
	// state.
	TokenStates []float64
}

// PoolRecurrent computes a pooled call in float64: the in-kernel steps of
// opts.Full, then Recurrent with each sequence's h0 taken from its slot of
// pool ([S, Hv, 128, 128] in opts.Layout; S = len(pool) / (Hv*128*128))
// and its final state stored back. slots has one entry per sequence:
// a slot in [0, S), or a negative number (start from zero, write
// nothing); the slots that are written must be distinct. in.H0 must be
// nil: the pool replaces it.
func PoolRecurrent(in Inputs, pool []float64, slots []int, opts PoolOptions) (PoolResult, error) {
	if err := opts.Layout.check(); err != nil {
		return PoolResult{}, err
	}
	round, err := stateRounding(opts.StateDtype)
	if err != nil {
		return PoolResult{}, err
	}
	if in.H0 != nil {
		return PoolResult{}, fmt.Errorf("ref: h0: a pooled call starts from its slots: want nil, got %d values: %w", len(in.H0), ErrShape)
	}
	if in, err = opts.Full.prepare(in); err != nil {
		return PoolResult{}, err
	}
	s := in.Shape
	if err := checkSlots(s, len(pool), slots); err != nil {
		return PoolResult{}, err
	}
	var visitors []stateVisitor
	var res PoolResult
	if opts.CheckpointEvery != 0 {
		starts, err := CheckpointStarts(s, opts.CheckpointEvery)
		if err != nil {
			return PoolResult{}, err
		}
		ck, visit, err := checkpointVisitor(s, starts, opts.CheckpointEvery, opts.Layout, round)
		if err != nil {
			return PoolResult{}, err
		}
		res.Checkpoints = ck
		visitors = append(visitors, visit)
	}
	if opts.TokenStates {
		size, ok := mul(s.Tokens(), s.Hv, D, D)
		if !ok {
			return PoolResult{}, fmt.Errorf("ref: token_states: %d tokens of Hv = %d states: too large: %w", s.Tokens(), s.Hv, ErrShape)
		}
		res.TokenStates = make([]float64, size)
		seqs := s.Seqs()
		visitors = append(visitors, func(n, h, i int, S []float64) {
			dst := res.TokenStates[((seqs[n][0]+i)*s.Hv+h)*D*D:][:D*D]
			copyState(dst, S, opts.Layout)
			if round != nil {
				round(dst)
			}
		})
	}

	// Gather each sequence's start state from its slot, as [K,V].
	in.H0 = make([]float64, s.StateLen())
	for n, slot := range slots {
		if slot < 0 {
			continue
		}
		for h := range s.Hv {
			copyState(in.H0[(n*s.Hv+h)*D*D:][:D*D], pool[(slot*s.Hv+h)*D*D:][:D*D], opts.Layout)
		}
	}
	var visit stateVisitor
	if len(visitors) > 0 {
		visit = func(n, h, i int, S []float64) {
			for _, v := range visitors {
				v(n, h, i, S)
			}
		}
	}
	var ht []float64
	res.O, ht = recur(in, visit)

	res.Pool = append([]float64(nil), pool...)
	for n, slot := range slots {
		if slot < 0 {
			continue
		}
		for h := range s.Hv {
			dst := res.Pool[(slot*s.Hv+h)*D*D:][:D*D]
			copyState(dst, ht[(n*s.Hv+h)*D*D:][:D*D], opts.Layout)
			if round != nil {
				round(dst)
			}
		}
	}
	return res, nil
}

// checkSlots checks a pool of poolLen values and the slot table of the
// sequences of s (a valid shape): one or more whole slots of [Hv, 128,
// 128], one slot entry per sequence, each below the pool's slot count, and
// no slot written by two sequences (their writes would race on the device).
func checkSlots(s Shape, poolLen int, slots []int) error {
	per := s.Hv * D * D
	if poolLen == 0 || poolLen%per != 0 {
		return fmt.Errorf("ref: pool: %d values, not one or more whole [Hv=%d, 128, 128] slots: %w", poolLen, s.Hv, ErrShape)
	}
	numSlots := poolLen / per
	if len(slots) != s.N() {
		return fmt.Errorf("ref: slots: want one entry per sequence, N = %d, got %d: %w", s.N(), len(slots), ErrShape)
	}
	writer := make(map[int]int, len(slots))
	for n, slot := range slots {
		if slot < 0 {
			continue
		}
		if slot >= numSlots {
			return fmt.Errorf("ref: slots: slots[%d] = %d, outside the pool's %d slots (a negative slot starts from zero): %w", n, slot, numSlots, ErrShape)
		}
		if m, ok := writer[slot]; ok {
			return fmt.Errorf("ref: slots: sequences %d and %d both write slot %d (two writers of one slot race): %w", m, n, slot, ErrShape)
		}
		writer[slot] = n
	}
	return nil
}

// stateRounding returns how a written state of dtype d is rounded: nil for
// FP32 (kept in float64, as the other outputs of this package are), bf16
// to nearest even for BF16.
func stateRounding(d dtype.Dtype) (func([]float64), error) {
	switch d {
	case dtype.Invalid, dtype.FP32:
		return nil, nil
	case dtype.BF16:
		return func(x []float64) { copy(x, QuantizeBF16(x)) }, nil
	}
	return nil, fmt.Errorf("ref: pool dtype: want fp32 or bf16, got %v: %w", d, ErrShape)
}
