package headcheck

import (
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/ref"
)

// The reference of a key head's slice is exactly that key head's part of
// the whole batch's reference, h0 included, so a result equal to the
// whole reference compares with no error at all.
func TestSliceIsExact(t *testing.T) {
	s := ref.Shape{B: 1, T: 150, Hq: 3, Hv: 6, CuSeqlens: []int{0, 70, 70, 150}}
	in, err := ref.Recipe(s, 5, ref.RecipeOptions{WithH0: true})
	if err != nil {
		t.Fatal(err)
	}
	o, ht, err := ref.Recurrent(in)
	if err != nil {
		t.Fatal(err)
	}
	whole := &gdn.HostCoreResult{O: ref.Float32s(o), Ht: ref.Float32s(ht)}
	heads := []int{0, 2}
	eo, eht, err := Compare(s, whole, heads, func(kh int) ([]float64, []float64, error) {
		return ref.Recurrent(Inputs(in, kh))
	})
	if err != nil {
		t.Fatal(err)
	}
	// The only difference is whole's rounding to float32.
	if eo.MaxAbs > 1e-6 || eht.MaxAbs > 1e-5 || eo.NaN+eo.Missing+eht.NaN+eht.Missing > 0 {
		t.Errorf("o %v, ht %v against the whole batch's reference", eo, eht)
	}
	if err := Report(eo, eht); err != nil {
		t.Error(err)
	}
	if got := ValueHeads(s, heads); got != "0-1, 4-5" {
		t.Errorf("ValueHeads = %q", got)
	}
}
