package problem_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/problem/problemtest"
)

// pooled returns valid core arguments of n packed sequences (B = 1) whose
// states are in a pool of s slots, without h0 and ht.
func pooled(s int, slots []int) *problem.Core {
	n := len(slots)
	a := problemtest.Core(1, 64*n, 2, 4)
	a.H0, a.Ht = problem.Tensor{}, problem.Tensor{}
	a.CuSeqlens = make([]int, n+1)
	for i := range n {
		a.CuSeqlens[i+1] = 64 * (i + 1)
	}
	a.CuSeqlensDevice = problem.Tensor{Ptr: 1 << 40, Bytes: 4 * (n + 1), Dtype: dtype.Int32, Shape: []int{n + 1}}
	st := problem.Tensor{Ptr: 1 << 41, Dtype: dtype.FP32, Shape: []int{s, 4, 128, 128}}
	st.Bytes = st.Elems() * 4
	a.Pool = problem.Pool{States: st, Slots: slots,
		SlotsDevice: problem.Tensor{Ptr: 1 << 42, Bytes: 4 * n, Dtype: dtype.Int32, Shape: []int{n}}}
	return a
}

func TestValidateCorePool(t *testing.T) {
	a := pooled(8, []int{3, -1, 7})
	p, err := problem.ValidateCore(a)
	if err != nil || p.Pool.S != 8 || p.Pool.Dtype != dtype.FP32 || p.StateDtype() != dtype.FP32 || p.HasH0 || p.HasHt {
		t.Fatalf("valid pooled call: %+v, %v", p, err)
	}
	a.Pool.States.Dtype, a.Layout = dtype.BF16, problem.LayoutVK
	if p, err = problem.ValidateCore(a); err != nil || p.StateDtype() != dtype.BF16 || p.Layout != problem.LayoutVK {
		t.Fatalf("bf16 [V,K] pool: %+v, %v", p, err)
	}
	// Without a pool the layout applies to h0 and ht.
	b := problemtest.Core(2, 64, 2, 4)
	b.Layout = problem.LayoutVK
	if p, err := problem.ValidateCore(b); err != nil || p.Layout != problem.LayoutVK || p.Pool.S != 0 || p.StateDtype() != dtype.FP32 {
		t.Fatalf("[V,K] h0 and ht: %+v, %v", p, err)
	}
}

// Every serving rule of a prefill names its argument.
func TestValidateCorePoolRejects(t *testing.T) {
	cases := []struct {
		name string
		edit func(a *problem.Core)
		arg  string
		want string
	}{
		{"layout", func(a *problem.Core) { a.Layout = 2 }, "state_layout", "want [K,V]"},
		{"with h0", func(a *problem.Core) {
			a.H0 = problem.Tensor{Ptr: 1 << 43, Bytes: 3 * 4 * 128 * 128 * 4, Dtype: dtype.FP32, Shape: []int{3, 4, 128, 128}}
		}, "pool", "given with h0 or ht"},
		{"with ht", func(a *problem.Core) {
			a.Ht = problem.Tensor{Ptr: 1 << 43, Bytes: 3 * 4 * 128 * 128 * 4, Dtype: dtype.FP32, Shape: []int{3, 4, 128, 128}}
		}, "pool", "given with h0 or ht"},
		{"table without pool", func(a *problem.Core) { a.Pool.States = problem.Tensor{} }, "pool", "missing"},
		{"pool without table", func(a *problem.Core) { a.Pool.Slots = nil }, "slots", "missing"},
		{"device table", func(a *problem.Core) { a.Pool.SlotsDevice = problem.Tensor{} }, "slots (device)", "missing"},
		{"slot out of range", func(a *problem.Core) { a.Pool.Slots = []int{3, -1, 8} }, "slots", "out of range"},
		{"duplicate slot", func(a *problem.Core) { a.Pool.Slots = []int{7, -1, 7} }, "slots", "both write slot 7"},
		{"fp16 pool", func(a *problem.Core) { a.Pool.States.Dtype = dtype.FP16 }, "pool", "fp32 or bf16"},
		{"pool's Hv", func(a *problem.Core) { a.Pool.States.Shape = []int{8, 2, 128, 128} }, "pool", "shape"},
		{"pool over q", func(a *problem.Core) { a.Pool.States.Ptr = a.Q.Ptr }, "pool", "shares memory with q"},
		{"pool over o", func(a *problem.Core) { a.Pool.States.Ptr = a.O.Ptr - 256 }, "pool", "shares memory with o"},
		{"pool over cu_seqlens", func(a *problem.Core) { a.Pool.States.Ptr = a.CuSeqlensDevice.Ptr }, "pool", "cu_seqlens (device)"},
		{"pool over its table", func(a *problem.Core) { a.Pool.SlotsDevice.Ptr = a.Pool.States.Ptr + 1024 }, "pool", "slots (device)"},
	}
	for _, c := range cases {
		a := pooled(8, []int{3, -1, 7})
		c.edit(a)
		_, err := problem.ValidateCore(a)
		var ae *gdnerr.ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !strings.Contains(err.Error(), c.want) || !errors.Is(err, gdnerr.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want an error naming %q with %q", c.name, err, c.arg, c.want)
		}
	}
}

