package problem_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/problem/problemtest"
)

func TestValidateCoreAccepts(t *testing.T) {
	a := problemtest.Core(3, 65, 8, 24)
	p, err := problem.ValidateCore(a)
	if err != nil {
		t.Fatal(err)
	}
	if p.B != 3 || p.T != 65 || p.Hq != 8 || p.Hv != 24 || p.N != 3 || p.G() != 3 || !p.HasH0 || !p.HasHt {
		t.Fatalf("problem %+v", p)
	}
	if want := float32(1 / math.Sqrt(128)); p.Scale != want {
		t.Fatalf("default scale %v, want %v", p.Scale, want)
	}
	// Optional tensors absent, beta in the input dtype, A in bf16, varlen.
	v := problemtest.Core(1, 100, 2, 8)
	v.H0, v.Ht = problem.Tensor{}, problem.Tensor{}
	v.Beta.Dtype, v.A.Dtype = dtype.BF16, dtype.BF16
	v.CuSeqlens = []int{0, 0, 1, 60, 60, 100}
	v.CuSeqlensDevice = problem.Tensor{Ptr: 1 << 40, Bytes: 48, Dtype: dtype.Int64, Shape: []int{6}}
	p, err = problem.ValidateCore(v)
	if err != nil {
		t.Fatal(err)
	}
	if p.N != 5 || p.HasH0 || p.HasHt || p.SeqlensDtype != dtype.Int64 {
		t.Fatalf("varlen problem %+v", p)
	}
}

func TestValidateCoreRejects(t *testing.T) {
	cases := []struct {
		arg, want string
		mutate    func(a *problem.Core)
	}{
		{"args", "nil", nil},
		{"q", "rank 3", func(a *problem.Core) { a.Q.Shape = []int{2, 10, 128} }},
		{"q", "head dimension 64", func(a *problem.Core) { a.Q.Shape = []int{2, 10, 2, 64} }},
		{"q", "dtype fp32", func(a *problem.Core) { a.Q.Dtype = dtype.FP32 }},
		{"q", "at least 1", func(a *problem.Core) { a.Q.Shape = []int{2, 0, 2, 128} }},
		{"v", "multiple", func(a *problem.Core) { a.V.Shape = []int{2, 10, 3, 128} }},
		{"v", "rank", func(a *problem.Core) { a.V.Shape = []int{2, 10, 8} }},
		{"k", "shape", func(a *problem.Core) { a.K.Shape = []int{2, 10, 4, 128} }},
		{"k", "dtype", func(a *problem.Core) { a.K.Dtype = dtype.FP16 }},
		{"v", "nil device pointer", func(a *problem.Core) { a.V.Ptr = 0 }},
		{"o", "aligned", func(a *problem.Core) { a.O.Ptr += 2 }},
		{"g", "dtype bf16", func(a *problem.Core) { a.G.Dtype = dtype.BF16 }},
		{"beta", "bytes", func(a *problem.Core) { a.Beta.Bytes = 4 }},
		{"beta", "dtype fp16", func(a *problem.Core) { a.Beta.Dtype = dtype.FP16 }},
		{"A", "shape", func(a *problem.Core) { a.A.Shape = []int{2, 10, 8, 128} }},
		{"h0", "shape", func(a *problem.Core) { a.H0.Shape = []int{3, 8, 128, 128} }},
		{"ht", "dtype", func(a *problem.Core) { a.Ht.Dtype = dtype.BF16 }},
		{"ht", "nil device pointer", func(a *problem.Core) { a.Ht.Ptr = 0 }},
		{"cu_seqlens", "B = 1", func(a *problem.Core) { a.CuSeqlens = []int{0, 20} }},
		{"scale", "finite", func(a *problem.Core) { a.Scale = float32(math.Inf(1)) }},
	}
	for _, c := range cases {
		var a *problem.Core
		if c.mutate != nil {
			a = problemtest.Core(2, 10, 2, 8)
			c.mutate(a)
		}
		_, err := problem.ValidateCore(a)
		var ae *gdnerr.ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !errors.Is(err, gdnerr.ErrInvalidArgument) {
			t.Errorf("%s/%s: got %v, want an gdnerr.ArgError for %q", c.arg, c.want, err, c.arg)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not say %q", c.arg, err, c.want)
		}
	}
}

