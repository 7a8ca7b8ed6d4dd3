package ref

import (
	"errors"
	"testing"
)

// Entry (k, v) of a [K,V] state is entry (v, k) of its transpose, which
// StateLayout.Index of LayoutVK finds; transposing twice gives the bits
// back, and ConvertStates between equal layouts is a copy.
func TestTransposeStates(t *testing.T) {
	x := make([]float64, 2*D*D)
	for i := range x {
		x[i] = float64(i) + 0.25
	}
	y, err := TransposeStates(x)
	if err != nil {
		t.Fatal(err)
	}
	for st := range 2 {
		for _, kv := range [][2]int{{0, 1}, {1, 0}, {5, 77}, {127, 3}, {64, 64}} {
			k, v := kv[0], kv[1]
			want := x[st*D*D+LayoutKV.Index(k, v)]
			if got := y[st*D*D+LayoutVK.Index(k, v)]; got != want {
				t.Errorf("state %d (k=%d, v=%d): %v in [V,K], %v in [K,V]", st, k, v, got, want)
			}
		}
	}
	if LayoutVK.Index(5, 77) != 77*D+5 || LayoutKV.Index(5, 77) != 5*D+77 {
		t.Error("Index does not follow docs/SPEC.md")
	}
	back, err := ConvertStates(y, LayoutVK, LayoutKV)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(back, x); i >= 0 {
		t.Errorf("transposing twice changed value %d", i)
	}
	same, err := ConvertStates(x, LayoutVK, LayoutVK)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(same, x); i >= 0 || &same[0] == &x[0] {
		t.Errorf("a conversion between equal layouts is not a copy (diff at %d)", i)
	}
	if x[1] != 1.25 {
		t.Error("the argument was written")
	}
}

func TestStateLayoutBadInput(t *testing.T) {
	if _, err := TransposeStates(make([]float64, D*D+1)); !errors.Is(err, ErrShape) {
		t.Errorf("a partial state: %v", err)
	}
	if _, err := ConvertStates(make([]float64, D), LayoutKV, LayoutKV); !errors.Is(err, ErrShape) {
		t.Errorf("a partial state, same layouts: %v", err)
	}
	if _, err := ConvertStates(make([]float64, D*D), LayoutKV, StateLayout(2)); !errors.Is(err, ErrShape) {
		t.Errorf("layout 2: %v", err)
	}
	if s := StateLayout(2).String(); s != "StateLayout(2)" {
		t.Errorf("layout 2 prints as %q", s)
	}
}