// The full forward checks the same, and its gate's parameters against the
// pool.
func TestValidateFullPool(t *testing.T) {
	c := pooled(8, []int{3, -1, 7})
	f := &problem.Full{Q: c.Q, K: c.K, V: c.V, G: c.G, Beta: c.Beta, O: c.O, CuSeqlens: c.CuSeqlens,
		CuSeqlensDevice: c.CuSeqlensDevice, Pool: c.Pool, Layout: problem.LayoutVK, GateInKernel: true,
		ALog:   problem.Tensor{Ptr: 1 << 44, Bytes: 16, Dtype: dtype.FP32, Shape: []int{4}},
		DtBias: problem.Tensor{Ptr: 1<<44 + 256, Bytes: 16, Dtype: dtype.FP32, Shape: []int{4}}}
	if p, err := problem.ValidateFull(f); err != nil || p.Pool.S != 8 || p.Layout != problem.LayoutVK {
		t.Fatalf("valid pooled full call: %+v, %v", p, err)
	}
	f.ALog.Ptr = f.Pool.States.Ptr + 4096
	var ae *gdnerr.ArgError
	if _, err := problem.ValidateFull(f); !errors.As(err, &ae) || ae.Arg != "pool" || !strings.Contains(err.Error(), "a_log") {
		t.Errorf("pool over a_log: %v", err)
	}
	f.ALog.Ptr = 1 << 44
	f.Pool.Slots = []int{1, 1, -1}
	if _, err := problem.ValidateFull(f); !errors.As(err, &ae) || ae.Arg != "slots" {
		t.Errorf("duplicate slots: %v", err)
	}
}

// A pooled call validates without allocating, as every call does.
func TestValidateCorePoolAllocs(t *testing.T) {
	slots := make([]int, 64)
	for i := range slots {
		slots[i] = 63 - i
		if i%5 == 0 {
			slots[i] = -1
		}
	}
	a := pooled(64, slots)
	a.Layout = problem.LayoutVK
	if _, err := problem.ValidateCore(a); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { problem.ValidateCore(a) }); n != 0 {
		t.Errorf("%v allocs per pooled validation, want 0", n)
	}
}

// withCheckpoints gives a a checkpoint buffer of rows rows at interval
// every, in dtype dt.
func withCheckpoints(a *problem.Core, every, rows int, dt dtype.Dtype) {
	a.CheckpointEvery = every
	a.Checkpoints = problem.Tensor{Ptr: 1 << 43, Dtype: dt, Shape: []int{rows, a.V.Shape[2], 128, 128}}
	a.Checkpoints.Bytes = a.Checkpoints.Elems() * dt.Size()
}

