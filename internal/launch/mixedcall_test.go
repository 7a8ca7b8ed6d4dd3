package launch

import (
	"reflect"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/problem"
)

// A run's arguments are its stretch of the caller's boundaries, slot table
// and checkpoint rows, on the caller's tensors.
func TestRunOf(t *testing.T) {
	cu := []int{0, 200, 203, 212, 342, 343, 407}
	a := problem.Full{
		CuSeqlens:       cu,
		CuSeqlensDevice: problem.Tensor{Ptr: 0x1000, Bytes: 7 * 8, Dtype: dtype.Int64, Shape: []int{7}},
		Pool: problem.Pool{Slots: []int{5, 4, 3, 2, 1, 0},
			SlotsDevice: problem.Tensor{Ptr: 0x2000, Bytes: 24, Dtype: dtype.Int32, Shape: []int{6}}},
		CheckpointEvery: 64,
		Checkpoints:     problem.Tensor{Ptr: 0x10000, Bytes: 6 * 2 * 65536, Dtype: dtype.FP32, Shape: []int{6, 2, 128, 128}},
	}
	p := problem.Problem{B: 1, T: 407, Hv: 2, N: 6, Seqs: cu}
	var runs []problem.Full
	if err := problem.Runs(p, 64, func(r problem.Run) error { runs = append(runs, runOf(&a, p, r)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 5 {
		t.Fatalf("%d runs, want 5", len(runs))
	}
	r := runs[2] // sequences 2 and 3: 9 and 130 tokens, prefilled; rows 3 and 4
	if !r.SeqRun || !reflect.DeepEqual(r.CuSeqlens, []int{203, 212, 342}) || !reflect.DeepEqual(r.Pool.Slots, []int{3, 2}) {
		t.Errorf("run 2: seq run %v, cu %v, slots %v", r.SeqRun, r.CuSeqlens, r.Pool.Slots)
	}
	if d := r.CuSeqlensDevice; d.Ptr != 0x1000+2*8 || d.Bytes != 5*8 || !reflect.DeepEqual(d.Shape, []int{3}) {
		t.Errorf("run 2's device cu_seqlens %+v", d)
	}
	if d := r.Pool.SlotsDevice; d.Ptr != 0x2000+2*4 || d.Bytes != 16 || !reflect.DeepEqual(d.Shape, []int{2}) {
		t.Errorf("run 2's device slots %+v", d)
	}
	if c := r.Checkpoints; c.Ptr != 0x10000+3*2*65536 || c.Bytes != 3*2*65536 || !reflect.DeepEqual(c.Shape, []int{2, 2, 128, 128}) {
		t.Errorf("run 2's checkpoints %+v", c)
	}
	if d := runDecode(&runs[1]); !d.SeqRun || !reflect.DeepEqual(d.CuSeqlens, []int{200, 203}) || d.Pool.Slots[0] != 4 {
		t.Errorf("run 1 as a decode: %+v", d)
	}
	// A call of one run is the caller's own.
	whole := problem.Problem{B: 1, T: 3, Hv: 2, N: 2, Seqs: []int{0, 1, 3}}
	b := problem.Full{CuSeqlens: whole.Seqs}
	_ = problem.Runs(whole, 0, func(r problem.Run) error {
		if got := runOf(&b, whole, r); got.SeqRun {
			t.Errorf("one run: %+v", got)
		}
		return nil
	})
}