func TestValidateCuSeqlens(t *testing.T) {
	cases := []struct {
		cu   []int
		want string
	}{
		{[]int{1, 100}, "starts at 1"},
		{[]int{0, 50, 40, 100}, "decreases at index 2"},
		{[]int{0, 99}, "ends at 99"},
		{[]int{0}, "at least 2"},
	}
	for _, c := range cases {
		a := problemtest.Core(1, 100, 2, 8)
		a.H0, a.Ht = problem.Tensor{}, problem.Tensor{}
		a.CuSeqlens = c.cu
		a.CuSeqlensDevice = problem.Tensor{Ptr: 1 << 40, Bytes: 4 * len(c.cu), Dtype: dtype.Int32, Shape: []int{len(c.cu)}}
		_, err := problem.ValidateCore(a)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "cu_seqlens") {
			t.Errorf("%v: got %v, want cu_seqlens error saying %q", c.cu, err, c.want)
		}
	}
	// The device copy must match the host copy in length and be an integer type.
	a := problemtest.Core(1, 100, 2, 8)
	a.H0, a.Ht = problem.Tensor{}, problem.Tensor{}
	a.CuSeqlens = []int{0, 40, 100}
	a.CuSeqlensDevice = problem.Tensor{Ptr: 1 << 40, Bytes: 8, Dtype: dtype.Int32, Shape: []int{2}}
	if _, err := problem.ValidateCore(a); err == nil || !strings.Contains(err.Error(), "cu_seqlens (device)") {
		t.Errorf("short device cu_seqlens: %v", err)
	}
	a.CuSeqlensDevice = problem.Tensor{Ptr: 1 << 40, Bytes: 12, Dtype: dtype.FP32, Shape: []int{3}}
	if _, err := problem.ValidateCore(a); err == nil || !strings.Contains(err.Error(), "int32 or int64") {
		t.Errorf("fp32 device cu_seqlens: %v", err)
	}
	a.CuSeqlens = nil
	if _, err := problem.ValidateCore(a); err == nil || !strings.Contains(err.Error(), "host copy") {
		t.Errorf("device cu_seqlens without host copy: %v", err)
	}
	// h0 follows N = len(cu_seqlens)-1, not B.
	a = problemtest.Core(1, 100, 2, 8)
	a.CuSeqlens = []int{0, 40, 100}
	a.CuSeqlensDevice = problem.Tensor{Ptr: 1 << 40, Bytes: 12, Dtype: dtype.Int32, Shape: []int{3}}
	if _, err := problem.ValidateCore(a); err == nil || !strings.Contains(err.Error(), "h0") {
		t.Errorf("h0 of B sequences with 2 packed sequences: %v", err)
	}
}

// Sizes whose products would overflow are rejected, not wrapped around.
func TestValidateCoreHugeSizes(t *testing.T) {
	cases := []struct {
		name      string
		b, t, hq  int
		hv        int
		arg, want string
	}{
		{"B*T past int32", 2, 1 << 62, 1, 1, "q", "B*T"},
		{"B*T just past int32", 1 << 16, 1 << 15, 1, 1, "q", "B*T"},
		{"heads past the cap", 1, 10, 1<<62 + 1, 1<<62 + 1, "q", "Hq"},
		{"value heads past the cap", 1, 10, 1, 1 << 17, "v", "Hv"},
	}
	for _, c := range cases {
		a := &problem.Core{
			Q: problem.Tensor{Ptr: 1 << 20, Bytes: 1 << 30, Dtype: dtype.BF16, Shape: []int{c.b, c.t, c.hq, 128}},
			V: problem.Tensor{Ptr: 1 << 21, Bytes: 1 << 30, Dtype: dtype.BF16, Shape: []int{c.b, c.t, c.hv, 128}},
		}
		_, err := problem.ValidateCore(a)
		var ae *gdnerr.ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an gdnerr.ArgError for %q saying %q", c.name, err, c.arg, c.want)
		}
	}
	a := problemtest.Core(65536, 1, 1, 1)
	if _, err := problem.ValidateCore(a); err == nil || !strings.Contains(err.Error(), "at most 65535") {
		t.Errorf("65536 sequences: %v", err)
	}
}