func TestValidateCoreCheckpoints(t *testing.T) {
	// Sequences of 64, 128 and 192 tokens: at E = 128, 0 + 1 + 1 rows (at
	// E = 64, 1 + 2 + 3).
	a := pooledOf(nil)
	withCheckpoints(a, 128, 2, dtype.FP32)
	p, err := problem.ValidateCore(a)
	if err != nil || p.CkptEvery != 128 || p.CkptRows != 2 {
		t.Fatalf("valid checkpoints: %+v, %v", p, err)
	}
	// The buffer's dtype is the pool's; with h0 and ht, fp32.
	a.Pool.States.Dtype = dtype.BF16
	if _, err := problem.ValidateCore(a); err == nil || !strings.Contains(err.Error(), "want bf16") {
		t.Errorf("fp32 checkpoints of a bf16 pool: %v", err)
	}
	a.Checkpoints.Dtype = dtype.BF16
	if _, err := problem.ValidateCore(a); err != nil {
		t.Errorf("bf16 checkpoints of a bf16 pool: %v", err)
	}
	b := problemtest.Core(3, 200, 2, 4)
	withCheckpoints(b, 64, 9, dtype.FP32)
	if p, err := problem.ValidateCore(b); err != nil || p.CkptRows != 9 {
		t.Errorf("checkpoints with h0 and ht (3 x 3 rows): %+v, %v", p, err)
	}

	cases := []struct {
		name string
		edit func(a *problem.Core)
		arg  string
		want string
	}{
		{"not a multiple of 64", func(a *problem.Core) { a.CheckpointEvery = 96 }, "checkpoint_every", "positive multiple of 64"},
		{"negative", func(a *problem.Core) { a.CheckpointEvery = -64 }, "checkpoint_every", "positive multiple of 64"},
		{"missing", func(a *problem.Core) { a.Checkpoints = problem.Tensor{} }, "checkpoints", "missing"},
		{"without interval", func(a *problem.Core) { a.CheckpointEvery = 0 }, "checkpoints", "without checkpoint_every"},
		{"rows", func(a *problem.Core) { a.CheckpointEvery = 64 }, "checkpoints", "want [6 4 128 128]"},
		{"dtype", func(a *problem.Core) { a.Checkpoints.Dtype = dtype.BF16 }, "checkpoints", "want fp32"},
		{"over v", func(a *problem.Core) { a.Checkpoints.Ptr = a.V.Ptr }, "checkpoints", "shares memory with v"},
		{"over o", func(a *problem.Core) { a.Checkpoints.Ptr = a.O.Ptr }, "checkpoints", "shares memory with o"},
		{"over the pool", func(a *problem.Core) { a.Checkpoints.Ptr = a.Pool.States.Ptr }, "checkpoints", "shares memory with pool"},
	}
	for _, c := range cases {
		a := pooledOf(nil)
		withCheckpoints(a, 128, 2, dtype.FP32)
		c.edit(a)
		_, err := problem.ValidateCore(a)
		var ae *gdnerr.ArgError
		if !errors.As(err, &ae) || ae.Arg != c.arg || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %q with %q", c.name, err, c.arg, c.want)
		}
	}
	// Validation with checkpoints allocates nothing either.
	a = pooledOf(nil)
	withCheckpoints(a, 128, 2, dtype.FP32)
	if n := testing.AllocsPerRun(100, func() { problem.ValidateCore(a) }); n != 0 {
		t.Errorf("%v allocs per validation with checkpoints", n)
	}
}

// pooledOf returns a (or, for nil, three pooled sequences of 64, 128 and
// 192 tokens) with fresh slices.
func pooledOf(a *problem.Core) *problem.Core {
	if a != nil {
		return a
	}
	b := pooled(8, []int{3, -1, 7})
	c := problemtest.Core(1, 384, 2, 4)
	b.Q, b.K, b.V, b.G, b.Beta, b.A, b.O = c.Q, c.K, c.V, c.G, c.Beta, c.A, c.O
	b.CuSeqlens = []int{0, 64, 192, 384}
	return b
}
