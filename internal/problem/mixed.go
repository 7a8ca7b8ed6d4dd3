package problem

import "github.com/gdnjit/gdn/internal/gdnerr"

// A mixed call (docs/SPEC.md, "Mixed batches") packs prompt chunks and
// decode sequences on one token axis, with one cu_seqlens and one slot
// table. It runs as runs: maximal stretches of consecutive sequences of
// one kind, the sequences of 1 to MaxDecodeTokens tokens through the
// decode kernel, the others (empty ones included: they write their slot
// back unchanged) through the full forward. A run is a call of its own on
// the same tensors, its cu_seqlens and slot table the run's stretch of the
// caller's (SeqRun). A scheduler that packs its decode sequences together
// (as serving schedulers do) gets one run of each kind.

// Run is one stretch of a mixed call's sequences: [N0, N1), all decoded
// or all prefilled; Rows0 is the first checkpoint row of its sequences
// (the prefill runs before it keep rows 0 to Rows0 - 1).
type Run struct {
	Decode bool
	N0, N1 int
	Rows0  int
}

// IsDecode says whether a mixed call's sequence of l tokens is decoded.
func IsDecode(l int) bool { return l >= 1 && l <= MaxDecodeTokens }

// ValidateMixed checks a mixed call: a full forward's arguments (every
// rule of ValidateFull) from a pool. It returns the call's problem.
func ValidateMixed(a *Full) (Problem, error) {
	if a == nil {
		return Problem{}, gdnerr.Argf("args", "nil *FullArgs")
	}
	if !a.Pool.Given() {
		return Problem{}, gdnerr.Argf("pool", "missing: a mixed call runs from a state pool (its decode sequences always do)")
	}
	if a.SeqRun {
		return Problem{}, gdnerr.Argf("args", "a run of a mixed call is not a mixed call")
	}
	return ValidateFull(a)
}

// Runs calls f with each run of p's sequences in order (p validated by
// ValidateMixed; every is its checkpoint interval, 0 for none), and stops
// at f's first error. It allocates nothing.
func Runs(p Problem, every int, f func(Run) error) error {
	r := Run{}
	rows := 0
	for n := 0; n < p.N; n++ {
		b, e := p.SeqBounds(n)
		d := IsDecode(e - b)
		if n > 0 && d != r.Decode {
			r.N1 = n
			if err := f(r); err != nil {
				return err
			}
			r = Run{N0: n, Rows0: rows}
		}
		r.Decode = d
		if every > 0 && !d {
			rows += (e - b) / every
		}
	}
	r.N1 = p.N
	return f(r)
}
