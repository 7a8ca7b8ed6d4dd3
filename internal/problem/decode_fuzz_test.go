package problem_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/problem/problemtest"
)

// FuzzValidateDecode holds problem.ValidateDecode to its contract for any
// Decode: nil or an *gdnerr.ArgError naming the argument, never a panic;
// and what it accepts is a decode call the kernel can run (every sequence
// of 1 to 8 tokens, slots in range and distinct, buffers large enough, the
// pool apart from every other tensor).
//
// The bytes are a program, as in FuzzValidateCore: three sizes build a
// valid call (problemtest.Decode), then each 10-byte step changes one
// field to a value from the bytes.
func FuzzValidateDecode(f *testing.F) {
	f.Add([]byte{3, 2, 1})
	f.Add([]byte{1, 7, 2, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 0, 1, 4, 1, 3, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) < 3 {
			return
		}
		hq := 1 + int(prog[2]%2)
		a := problemtest.Decode(1+int(prog[0]%4), 1+int(prog[1]%8), hq, 2*hq)
		for step := prog[3:]; len(step) >= 10; step = step[10:] {
			mutateDecode(a, step[0], step[1], int64(binary.LittleEndian.Uint64(step[2:10])))
		}
		d, err := problem.ValidateDecode(a)
		if err != nil {
			var ae *gdnerr.ArgError
			if !errors.As(err, &ae) || ae.Arg == "" || !errors.Is(err, gdnerr.ErrInvalidArgument) {
				t.Fatalf("error %v (%T) is not an *gdnerr.ArgError naming an argument", err, err)
			}
			return
		}
		for n := 0; n < d.N; n++ {
			if b, e := d.SeqBounds(n); e-b < 1 || e-b > problem.MaxDecodeTokens {
				t.Fatalf("accepted sequence %d of %d tokens", n, e-b)
			}
		}
		seen := map[int]bool{}
		for _, s := range a.Pool.Slots {
			if s >= d.Pool.S || (s >= 0 && seen[s]) {
				t.Fatalf("accepted slots %v for %d slots", a.Pool.Slots, d.Pool.S)
			}
			seen[s] = s >= 0
		}
		pool := [2]uintptr{a.Pool.States.Ptr, a.Pool.States.Ptr + uintptr(a.Pool.States.Elems()*a.Pool.States.Dtype.Size())}
		for _, x := range []problem.Tensor{a.Q, a.K, a.V, a.G, a.Beta, a.O, a.TokenStates} {
			if !x.Present() {
				continue
			}
			end := x.Ptr + uintptr(x.Elems()*x.Dtype.Size())
			if x.Bytes < x.Elems()*x.Dtype.Size() || (x.Ptr < pool[1] && pool[0] < end) {
				t.Fatalf("accepted %+v beside the pool %#x", x, pool)
			}
		}
	})
}

// mutateDecode applies one fuzz step: field selects what changes, which
// the tensor or element, v the new value.
func mutateDecode(a *problem.Decode, field, which byte, v int64) {
	tensors := []*problem.Tensor{&a.Q, &a.K, &a.V, &a.G, &a.Beta, &a.O, &a.TokenStates, &a.Pool.States, &a.Pool.SlotsDevice, &a.ALog}
	t := tensors[int(which)%len(tensors)]
	switch field % 9 {
	case 0: // one dimension
		if len(t.Shape) > 0 {
			t.Shape = append([]int(nil), t.Shape...)
			t.Shape[int(which>>4)%len(t.Shape)] = int(v % 20)
		}
	case 1: // the pointer: misaligned, nil, or onto another tensor
		t.Ptr = uintptr(v) & (1<<44 - 1)
	case 2: // the dtype
		t.Dtype = dtype.Dtype(uint64(v) % 8)
	case 3: // the buffer's size
		t.Bytes = int(v % (1 << 24))
	case 4: // a slot
		if len(a.Pool.Slots) > 0 {
			a.Pool.Slots = append([]int(nil), a.Pool.Slots...)
			a.Pool.Slots[int(which)%len(a.Pool.Slots)] = int(v%20) - 4
		}
	case 5: // packed sequences of the tokens q holds
		if len(a.Q.Shape) == 4 && a.Q.Shape[0] == 1 {
			tok := a.Q.Shape[1]
			cu := []int{0}
			for cu[len(cu)-1] < tok {
				cu = append(cu, min(tok, cu[len(cu)-1]+1+int(uint64(v)%10)))
				v /= 7
			}
			a.CuSeqlens = cu
			a.CuSeqlensDevice = problem.Tensor{Ptr: 1 << 45, Bytes: 8 * len(cu), Dtype: dtype.Int64, Shape: []int{len(cu)}}
		}
	case 6: // the flags
		a.L2Norm, a.GateInKernel, a.BetaLogits, a.NegEigval = v&1 != 0, v&2 != 0, v&4 != 0, v&8 != 0
	case 7: // the layout
		a.Layout = problem.Layout(uint64(v) % 3)
	case 8: // token states of B*T rows
		if len(a.Q.Shape) == 4 {
			a.TokenStates = problem.Tensor{Ptr: 1 << 43, Dtype: dtype.FP32, Shape: []int{a.Q.Shape[0] * a.Q.Shape[1], a.V.Shape[2], 128, 128}}
			a.TokenStates.Bytes = a.TokenStates.Elems() * 4
		}
	}
}
