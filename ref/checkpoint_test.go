package ref

import (
	"slices"
	"testing"
)

// checkpointShape packs sequences of 130, 0, 63, 128 and 64 tokens: two
// checkpoints and a tail, none, none (shorter than the interval), two with
// the last one the final state, one with the final state.
func checkpointShape(t *testing.T) Shape {
	t.Helper()
	s, err := PackedShape(1, 2, 130, 0, 63, 128, 64)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCheckpointStarts(t *testing.T) {
	s := checkpointShape(t)
	got, err := CheckpointStarts(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 2, 2, 2, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("starts at 64 = %v, want %v", got, want)
	}
	if got, _ = CheckpointStarts(s, 128); !slices.Equal(got, []int{0, 1, 1, 1, 2, 2}) {
		t.Errorf("starts at 128 = %v", got)
	}
	fixed, _ := CheckpointStarts(Shape{B: 3, T: 200, Hq: 1, Hv: 1}, 64)
	if !slices.Equal(fixed, []int{0, 3, 6, 9}) {
		t.Errorf("starts of B = 3, T = 200 = %v", fixed)
	}
}

// Checkpoint j of a sequence is, bit for bit, the final state of the
// recurrence over the sequence's first (j+1)*64 tokens alone; the last
// checkpoint of a sequence of a multiple of 64 tokens is its ht.
func TestCheckpointsArePrefixStates(t *testing.T) {
	s := checkpointShape(t)
	in, err := Recipe(s, 21, RecipeOptions{WithH0: true})
	if err != nil {
		t.Fatal(err)
	}
	const every = 64
	ck, err := Checkpoints(in, every)
	if err != nil {
		t.Fatal(err)
	}
	starts, _ := CheckpointStarts(s, every)
	if len(ck) != starts[len(starts)-1]*s.Hv*D*D {
		t.Fatalf("%d checkpoint values, want %d rows", len(ck), starts[len(starts)-1])
	}
	_, ht, err := Recurrent(in)
	if err != nil {
		t.Fatal(err)
	}
	per := s.Hv * D * D
	for n, se := range s.Seqs() {
		for j := range starts[n+1] - starts[n] {
			lo := se[0]
			_, want, err := Recurrent(span(in, lo, lo+(j+1)*every, in.H0[n*per:][:per]))
			if err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(ck[(starts[n]+j)*per:][:per], want); i >= 0 {
				t.Errorf("sequence %d checkpoint %d differs from its prefix's state at %d", n, j, i)
			}
		}
		if l := se[1] - se[0]; l > 0 && l%every == 0 {
			last := ck[(starts[n+1]-1)*per:][:per]
			if i := firstDiff(last, ht[n*per:][:per]); i >= 0 {
				t.Errorf("sequence %d (%d tokens): last checkpoint is not ht at %d", n, l, i)
			}
		}
	}
}

// A pooled call's checkpoints are the dense call's from the same start
// states, in the pool's layout.
func TestPoolCheckpoints(t *testing.T) {
	s := checkpointShape(t)
	in, err := Recipe(s, 22, RecipeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := testPool(t, 6, 2, 23, LayoutVK)
	slots := []int{5, -1, 0, 3, -1}
	res, err := PoolRecurrent(in, pool, slots, PoolOptions{Layout: LayoutVK, CheckpointEvery: 64})
	if err != nil {
		t.Fatal(err)
	}
	dense := in
	dense.H0 = make([]float64, s.StateLen())
	for n, slot := range slots {
		if slot >= 0 {
			copy(dense.H0[n*s.Hv*D*D:], slotStates(t, pool, s.Hv, slot, LayoutVK))
		}
	}
	want, err := Checkpoints(dense, 64)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ConvertStates(res.Checkpoints, LayoutVK, LayoutKV)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, want); i >= 0 {
		t.Errorf("pooled checkpoints differ from the dense call's at %d", i)
	}
}
