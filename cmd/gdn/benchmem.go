package main

import (
	"math"
	"math/rand/v2"
	"unsafe"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/dtype"
)

// benchMem is the device memory of one serving benchmark case (decode,
// mixed), its inputs drawn on the host as the recipe draws them and
// uploaded, freed at the case's end.
type benchMem struct {
	ctx  *driver.Context
	r    *rand.Rand
	bufs []driver.DevicePtr
}

func newBenchMem(ctx *driver.Context, seed, stream uint64) *benchMem {
	return &benchMem{ctx: ctx, r: rand.New(rand.NewPCG(seed, stream))}
}

func (m *benchMem) free() {
	for _, p := range m.bufs {
		_ = m.ctx.Free(p)
	}
}

func (m *benchMem) alloc(bytes int) (driver.DevicePtr, error) {
	p, err := m.ctx.Alloc(bytes)
	if err == nil {
		m.bufs = append(m.bufs, p)
	}
	return p, err
}

// upload copies host into a new buffer described as dt of the shape given.
func (m *benchMem) upload(host []byte, dt gdn.Dtype, shape ...int) (gdn.Tensor, error) {
	p, err := m.alloc(len(host))
	if err != nil {
		return gdn.Tensor{}, err
	}
	return gdn.Tensor{Ptr: uintptr(p), Bytes: len(host), Dtype: dt, Shape: shape}, m.ctx.CopyToDevice(p, unsafe.Pointer(&host[0]), len(host))
}

func (m *benchMem) bf16s(n int, f func() float64) []byte {
	b := make([]byte, 2*n)
	for i := range n {
		h := dtype.RoundBF16(float32(f()))
		b[2*i], b[2*i+1] = byte(h), byte(h>>8)
	}
	return b
}

func (m *benchMem) f32s(n int, f func() float64) []byte {
	b := make([]byte, 4*n)
	for i := range n {
		u := math.Float32bits(float32(f()))
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return b
}

func int32s(x []int) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	return b
}

// benchTokens are tok tokens' inputs and output, as [1, tok, H, 128]
// (q and k drawn N(0,1) for the L2 norm inside, v N(0,1), g the recipe's
// log-gate, beta its sigmoid, all of bf16 but g and beta) and the rows of
// o, poisoned.
type benchTokens struct {
	Q, K, V, G, Beta, O gdn.Tensor
	hq, hv              int
}

func (m *benchMem) tokens(tok, hq, hv int) (benchTokens, error) {
	in := benchTokens{hq: hq, hv: hv}
	r := m.r
	var err error
	for _, x := range []struct {
		t     *gdn.Tensor
		data  []byte
		dt    gdn.Dtype
		heads int
	}{
		{&in.Q, m.bf16s(tok*hq*gdn.HeadDim, r.NormFloat64), gdn.BF16, hq},
		{&in.K, m.bf16s(tok*hq*gdn.HeadDim, r.NormFloat64), gdn.BF16, hq},
		{&in.V, m.bf16s(tok*hv*gdn.HeadDim, r.NormFloat64), gdn.BF16, hv},
		{&in.G, m.f32s(tok*hv, func() float64 { return -math.Log1p(math.Exp(-r.NormFloat64())) / 16 }), gdn.FP32, hv},
		{&in.Beta, m.f32s(tok*hv, func() float64 { return 1 / (1 + math.Exp(-r.NormFloat64())) }), gdn.FP32, hv},
		{&in.O, m.bf16s(tok*hv*gdn.HeadDim, func() float64 { return math.NaN() }), gdn.BF16, hv},
	} {
		shape := []int{1, tok, x.heads, gdn.HeadDim}
		if x.dt == gdn.FP32 {
			shape = shape[:3]
		}
		if *x.t, err = m.upload(x.data, x.dt, shape...); err != nil {
			return in, err
		}
	}
	return in, nil
}

// rows is tokens [from, from+n) of in, as [b, t, H, 128] (b*t = n).
func (in benchTokens) rows(from, b, t int) benchTokens {
	view := func(x gdn.Tensor, heads int) gdn.Tensor {
		row := x.Bytes / x.Shape[1]
		shape := []int{b, t, heads, gdn.HeadDim}
		if len(x.Shape) == 3 {
			shape = shape[:3]
		}
		return gdn.Tensor{Ptr: x.Ptr + uintptr(from*row), Bytes: b * t * row, Dtype: x.Dtype, Shape: shape}
	}
	return benchTokens{Q: view(in.Q, in.hq), K: view(in.K, in.hq), V: view(in.V, in.hv), G: view(in.G, in.hv),
		Beta: view(in.Beta, in.hv), O: view(in.O, in.hv), hq: in.hq, hv: in.hv}
}

// decodeArgs is a decode call of n sequences of t tokens on in's rows.
func (in benchTokens) decodeArgs(n, t int) gdn.DecodeArgs {
	v := in.rows(0, n, t)
	return gdn.DecodeArgs{Q: v.Q, K: v.K, V: v.V, G: v.G, Beta: v.Beta, O: v.O}
}

// pool uploads a pool of numSlots slots of hv states drawn N(0, 1) (tiled
// from one drawn block: the values do not change the time, drawing 2 GB
// would) and the slot table slots.
func (m *benchMem) pool(numSlots, hv int, dt gdn.Dtype, slots []int) (gdn.StatePool, error) {
	bytes := numSlots * hv * gdn.HeadDim * gdn.HeadDim * dt.Size()
	p, err := m.alloc(bytes)
	if err != nil {
		return gdn.StatePool{}, err
	}
	block := m.f32s(1<<20, m.r.NormFloat64)
	if dt == gdn.BF16 {
		block = m.bf16s(1<<21, m.r.NormFloat64)
	}
	for off := 0; off < bytes; off += len(block) {
		if err := m.ctx.CopyToDevice(p.Offset(off), unsafe.Pointer(&block[0]), min(len(block), bytes-off)); err != nil {
			return gdn.StatePool{}, err
		}
	}
	sp := gdn.StatePool{States: gdn.Tensor{Ptr: uintptr(p), Bytes: bytes, Dtype: dt, Shape: []int{numSlots, hv, gdn.HeadDim, gdn.HeadDim}}, Slots: slots}
	sp.SlotsDevice, err = m.upload(int32s(slots), gdn.Int32, len(slots))
	return sp, err
}

// nonFiniteBF16 counts the NaN and Inf of a bf16 tensor (after the
// device's work so far).
func (m *benchMem) nonFiniteBF16(t gdn.Tensor) (int, error) {
	out := make([]uint16, t.Elems())
	if err := m.ctx.CopyToHost(unsafe.Pointer(&out[0]), driver.DevicePtr(t.Ptr), 2*len(out)); err != nil {
		return 0, err
	}
	n := 0
	for _, h := range out {
		if x := dtype.BF16ToFloat32(h); math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			n++
		}
	}
	return n, nil
}
