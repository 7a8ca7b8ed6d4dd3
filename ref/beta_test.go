package ref

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestBetaFromLogits(t *testing.T) {
	b := []float64{0, 2, -3, 40, -800}
	got := BetaFromLogits(b, false)
	got2 := BetaFromLogits(b, true)
	for i, x := range b {
		want := 1 / (1 + math.Exp(-x))
		if math.Abs(got[i]-want) > 1e-15 {
			t.Errorf("sigmoid(%v) = %v, want %v", x, got[i], want)
		}
		if got2[i] != 2*got[i] {
			t.Errorf("2 sigmoid(%v) = %v, want twice %v", x, got2[i], got[i])
		}
		if got[i] < 0 || got[i] > 1 || got2[i] > 2 {
			t.Errorf("beta(%v) = %v, %v: out of (0, 1), (0, 2)", x, got[i], got2[i])
		}
	}
	if got[0] != 0.5 || got2[0] != 1 {
		t.Errorf("b = 0 gives %v and %v, want 1/2 and 1", got[0], got2[0])
	}
}

// Beta given as logits gives the results of beta given as sigmoid(b) (or
// 2 sigmoid(b)), to the bit, in the full forward and in a pooled call.
func TestBetaLogitsAgreeWithBeta(t *testing.T) {
	s, err := PackedShape(1, 2, 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	logits, err := Recipe(s, 51, RecipeOptions{WithH0: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range logits.Beta { // logits of either sign
		logits.Beta[i] = 4*logits.Beta[i] - 2
	}
	pool := testPool(t, 2, 2, 52, LayoutKV)
	for _, neg := range []bool{false, true} {
		explicit := logits
		explicit.Beta = BetaFromLogits(logits.Beta, neg)
		o, ht, err := Full(logits, FullOptions{BetaLogits: true, NegEigval: neg})
		if err != nil {
			t.Fatal(err)
		}
		wo, wht, err := Recurrent(explicit)
		if err != nil {
			t.Fatal(err)
		}
		if i := max(firstDiff(o, wo), firstDiff(ht, wht)); i >= 0 {
			t.Errorf("neg_eigval %v: Full with beta logits differs from explicit beta at %d", neg, i)
		}
		pooledLogits, pooledExplicit := logits, explicit
		pooledLogits.H0, pooledExplicit.H0 = nil, nil
		got, err := PoolRecurrent(pooledLogits, pool, []int{1, 0}, PoolOptions{Full: FullOptions{BetaLogits: true, NegEigval: neg}})
		if err != nil {
			t.Fatal(err)
		}
		want, err := PoolRecurrent(pooledExplicit, pool, []int{1, 0}, PoolOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i := max(firstDiff(got.O, want.O), firstDiff(got.Pool, want.Pool)); i >= 0 {
			t.Errorf("neg_eigval %v: pooled call with beta logits differs from explicit beta at %d", neg, i)
		}
	}
	// Negative eigenvalues change the result (beta above 1 is used).
	o1, _, _ := Full(logits, FullOptions{BetaLogits: true})
	o2, _, _ := Full(logits, FullOptions{BetaLogits: true, NegEigval: true})
	if firstDiff(o1, o2) < 0 {
		t.Error("neg_eigval changed nothing")
	}
	_, _, err = Full(logits, FullOptions{NegEigval: true})
	if !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), "neg_eigval") {
		t.Errorf("neg_eigval without beta logits: %v", err)
	}
}
