package problem_test

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/problem/problemtest"
)

// FuzzValidateCore holds problem.ValidateCore to its contract for any Core:
// nil or an *gdnerr.ArgError that names the argument and wraps gdnerr.ErrInvalidArgument,
// never a panic; and what it accepts really fits (every buffer large enough
// for its shape, every pointer aligned, cu_seqlens well formed).
//
// The bytes are a program: four small sizes build valid arguments
// (problemtest.Core), then each 12-byte step changes one field of one tensor, or
// cu_seqlens, or the scale, to a value from the bytes (edge values
// included). Valid arguments first means the fuzzer reaches every check,
// not only the first.
func FuzzValidateCore(f *testing.F) {
	f.Add([]byte{1, 65, 2, 8})
	f.Add([]byte{3, 64, 1, 3, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 200, 2, 8, 9, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 1, 1, 1, 4, 2, 5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0})
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) < 4 {
			return
		}
		a := problemtest.Core(1+int(prog[0]%4), 1+int(prog[1]), 1+int(prog[2]%4), 1+int(prog[3]%4))
		if a.V.Shape[2]%a.Q.Shape[2] != 0 {
			a = problemtest.Core(a.Q.Shape[0], a.Q.Shape[1], a.Q.Shape[2], a.Q.Shape[2])
		}
		for step := prog[4:]; len(step) >= 12; step = step[12:] {
			mutateCoreArgs(a, step[0], step[1], step[2], int64(binary.LittleEndian.Uint64(step[3:11])), step[11])
		}
		p, err := problem.ValidateCore(a)
		if err != nil {
			var ae *gdnerr.ArgError
			if !errors.As(err, &ae) || ae.Arg == "" || !errors.Is(err, gdnerr.ErrInvalidArgument) {
				t.Fatalf("error %v (%T) is not an *gdnerr.ArgError naming an argument", err, err)
			}
			return
		}
		checkAccepted(t, a, p)
	})
}

// mutateCoreArgs applies one fuzz step: field selects what changes, which
// the tensor (or the element of cu_seqlens, or a dimension), v the new
// value (through edgeValue), extra the variant of the change.
func mutateCoreArgs(a *problem.Core, field, which, dim byte, v int64, extra byte) {
	tensors := []*problem.Tensor{&a.Q, &a.K, &a.V, &a.G, &a.Beta, &a.A, &a.H0, &a.O, &a.Ht, &a.CuSeqlensDevice}
	t := tensors[int(which)%len(tensors)]
	switch field % 10 {
	case 0: // one dimension
		if len(t.Shape) > 0 {
			t.Shape = append([]int(nil), t.Shape...)
			t.Shape[int(dim)%len(t.Shape)] = edgeValue(v, extra)
		}
	case 1: // the rank
		n := int(dim % 7)
		s := make([]int, n)
		for i := range s {
			s[i] = 1 + int(extra)%3
		}
		t.Shape = s
	case 2: // the dtype, valid or not
		t.Dtype = dtype.Dtype(int(dim%8) - 1)
	case 3: // the pointer: absent, offset or arbitrary
		switch extra % 3 {
		case 0:
			t.Ptr = 0
		case 1:
			t.Ptr += uintptr(dim)
		default:
			t.Ptr = uintptr(v)
		}
	case 4: // the size of the buffer
		t.Bytes = edgeValue(v, extra)
	case 5: // drop the tensor
		*t = problem.Tensor{}
	case 6: // cu_seqlens: a fresh list
		n := int(dim % 9)
		a.CuSeqlens = make([]int, n)
		for i := range a.CuSeqlens {
			a.CuSeqlens[i] = i * int(extra%70)
		}
		if n > 0 && extra&1 == 1 && len(a.Q.Shape) >= 2 {
			a.CuSeqlens[n-1] = a.Q.Shape[0] * a.Q.Shape[1] // ends at B*T, as it must
		}
		a.CuSeqlensDevice = problem.Tensor{Ptr: 1 << 40, Bytes: 8 * n, Dtype: dtype.Int32 + dtype.Dtype(extra%2), Shape: []int{n}}
	case 7: // one element of cu_seqlens
		if len(a.CuSeqlens) > 0 {
			a.CuSeqlens = append([]int(nil), a.CuSeqlens...)
			a.CuSeqlens[int(dim)%len(a.CuSeqlens)] = edgeValue(v, extra)
		}
	case 8: // cu_seqlens cleared, or its host copy alone
		a.CuSeqlens = nil
		if extra%2 == 0 {
			a.CuSeqlensDevice = problem.Tensor{}
		}
	case 9: // the scale
		a.Scale = math.Float32frombits(uint32(v))
	}
}

