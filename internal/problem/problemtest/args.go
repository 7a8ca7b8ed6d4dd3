// Package problemtest makes valid arguments of forward calls for the CPU
// tests of the packages that take them: the device addresses are fake (but
// aligned, non-nil and far enough apart), which is all validation, the
// planner and the call caches look at.
package problemtest

import (
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/problem"
)

// Core returns valid core arguments for B, T, Hq, Hv in bf16 with h0 and
// ht, each tensor at its own address.
func Core(b, t, hq, hv int) *problem.Core {
	next := uintptr(1 << 20)
	tensor := func(dt dtype.Dtype, shape ...int) problem.Tensor {
		tn := problem.Tensor{Ptr: next, Dtype: dt, Shape: shape}
		tn.Bytes = tn.Elems() * dt.Size()
		next += uintptr(tn.Bytes+255) &^ 255
		return tn
	}
	return &problem.Core{
		Q: tensor(dtype.BF16, b, t, hq, 128), K: tensor(dtype.BF16, b, t, hq, 128), V: tensor(dtype.BF16, b, t, hv, 128),
		G: tensor(dtype.FP32, b, t, hv), Beta: tensor(dtype.FP32, b, t, hv), A: tensor(dtype.FP32, b, t, hv, 64),
		H0: tensor(dtype.FP32, b, hv, 128, 128), O: tensor(dtype.BF16, b, t, hv, 128), Ht: tensor(dtype.FP32, b, hv, 128, 128),
	}
}

// WithStates gives a the h0 and ht of n sequences, at addresses past
// Core's packed buffers (which hold one state each: grown in place they
// would overlap the next tensor, which validation refuses).
func WithStates(a *problem.Core, n int) {
	a.H0.Shape[0], a.Ht.Shape[0] = n, n
	a.H0.Bytes, a.Ht.Bytes = a.H0.Elems()*4, a.Ht.Elems()*4
	a.H0.Ptr, a.Ht.Ptr = 1<<41, 1<<42
}

// Varlen returns Core's arguments with packed sequences (B = 1): four
// sequences of 1000, 1, 1999 and 1096 tokens, 16 key and 32 value heads.
func Varlen() *problem.Core {
	a := Core(1, 4096, 16, 32)
	WithStates(a, 4)
	a.CuSeqlens = []int{0, 1000, 1001, 3000, 4096}
	a.CuSeqlensDevice = problem.Tensor{Ptr: 1 << 40, Bytes: 40, Dtype: dtype.Int64, Shape: []int{5}}
	return a
}

// Full returns valid full-forward arguments (A absent, g raw) of Core's
// shapes and addresses.
func Full(b, t, hq, hv int) *problem.Full {
	c := Core(b, t, hq, hv)
	return &problem.Full{Q: c.Q, K: c.K, V: c.V, G: c.G, Beta: c.Beta, H0: c.H0, O: c.O, Ht: c.Ht}
}