// beta in a 16-bit dtype needs only 2-byte alignment; fp32 needs 4.
func TestValidateBetaAlignment(t *testing.T) {
	a := problemtest.Core(1, 10, 1, 1)
	a.Beta.Dtype = dtype.BF16
	a.Beta.Ptr += 2
	if _, err := problem.ValidateCore(a); err != nil {
		t.Errorf("bf16 beta at a 2-byte boundary: %v", err)
	}
	a.Beta.Dtype = dtype.FP32
	a.Beta.Bytes = 40
	if _, err := problem.ValidateCore(a); err == nil || !strings.Contains(err.Error(), "aligned") {
		t.Errorf("fp32 beta at a 2-byte boundary: %v", err)
	}
}

// Validation allocates nothing on valid arguments (Forward validates every
// call); only a failed check builds an error.
func TestValidateCoreAllocs(t *testing.T) {
	v := problemtest.Core(1, 100, 2, 8)
	v.CuSeqlens = []int{0, 0, 1, 60, 60, 100}
	v.CuSeqlensDevice = problem.Tensor{Ptr: 1 << 40, Bytes: 24, Dtype: dtype.Int32, Shape: []int{6}}
	v.Beta.Dtype, v.Beta.Bytes, v.A.Dtype = dtype.BF16, v.Beta.Bytes/2, dtype.BF16
	v.H0, v.Ht = problem.Tensor{}, problem.Tensor{}
	for _, a := range []*problem.Core{problemtest.Core(3, 65, 8, 24), v} {
		if _, err := problem.ValidateCore(a); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { problem.ValidateCore(a) }); n != 0 {
			t.Errorf("%v allocs per validation, want 0", n)
		}
	}
	bad := problemtest.Core(1, 10, 1, 1)
	bad.A.Shape = []int{1, 10, 1, 32}
	if _, err := problem.ValidateCore(bad); err == nil || !strings.Contains(err.Error(), "shape [1 10 1 32], want [1 10 1 64]") {
		t.Errorf("shape error reads %v", err)
	}
	bad = problemtest.Core(1, 10, 1, 1)
	bad.Beta.Dtype = dtype.FP16
	if _, err := problem.ValidateCore(bad); err == nil || !strings.Contains(err.Error(), "want fp32 or bf16") {
		t.Errorf("dtype error reads %v", err)
	}
}

// The full forward's core (problem.Core.QKFP16): q and k are its fp16 copies,
// v and o keep the input dtype; the problem says both.
func TestValidateCoreFP16QK(t *testing.T) {
	a := problemtest.Core(1, 100, 2, 8)
	a.QKFP16 = true
	a.Q.Dtype, a.K.Dtype = dtype.FP16, dtype.FP16
	p, err := problem.ValidateCore(a)
	if err != nil {
		t.Fatal(err)
	}
	if p.Dtype != dtype.BF16 || p.QKDtype != dtype.FP16 {
		t.Errorf("dtypes %v / q, k %v, want bf16 / fp16", p.Dtype, p.QKDtype)
	}
	a.K.Dtype = dtype.BF16
	var ae *gdnerr.ArgError
	if _, err := problem.ValidateCore(a); !errors.As(err, &ae) || ae.Arg != "k" {
		t.Errorf("bf16 k beside fp16 copies: %v, want an gdnerr.ArgError naming k", err)
	}
	plain := problemtest.Core(1, 100, 2, 8)
	if p, err := problem.ValidateCore(plain); err != nil || p.QKDtype != p.Dtype {
		t.Errorf("plain call: q, k dtype %v, v %v (%v)", p.QKDtype, p.Dtype, err)
	}
}

