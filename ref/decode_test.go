package ref

import (
	"errors"
	"strings"
	"testing"
)

// pack returns the tokens of ranges of in's flat token axis packed as the
// sequences of a call of their own, in order: B sequences of T tokens where
// every range has the same length T, else packed with cu_seqlens.
func pack(in Inputs, ranges ...[2]int) Inputs {
	s := in.Shape
	out := Inputs{Scale: in.Scale}
	lens := make([]int, len(ranges))
	same := true
	for i, r := range ranges {
		lens[i] = r[1] - r[0]
		same = same && lens[i] == lens[0]
		out.Q = append(out.Q, in.Q[r[0]*s.Hq*D:r[1]*s.Hq*D]...)
		out.K = append(out.K, in.K[r[0]*s.Hq*D:r[1]*s.Hq*D]...)
		out.V = append(out.V, in.V[r[0]*s.Hv*D:r[1]*s.Hv*D]...)
		out.G = append(out.G, in.G[r[0]*s.Hv:r[1]*s.Hv]...)
		out.Beta = append(out.Beta, in.Beta[r[0]*s.Hv:r[1]*s.Hv]...)
	}
	if same {
		out.Shape = Shape{B: len(ranges), T: lens[0], Hq: s.Hq, Hv: s.Hv}
	} else {
		out.Shape, _ = PackedShape(s.Hq, s.Hv, lens...)
	}
	return out
}

// A decode call of 1 to 8 tokens a sequence is the full forward's
// recurrence over the same tokens from each sequence's slot, with every
// in-kernel step on (L2 norm, gate from A_log, beta logits with negative
// eigenvalues), and each per-token state the state of that prefix.
func TestDecodeMatchesFull(t *testing.T) {
	s, err := PackedShape(1, 2, 1, 3, 8, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []StateLayout{LayoutKV, LayoutVK} {
		t.Run(l.String(), func(t *testing.T) {
			p, err := DecodeRecipe(s, 31, DecodeRecipeOptions{PoolSlots: 6, FreshEvery: 3, Layout: l,
				L2Norm: true, GateInKernel: true, BetaLogits: true, NegEigval: true})
			if err != nil {
				t.Fatal(err)
			}
			p.Options.TokenStates = true
			res, err := Decode(p.Inputs, p.Pool, p.Slots, p.Options)
			if err != nil {
				t.Fatal(err)
			}
			per := s.Hv * D * D
			dense := p.Inputs
			dense.H0 = make([]float64, s.StateLen())
			for n, slot := range p.Slots {
				if slot >= 0 {
					copy(dense.H0[n*per:], slotStates(t, p.Pool, s.Hv, slot, l))
				}
			}
			wantO, wantHt, err := Full(dense, p.Options.Full)
			if err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(res.O, wantO); i >= 0 {
				t.Errorf("o differs from Full at %d", i)
			}
			states, err := ConvertStates(res.TokenStates, l, LayoutKV)
			if err != nil {
				t.Fatal(err)
			}
			for n, se := range s.Seqs() {
				slot := p.Slots[n]
				if slot >= 0 {
					if i := firstDiff(slotStates(t, res.Pool, s.Hv, slot, l), wantHt[n*per:][:per]); i >= 0 {
						t.Errorf("sequence %d: slot %d differs from Full's ht at %d", n, slot, i)
					}
				}
				for tok := se[0]; tok < se[1]; tok++ {
					_, want, err := Full(span(dense, se[0], tok+1, dense.H0[n*per:][:per]), p.Options.Full)
					if err != nil {
						t.Fatal(err)
					}
					if i := firstDiff(states[tok*per:][:per], want); i >= 0 {
						t.Errorf("token %d (sequence %d): its state differs from its prefix's at %d", tok, n, i)
					}
				}
			}
		})
	}
}

// A prefill from the pool, then decode calls step by step, leave the pool
// and give the outputs of the recurrence over the whole history in one
// call, to the bit.
func TestPrefillThenDecode(t *testing.T) {
	// Two sequences of 78 and 72 tokens: a prefill of 70 and 65, five
	// decode steps of one token, then a step of 3 and 2 tokens.
	hist, err := PackedShape(1, 2, 78, 72)
	if err != nil {
		t.Fatal(err)
	}
	in, err := Recipe(hist, 41, RecipeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range in.Q { // unnormalised, so that the L2 norm matters
		in.Q[i] *= 3
		in.K[i] *= 0.5
	}
	full := FullOptions{L2Norm: true, ALog: []float64{-0.5, 1}, DtBias: []float64{0.3, -1}, BetaLogits: true}
	const a, b = 0, 78 // where each sequence starts in the history
	calls := [][2][2]int{{{a, a + 70}, {b, b + 65}}}
	for st := range 5 {
		calls = append(calls, [2][2]int{{a + 70 + st, a + 71 + st}, {b + 65 + st, b + 66 + st}})
	}
	calls = append(calls, [2][2]int{{a + 75, a + 78}, {b + 70, b + 72}})

	for _, l := range []StateLayout{LayoutKV, LayoutVK} {
		t.Run(l.String(), func(t *testing.T) {
			pool := testPool(t, 3, 2, 42, l)
			slots := []int{2, 0}
			whole := in
			whole.H0 = append(slotStates(t, pool, 2, 2, l), slotStates(t, pool, 2, 0, l)...)
			wantO, wantHt, err := Full(whole, full)
			if err != nil {
				t.Fatal(err)
			}
			opts := PoolOptions{Layout: l, Full: full}
			for c, rs := range calls {
				call := pack(in, rs[0], rs[1])
				var res PoolResult
				if c == 0 {
					res, err = PoolRecurrent(call, pool, slots, opts)
				} else {
					res, err = Decode(call, pool, slots, opts)
				}
				if err != nil {
					t.Fatalf("call %d: %v", c, err)
				}
				rows := append(append([]float64(nil), wantO[rs[0][0]*2*D:rs[0][1]*2*D]...), wantO[rs[1][0]*2*D:rs[1][1]*2*D]...)
				if i := firstDiff(res.O, rows); i >= 0 {
					t.Fatalf("call %d: o differs from the whole history's at %d", c, i)
				}
				pool = res.Pool
			}
			for n, slot := range slots {
				if i := firstDiff(slotStates(t, pool, 2, slot, l), wantHt[n*2*D*D:][:2*D*D]); i >= 0 {
					t.Errorf("sequence %d: slot %d differs from the whole history's ht at %d", n, slot, i)
				}
			}
		})
	}
}

func TestCheckDecodeShape(t *testing.T) {
	ok := func(lens ...int) Shape {
		s, err := PackedShape(2, 4, lens...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		s    Shape
		want string // the argument the error names; "" for none
	}{
		{"T 1", Shape{B: 256, T: 1, Hq: 2, Hv: 4}, ""},
		{"T 8", Shape{B: 3, T: 8, Hq: 2, Hv: 4}, ""},
		{"T 9", Shape{B: 3, T: 9, Hq: 2, Hv: 4}, "T:"},
		{"varlen", ok(1, 8, 4), ""},
		{"varlen 9", ok(1, 9, 4), "cu_seqlens:"},
		{"varlen empty", ok(1, 0, 4), "cu_seqlens:"},
		{"bad shape", Shape{B: 1, T: 1, Hq: 2, Hv: 3}, "Hv:"},
	} {
		err := CheckDecodeShape(tc.s)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrShape) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an ErrShape naming %q", tc.name, err, tc.want)
		}
	}
}
