package problem

import (
	"fmt"
	"math"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
)

// CheckSizes checks the problem dimensions; it returns the offending one
// ("B", "T", "Hq" or "Hv") and what is wrong, or "" when all is well.
func CheckSizes(b, t, hq, hv int) (dim, msg string) {
	switch {
	case b < 1:
		return "B", fmt.Sprintf("B = %d, want at least 1", b)
	case t < 1:
		return "T", fmt.Sprintf("T = %d, want at least 1", t)
	case hq < 1 || hq > MaxHeads:
		return "Hq", fmt.Sprintf("Hq = %d query/key heads, want 1 to %d", hq, MaxHeads)
	case hv < 1 || hv > MaxHeads:
		return "Hv", fmt.Sprintf("Hv = %d value heads, want 1 to %d", hv, MaxHeads)
	case hv%hq != 0:
		return "Hv", fmt.Sprintf("Hv = %d value heads must be a multiple of Hq = %d query/key heads", hv, hq)
	case t > math.MaxInt32/b:
		return "T", fmt.Sprintf("B*T = %d*%d tokens, at most %d", b, t, math.MaxInt32)
	}
	return "", ""
}

// sizeFrom sets B, T, Hq and Hv from q [B, T, Hq, 128] and v [B, T, Hv,
// 128] and checks them (CheckSizes); an error names q or v.
func (p *Problem) sizeFrom(q, v Tensor) error {
	if len(q.Shape) != 4 {
		return gdnerr.Argf("q", "rank %d, want 4: [B, T, Hq, %d]", len(q.Shape), HeadDim)
	}
	p.B, p.T, p.Hq = q.Shape[0], q.Shape[1], q.Shape[2]
	if q.Shape[3] != HeadDim {
		return gdnerr.Argf("q", "head dimension %d, want %d", q.Shape[3], HeadDim)
	}
	if len(v.Shape) != 4 {
		return gdnerr.Argf("v", "rank %d, want 4: [B, T, Hv, %d]", len(v.Shape), HeadDim)
	}
	p.Hv = v.Shape[2]
	if dim, msg := CheckSizes(p.B, p.T, p.Hq, p.Hv); msg != "" {
		arg, shape := "q", q.Shape
		if dim == "Hv" {
			arg, shape = "v", v.Shape
		}
		return gdnerr.Argf(arg, "%s (shape %v)", msg, shape)
	}
	return nil
}

// seqsFrom sets N (and Seqs, SeqlensDtype) from B or from cu_seqlens, its
// host copy cu checked by CheckCuSeqlens (CheckSeqRun for a run of a
// mixed call) and its device copy dev (int32 or int64, [N+1]).
func (p *Problem) seqsFrom(cu []int, dev Tensor, run bool) error {
	p.N = p.B
	if p.N > MaxSeqs {
		return gdnerr.Argf("q", "B = %d sequences, at most %d per call", p.B, MaxSeqs)
	}
	if cu == nil {
		if dev.Present() {
			return gdnerr.Argf("cu_seqlens", "the device copy is given but the host copy (CuSeqlens) is not: both are needed")
		}
		return nil
	}
	check := CheckCuSeqlens
	if run {
		check = CheckSeqRun
	}
	if err := check(cu, p.B, p.T); err != nil {
		return err
	}
	p.N = len(cu) - 1
	if p.N > MaxSeqs {
		return gdnerr.Argf("cu_seqlens", "%d sequences, at most %d per call", p.N, MaxSeqs)
	}
	p.Seqs = cu
	if dev.Dtype != dtype.Int32 && dev.Dtype != dtype.Int64 {
		return gdnerr.Argf("cu_seqlens (device)", "dtype %v, want int32 or int64", dev.Dtype)
	}
	if err := checkTensor("cu_seqlens (device)", dev, dev.Dtype, shapeOf(p.N+1), dev.Dtype.Size()); err != nil {
		return err
	}
	p.SeqlensDtype = dev.Dtype
	return nil
}