// edgeValue turns fuzz bytes into a size: small numbers mostly, the edges
// of int32 and int64 and negative numbers sometimes.
func edgeValue(v int64, extra byte) int {
	switch extra % 8 {
	case 0:
		return int(v)
	case 1:
		return -int(v & 0xff)
	case 2:
		return math.MaxInt32 + int(v&3) - 1
	case 3:
		return math.MaxInt64 - int(v&3)
	case 4:
		return 1 << (v & 63)
	default:
		return int(v & 0x3ff)
	}
}

// checkAccepted recomputes, independently of problem.ValidateCore, what accepted
// arguments must satisfy.
func checkAccepted(t *testing.T, a *problem.Core, p problem.Problem) {
	t.Helper()
	if p.B < 1 || p.T < 1 || p.Hq < 1 || p.Hv < 1 || p.Hv%p.Hq != 0 || p.N < 1 || p.N > problem.MaxSeqs {
		t.Fatalf("accepted problem %+v", p)
	}
	if int64(p.B)*int64(p.T) > math.MaxInt32 {
		t.Fatalf("accepted B*T = %d*%d", p.B, p.T)
	}
	for name, tn := range map[string]problem.Tensor{"q": a.Q, "k": a.K, "v": a.V, "g": a.G, "beta": a.Beta, "A": a.A, "o": a.O, "h0": a.H0, "ht": a.Ht} {
		if (name == "h0" && !p.HasH0) || (name == "ht" && !p.HasHt) {
			continue
		}
		if tn.Ptr == 0 || tn.Dtype.Size() == 0 || tn.Ptr%uintptr(tn.Dtype.Size()) != 0 {
			t.Fatalf("%s accepted with pointer %#x, dtype %v", name, tn.Ptr, tn.Dtype)
		}
		need := int64(tn.Dtype.Size())
		for _, d := range tn.Shape {
			if d < 0 {
				t.Fatalf("%s accepted with shape %v", name, tn.Shape)
			}
			need *= int64(d)
			if need > 1<<62 {
				t.Fatalf("%s accepted with shape %v (overflows)", name, tn.Shape)
			}
		}
		if int64(tn.Bytes) < need {
			t.Fatalf("%s accepted: %d bytes for shape %v of %v", name, tn.Bytes, tn.Shape, tn.Dtype)
		}
	}
	if p.Seqs != nil {
		if p.B != 1 || len(p.Seqs) != p.N+1 || p.Seqs[0] != 0 || p.Seqs[p.N] != p.B*p.T {
			t.Fatalf("accepted cu_seqlens %v for %+v", p.Seqs, p)
		}
		for i := 1; i < len(p.Seqs); i++ {
			if p.Seqs[i] < p.Seqs[i-1] {
				t.Fatalf("accepted decreasing cu_seqlens %v", p.Seqs)
			}
		}
		if d := a.CuSeqlensDevice; d.Ptr == 0 || int64(d.Bytes) < int64(len(p.Seqs))*int64(d.Dtype.Size()) {
			t.Fatalf("accepted device cu_seqlens %+v for %d offsets", d, len(p.Seqs))
		}
	}
	if math.IsNaN(float64(p.Scale)) || math.IsInf(float64(p.Scale), 0) || p.Scale == 0 {
		t.Fatalf("accepted scale %v", p.Scale)
	}
}
