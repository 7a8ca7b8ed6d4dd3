// Package ref is the float64 reference for Gated DeltaNet: chunked
// prefill, and the serving layer's pooled calls and decode.
//
// It holds the ground truth every GPU kernel of the project is checked
// against (docs/SPEC.md): the token-by-token recurrence, the chunked form
// split into its three steps (chunk-local cumsum of the gates, the 64x64
// triangular solve A, and the chunked forward given both), bf16/fp16
// rounding, the seeded input recipe, the accuracy pass line and the
// benchmark suite; and for the serving layer, the same recurrence over a
// state pool with a slot table (PoolRecurrent), decode calls of 1 to 8
// tokens a sequence (Decode, DecodeRecipe), checkpoints every multiple of
// 64 tokens (Checkpoints), the [K,V] and [V,K] state layouts and beta from
// logits. Everything is pure Go on the CPU, so it builds and tests on
// machines without a GPU.
//
// Tensors are flat []float64 slices in the row-major layouts of docs/SPEC.md:
//
//	q, k    [B, T, Hq, 128]
//	v, o    [B, T, Hv, 128]
//	g, beta [B, T, Hv]
//	A       [B, T, Hv, 64]
//	h0, ht  [N, Hv, 128, 128]   index [n, h, k, v]
//	pool    [S, Hv, 128, 128]   index [slot, h, k, v], or [slot, h, v, k] (LayoutVK)
//
// Functions return errors wrapping ErrShape (test with errors.Is) for bad
// shapes or slice lengths; they never panic on bad input.
package ref

import (
	"errors"
	"fmt"
	"math"
)

// D is the head dimension of queries, keys and values (K = V = 128).
const D = 128

// C is the chunk length of the chunked form.
const C = 64

// ErrShape is wrapped by every error about bad input: a bad shape,
// cu_seqlens, slice length or argument value. The wrapping message names the
// argument and what was expected.
var ErrShape = errors.New("bad shape")

// Shape describes one batch: B sequences of T tokens each, or (B = 1 with
// CuSeqlens) N packed sequences of variable length sharing the token axis.
// Hq is the number of query/key heads and Hv the number of value heads, a
// multiple of Hq. The head dimension is always D.
type Shape struct {
	B, T, Hq, Hv int
	// CuSeqlens, when non-nil, holds N+1 cumulative sequence offsets into
	// the B*T token axis: sequence n is tokens CuSeqlens[n]..CuSeqlens[n+1].
	CuSeqlens []int
}

// Validate reports whether s is a legal shape: B, T, Hq >= 1, Hv a positive
// multiple of Hq, and CuSeqlens (if non-nil) with B = 1, at least two
// entries, starting at 0, non-decreasing and ending at B*T.
func (s Shape) Validate() error {
	switch {
	case s.B < 1:
		return fmt.Errorf("ref: B: want >= 1, got %d: %w", s.B, ErrShape)
	case s.T < 1:
		return fmt.Errorf("ref: T: want >= 1, got %d: %w", s.T, ErrShape)
	case s.Hq < 1:
		return fmt.Errorf("ref: Hq: want >= 1, got %d: %w", s.Hq, ErrShape)
	case s.Hv < 1 || s.Hv%s.Hq != 0:
		return fmt.Errorf("ref: Hv: want a positive multiple of Hq=%d, got %d: %w", s.Hq, s.Hv, ErrShape)
	}
	// Every tensor's element count must fit in an int, so that the size
	// helpers and all index arithmetic stay free of overflow.
	tokens, ok := mul(s.B, s.T)
	if !ok {
		return fmt.Errorf("ref: B*T: %d*%d too large: %w", s.B, s.T, ErrShape)
	}
	if _, ok := mul(tokens, max(s.Hq, s.Hv), D); !ok {
		return fmt.Errorf("ref: B*T*max(Hq,Hv)*%d: too large for B=%d T=%d Hq=%d Hv=%d: %w", D, s.B, s.T, s.Hq, s.Hv, ErrShape)
	}
	if s.CuSeqlens == nil {
		if _, ok := mul(s.B, s.Hv, D, D); !ok {
			return fmt.Errorf("ref: state [B,Hv,%d,%d]: too large for B=%d Hv=%d: %w", D, D, s.B, s.Hv, ErrShape)
		}
		return nil
	}
	cu := s.CuSeqlens
	switch {
	case s.B != 1:
		return fmt.Errorf("ref: cu_seqlens: requires B = 1, got B=%d: %w", s.B, ErrShape)
	case len(cu) < 2:
		return fmt.Errorf("ref: cu_seqlens: want at least 2 entries, got %d: %w", len(cu), ErrShape)
	case cu[0] != 0:
		return fmt.Errorf("ref: cu_seqlens: want cu_seqlens[0] = 0, got %d: %w", cu[0], ErrShape)
	}
	for i := 1; i < len(cu); i++ {
		if cu[i] < cu[i-1] {
			return fmt.Errorf("ref: cu_seqlens: decreasing at index %d (%d after %d): %w", i, cu[i], cu[i-1], ErrShape)
		}
	}
	if last := cu[len(cu)-1]; last != tokens {
		return fmt.Errorf("ref: cu_seqlens: want last entry = B*T = %d, got %d: %w", tokens, last, ErrShape)
	}
	if _, ok := mul(len(cu)-1, s.Hv, D, D); !ok {
		return fmt.Errorf("ref: state [N,Hv,%d,%d]: too large for N=%d Hv=%d: %w", D, D, len(cu)-1, s.Hv, ErrShape)
	}
	return nil
}