// CheckCuSeqlens applies the rules of docs/SPEC.md: B = 1, starts at 0,
// never decreases, ends at B*T; empty sequences are allowed.
func CheckCuSeqlens(cu []int, b, t int) error {
	if b != 1 {
		return gdnerr.Argf("cu_seqlens", "packed sequences need B = 1, got B = %d", b)
	}
	if len(cu) < 2 {
		return gdnerr.Argf("cu_seqlens", "%d offsets, want at least 2 (N+1 for N sequences)", len(cu))
	}
	if cu[0] != 0 {
		return gdnerr.Argf("cu_seqlens", "starts at %d, want 0", cu[0])
	}
	for i := 1; i < len(cu); i++ {
		if cu[i] < cu[i-1] {
			return gdnerr.Argf("cu_seqlens", "decreases at index %d (%d after %d)", i, cu[i], cu[i-1])
		}
	}
	if last := cu[len(cu)-1]; last != b*t {
		return gdnerr.Argf("cu_seqlens", "ends at %d, want B*T = %d", last, b*t)
	}
	return nil
}

// CheckSeqRun checks the boundaries of a run of a mixed call's sequences
// (SeqRun): offsets into the call's B*T tokens that never decrease, from
// the run's first token (not necessarily 0) to its last (not necessarily
// B*T). The mixed call validated the whole table with CheckCuSeqlens.
func CheckSeqRun(cu []int, b, t int) error {
	if b != 1 {
		return gdnerr.Argf("cu_seqlens", "packed sequences need B = 1, got B = %d", b)
	}
	if len(cu) < 2 {
		return gdnerr.Argf("cu_seqlens", "%d offsets, want at least 2 (N+1 for N sequences)", len(cu))
	}
	if cu[0] < 0 {
		return gdnerr.Argf("cu_seqlens", "starts at %d, want 0 or more", cu[0])
	}
	for i := 1; i < len(cu); i++ {
		if cu[i] < cu[i-1] {
			return gdnerr.Argf("cu_seqlens", "decreases at index %d (%d after %d)", i, cu[i], cu[i-1])
		}
	}
	if last := cu[len(cu)-1]; last > b*t {
		return gdnerr.Argf("cu_seqlens", "ends at %d, past B*T = %d", last, b*t)
	}
	return nil
}

// checkTensor verifies shape, dtype, pointer, alignment and size of one operand.
func checkTensor(name string, t Tensor, dt dtype.Dtype, shape dims, align int) error {
	if t.Dtype != dt {
		return gdnerr.Argf(name, "dtype %v, want %v", t.Dtype, dt)
	}
	if len(t.Shape) != shape.n {
		return gdnerr.Argf(name, "rank %d (shape %v), want shape %v", len(t.Shape), t.Shape, shape.ints())
	}
	for i, d := range shape.d[:shape.n] {
		if t.Shape[i] != d {
			return gdnerr.Argf(name, "shape %v, want %v", t.Shape, shape.ints())
		}
	}
	if t.Ptr == 0 {
		return gdnerr.Argf(name, "nil device pointer")
	}
	if t.Ptr%uintptr(align) != 0 {
		return gdnerr.Argf(name, "device pointer %#x is not %d-byte aligned", t.Ptr, align)
	}
	if need := t.Elems() * dt.Size(); t.Bytes < need {
		return gdnerr.Argf(name, "buffer holds %d bytes, shape %v of %v needs %d", t.Bytes, shape.ints(), dt, need)
	}
	return nil
}

// dims is an expected shape of up to four dimensions, held by value: a
// []int passed on to an error message would escape to the heap on every
// call, failed or not.
type dims struct {
	n int
	d [4]int
}

func shapeOf(d ...int) dims {
	var s dims
	s.n = copy(s.d[:], d)
	return s
}

// ints returns the shape as a slice, for messages.
func (s dims) ints() []int { return append([]int(nil), s.d[:s.n]...) }

// dtypeSet is the one or two dtypes an operand may have, by value (see dims).
type dtypeSet struct {
	n int
	d [2]dtype.Dtype
}

func dtypesOf(d ...dtype.Dtype) dtypeSet {
	var s dtypeSet
	s.n = copy(s.d[:], d)
	return s
}

func (s dtypeSet) has(d dtype.Dtype) bool {
	for _, x := range s.d[:s.n] {
		if d == x {
			return true
		}
	}
	return false
}

// String lists the set: "fp32 or bf16".
func (s dtypeSet) String() string {
	out := ""
	for i, d := range s.d[:s.n] {
		if i > 0 {
			out += " or "
		}
		out += d.String()
	}
	return out
}
