package main

import (
	"unsafe"

	"github.com/gdnjit/gdn"
)

// The conversions from gdn.h's structs (their Go mirrors) to the Go API's
// arguments. They check only what the Go API cannot see (a dimension count,
// a host array's length, the layout's range); every other check, and its
// message, is the Runtime's.

// tensor converts t, named arg in errors.
func tensor(arg string, t *cTensor) (gdn.Tensor, error) {
	if t.Ndim < 0 || t.Ndim > maxDims {
		return gdn.Tensor{}, &gdn.ArgError{Arg: arg, Msg: "ndim must be 0 to 5"}
	}
	out := gdn.Tensor{Ptr: uintptr(t.Ptr), Bytes: int(t.Bytes), Dtype: gdn.Dtype(t.Dtype)}
	if t.Ndim > 0 {
		out.Shape = make([]int, t.Ndim)
		for i := range out.Shape {
			out.Shape[i] = int(t.Shape[i])
		}
	}
	return out, nil
}

// tensors converts each of a list of (name, C tensor, Go tensor) in turn.
type namedTensor struct {
	arg string
	c   *cTensor
	dst *gdn.Tensor
}

func convertAll(ts []namedTensor) error {
	for _, t := range ts {
		v, err := tensor(t.arg, t.c)
		if err != nil {
			return err
		}
		*t.dst = v
	}
	return nil
}

// hostInts copies n host integers from p, named arg in errors.
func hostInts[T int32 | int64](arg string, p *T, n int64) ([]int, error) {
	switch {
	case n < 0:
		return nil, &gdn.ArgError{Arg: arg, Msg: "a negative length"}
	case n == 0:
		return nil, nil
	case p == nil:
		return nil, &gdn.ArgError{Arg: arg, Msg: "a length but a NULL host array"}
	}
	src := unsafe.Slice(p, n)
	out := make([]int, n)
	for i, v := range src {
		out[i] = int(v)
	}
	return out, nil
}

// seqs converts the boundaries of packed sequences.
func seqs(s *cSeqs) (host []int, dev gdn.Tensor, err error) {
	if host, err = hostInts("cu_seqlens", s.Host, s.N); err != nil {
		return nil, gdn.Tensor{}, err
	}
	dev, err = tensor("cu_seqlens", &s.Device)
	return host, dev, err
}

// pool converts a state pool.
func pool(p *cPool) (gdn.StatePool, error) {
	var out gdn.StatePool
	var err error
	if out.Slots, err = hostInts("slots", p.Slots, p.NSlots); err != nil {
		return out, err
	}
	err = convertAll([]namedTensor{
		{"pool", &p.States, &out.States},
		{"slots", &p.SlotsDevice, &out.SlotsDevice},
	})
	return out, err
}

// layout converts a gdn_layout.
func layout(l int32) (gdn.StateLayout, error) {
	if l := int64(l); l == layoutKV || l == layoutVK {
		return gdn.StateLayout(l), nil
	}
	return 0, &gdn.ArgError{Arg: "state_layout", Msg: "must be GDN_LAYOUT_KV (0) or GDN_LAYOUT_VK (1)"}
}

// sequencesAndStates converts what every call's arguments share: the
// packed sequences' boundaries, the state pool and the states' layout.
func sequencesAndStates(cs *cSeqs, cp *cPool, cl int32, cu *[]int, cuDev *gdn.Tensor, p *gdn.StatePool, l *gdn.StateLayout) error {
	var err error
	if *cu, *cuDev, err = seqs(cs); err != nil {
		return err
	}
	if *p, err = pool(cp); err != nil {
		return err
	}
	*l, err = layout(cl)
	return err
}

// coreArgs converts the core forward's arguments.
func coreArgs(c *cCoreArgs) (*gdn.CoreArgs, error) {
	a := &gdn.CoreArgs{Scale: c.Scale, CheckpointEvery: int(c.CheckpointEvery)}
	err := convertAll([]namedTensor{
		{"q", &c.Q, &a.Q}, {"k", &c.K, &a.K}, {"v", &c.V, &a.V},
		{"g", &c.G, &a.G}, {"beta", &c.Beta, &a.Beta}, {"A", &c.A, &a.A},
		{"h0", &c.H0, &a.H0}, {"o", &c.O, &a.O}, {"ht", &c.Ht, &a.Ht},
		{"checkpoints", &c.Checkpoints, &a.Checkpoints},
	})
	if err == nil {
		err = sequencesAndStates(&c.CuSeqlens, &c.Pool, c.Layout, &a.CuSeqlens, &a.CuSeqlensDevice, &a.Pool, &a.Layout)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// fullArgs converts the full forward's (and the mixed batch's) arguments.
func fullArgs(c *cFullArgs) (*gdn.FullArgs, error) {
	a := &gdn.FullArgs{
		Scale: c.Scale, CheckpointEvery: int(c.CheckpointEvery),
		L2Norm: c.L2Norm != 0, GateInKernel: c.GateInKernel != 0,
		BetaLogits: c.BetaLogits != 0, NegEigval: c.NegEigval != 0,
	}
	err := convertAll([]namedTensor{
		{"q", &c.Q, &a.Q}, {"k", &c.K, &a.K}, {"v", &c.V, &a.V},
		{"g", &c.G, &a.G}, {"beta", &c.Beta, &a.Beta},
		{"a_log", &c.ALog, &a.ALog}, {"dt_bias", &c.DtBias, &a.DtBias},
		{"h0", &c.H0, &a.H0}, {"o", &c.O, &a.O}, {"ht", &c.Ht, &a.Ht},
		{"checkpoints", &c.Checkpoints, &a.Checkpoints},
	})
	if err == nil {
		err = sequencesAndStates(&c.CuSeqlens, &c.Pool, c.Layout, &a.CuSeqlens, &a.CuSeqlensDevice, &a.Pool, &a.Layout)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// decodeArgs converts a decode call's arguments.
func decodeArgs(c *cDecodeArgs) (*gdn.DecodeArgs, error) {
	a := &gdn.DecodeArgs{
		Scale:  c.Scale,
		L2Norm: c.L2Norm != 0, GateInKernel: c.GateInKernel != 0,
		BetaLogits: c.BetaLogits != 0, NegEigval: c.NegEigval != 0,
	}
	err := convertAll([]namedTensor{
		{"q", &c.Q, &a.Q}, {"k", &c.K, &a.K}, {"v", &c.V, &a.V},
		{"g", &c.G, &a.G}, {"beta", &c.Beta, &a.Beta},
		{"a_log", &c.ALog, &a.ALog}, {"dt_bias", &c.DtBias, &a.DtBias},
		{"o", &c.O, &a.O}, {"token_states", &c.TokenStates, &a.TokenStates},
	})
	if err == nil {
		err = sequencesAndStates(&c.CuSeqlens, &c.Pool, c.Layout, &a.CuSeqlens, &a.CuSeqlensDevice, &a.Pool, &a.Layout)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// options converts gdn_open's options (NULL: the defaults).
func options(c *cOptions) gdn.Options {
	if c == nil {
		return gdn.Options{}
	}
	o := gdn.Options{Device: int(c.Device), SMs: int(c.SMs), NoGraphs: c.NoGraphs != 0}
	if c.CacheDir != nil {
		o.CacheDir = cString(c.CacheDir)
	}
	return o
}

// cString copies a NUL-terminated C string.
func cString(p unsafe.Pointer) string {
	n := 0
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}
