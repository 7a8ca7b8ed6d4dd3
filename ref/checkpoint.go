package ref

import "fmt"

// Checkpoints are the states a prefill keeps on the way, for prefix
// caching (docs/SPEC.md, "Checkpoints"): with interval every (a positive
// multiple of C, so each falls on a chunk boundary), the state of sequence
// n after every `every` of its tokens in the call. They are packed over the
// sequences in order, into [starts[N], Hv, 128, 128]: checkpoint j of
// sequence n (the state after (j+1)*every of its tokens) is row
// starts[n] + j, for j < floor(len_n / every). A sequence whose length is
// a multiple of every has its final state as its last checkpoint too.

// CheckpointStarts returns the N+1 offsets of the checkpoint rows of s at
// interval every: sequence n's checkpoints are rows starts[n] to
// starts[n+1]-1, and starts[N] is the number of rows.
func CheckpointStarts(s Shape, every int) ([]int, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := checkEvery(every); err != nil {
		return nil, err
	}
	seqs := s.Seqs()
	starts := make([]int, len(seqs)+1)
	for n, se := range seqs {
		starts[n+1] = starts[n] + (se[1]-se[0])/every
	}
	return starts, nil
}

// Checkpoints returns the checkpoints of the recurrence over in (Recurrent's
// inputs, h0 and all) at interval every, [K,V], in the rows of
// CheckpointStarts. Each is, bit for bit, the final state of Recurrent over
// the same prefix of its sequence alone.
func Checkpoints(in Inputs, every int) ([]float64, error) {
	if err := in.Check(); err != nil {
		return nil, err
	}
	starts, err := CheckpointStarts(in.Shape, every)
	if err != nil {
		return nil, err
	}
	ck, visit, err := checkpointVisitor(in.Shape, starts, every, LayoutKV, nil)
	if err != nil {
		return nil, err
	}
	recur(in, visit)
	return ck, nil
}

// checkEvery reports an interval that is not a positive multiple of C.
func checkEvery(every int) error {
	if every < C || every%C != 0 {
		return fmt.Errorf("ref: checkpoint_every: want a positive multiple of %d (a chunk boundary), got %d: %w", C, every, ErrShape)
	}
	return nil
}

// checkpointVisitor allocates the checkpoint rows of starts and returns
// them with the visitor that fills them, in layout l, each state passed
// through round (nil: kept as is) as it is stored.
func checkpointVisitor(s Shape, starts []int, every int, l StateLayout, round func([]float64)) ([]float64, stateVisitor, error) {
	rows := starts[len(starts)-1]
	size, ok := mul(rows, s.Hv, D, D)
	if !ok {
		return nil, nil, fmt.Errorf("ref: checkpoints: %d rows of Hv = %d states: too large: %w", rows, s.Hv, ErrShape)
	}
	ck := make([]float64, size)
	visit := func(n, h, i int, S []float64) {
		if (i+1)%every != 0 {
			return
		}
		row := starts[n] + (i+1)/every - 1
		dst := ck[(row*s.Hv+h)*D*D:][:D*D]
		copyState(dst, S, l)
		if round != nil {
			round(dst)
		}
	}
	return ck, visit, nil
}