// mul multiplies non-negative ints and reports false on overflow.
func mul(xs ...int) (int, bool) {
	p := 1
	for _, x := range xs {
		if x < 0 {
			return 0, false
		}
		if x != 0 && p > math.MaxInt/x {
			return 0, false
		}
		p *= x
	}
	return p, true
}

// N returns the number of sequences: len(CuSeqlens)-1 with CuSeqlens, B
// without. It is 0 for a CuSeqlens with fewer than two entries.
func (s Shape) N() int {
	if s.CuSeqlens != nil {
		return max(len(s.CuSeqlens)-1, 0)
	}
	return max(s.B, 0)
}

// Seqs returns each sequence's [start, end) token range in the flattened
// B*T token axis. Empty sequences (start == end) are kept, so Seqs()[n]
// belongs to state n of h0 and ht.
func (s Shape) Seqs() [][2]int {
	seqs := make([][2]int, s.N())
	for n := range seqs {
		if s.CuSeqlens != nil {
			seqs[n] = [2]int{s.CuSeqlens[n], s.CuSeqlens[n+1]}
		} else {
			seqs[n] = [2]int{n * s.T, (n + 1) * s.T}
		}
	}
	return seqs
}

// G returns Hv/Hq, the number of consecutive value heads sharing one
// query/key head (0 when Hq < 1).
func (s Shape) G() int {
	if s.Hq < 1 {
		return 0
	}
	return s.Hv / s.Hq
}

// Tokens returns B*T, the length of the flattened token axis.
func (s Shape) Tokens() int { return s.B * s.T }

// NumChunks returns the total number of chunks: the sum over sequences of
// ceil(len/C). Empty sequences have no chunk.
func (s Shape) NumChunks() int {
	total := 0
	for _, se := range s.Seqs() {
		total += (se[1] - se[0] + C - 1) / C
	}
	return total
}

// QKLen returns the element count of q or k: B*T*Hq*D.
func (s Shape) QKLen() int { return s.Tokens() * s.Hq * D }

// VLen returns the element count of v or o: B*T*Hv*D.
func (s Shape) VLen() int { return s.Tokens() * s.Hv * D }

// GateLen returns the element count of g, g_cumsum or beta: B*T*Hv.
func (s Shape) GateLen() int { return s.Tokens() * s.Hv }

// ALen returns the element count of A: B*T*Hv*C.
func (s Shape) ALen() int { return s.Tokens() * s.Hv * C }

// StateLen returns the element count of h0 or ht: N*Hv*D*D.
func (s Shape) StateLen() int { return s.N() * s.Hv * D * D }

// checkLen reports a slice of the wrong length as an error naming it.
func checkLen(name string, got, want int, layout string) error {
	if got != want {
		return fmt.Errorf("ref: %s: want %s = %d elements, got %d: %w", name, layout, want, got, ErrShape)
	}
	return nil
}

// PackedShape returns the shape of sequences of the given lengths packed
// on one token axis: B = 1, T their sum, CuSeqlens their offsets (kept
// even for one sequence), Hq and Hv as given. It validates the result.
func PackedShape(hq, hv int, lens ...int) (Shape, error) {
	s := Shape{B: 1, Hq: hq, Hv: hv, CuSeqlens: make([]int, 1, len(lens)+1)}
	for n, l := range lens {
		if l < 0 || l > math.MaxInt-s.T {
			return Shape{}, fmt.Errorf("ref: lens: sequence %d has %d tokens: want 0 or more, %d in all at most: %w", n, l, math.MaxInt, ErrShape)
		}
		s.T += l
		s.CuSeqlens = append(s.CuSeqlens, s.T)
	}
	return s, s.Validate()
}