// Outputs must not share memory with an input or with each other (the
// kernels would read what other CTAs already overwrote): each overlap is an
// gdnerr.ArgError naming the output and the input; ht may be h0 itself.
func TestValidateCoreOverlaps(t *testing.T) {
	state := 128 * 128 * 4
	cases := []struct {
		name     string
		mutate   func(a *problem.Core)
		arg, msg string
	}{
		{"o is q", func(a *problem.Core) { a.O.Ptr = a.Q.Ptr }, "o", "q"},
		{"o inside v", func(a *problem.Core) { a.O.Ptr = a.V.Ptr + 256 }, "o", "v"},
		{"o over the end of A", func(a *problem.Core) { a.O.Ptr = a.A.Ptr + uintptr(a.A.Bytes) - 256 }, "o", "A"},
		{"ht half a state past h0", func(a *problem.Core) { a.Ht.Ptr = a.H0.Ptr + uintptr(state/2) }, "ht", "h0"},
		{"ht on beta", func(a *problem.Core) { a.Ht.Ptr = a.Beta.Ptr }, "ht", "beta"},
		{"ht overlapping o", func(a *problem.Core) { a.Ht.Ptr = a.O.Ptr + 256 }, "ht", "o"},
		{"o on cu_seqlens", func(a *problem.Core) {
			a.CuSeqlens = []int{0, 2}
			a.CuSeqlensDevice = problem.Tensor{Ptr: a.O.Ptr + 64, Bytes: 16, Dtype: dtype.Int64, Shape: []int{2}}
		}, "o", "cu_seqlens"},
	}
	for _, c := range cases {
		a := problemtest.Core(1, 2, 2, 4)
		c.mutate(a)
		_, err := problem.ValidateCore(a)
		var ae *gdnerr.ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !strings.Contains(err.Error(), c.msg) || !errors.Is(err, gdnerr.ErrInvalidArgument) {
			t.Errorf("%s: %v, want an gdnerr.ArgError for %q naming %q", c.name, err, c.arg, c.msg)
		}
	}
	// The state updated in place, and buffers that only touch, are fine.
	a := problemtest.Core(2, 1, 2, 4)
	a.Ht = a.H0
	if _, err := problem.ValidateCore(a); err != nil {
		t.Errorf("ht == h0: %v", err)
	}
	a = problemtest.Core(2, 1, 2, 4)
	a.O.Ptr = 1 << 43
	a.Q.Ptr = a.O.Ptr - uintptr(a.Q.Bytes) // q ends where o begins
	if _, err := problem.ValidateCore(a); err != nil {
		t.Errorf("o adjacent to q: %v", err)
	}
	// Inputs may share memory with each other (they are only read).
	a = problemtest.Core(2, 1, 2, 4)
	a.K = a.Q
	if _, err := problem.ValidateCore(a); err != nil {
		t.Errorf("k == q: %v", err)
	}
}

// Hv is bounded by the grid's y dimension (the preparation and the scan run
// a row per value head): 65535 passes, 65536 is an gdnerr.ArgError.
func TestValidateCoreHeadBound(t *testing.T) {
	if _, err := problem.ValidateCore(problemtest.Core(1, 1, 1, 65535)); err != nil {
		t.Errorf("Hv = 65535: %v", err)
	}
	_, err := problem.ValidateCore(problemtest.Core(1, 1, 1, 65536))
	var ae *gdnerr.ArgError
	if !errors.As(err, &ae) || ae.Arg != "v" || !strings.Contains(err.Error(), "65535") {
		t.Errorf("Hv = 65536: %v, want an gdnerr.ArgError for v", err)
	}
}
