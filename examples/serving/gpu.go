package main

import (
	"encoding/binary"
	"math"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/dtype"
)

// gpuBackend runs the calls with gdn on device buffers: an fp32 state pool
// the calls read and update in place, and input buffers sized for the
// largest call, written before each call. Each call is timed with CUDA
// events (Runtime.TimeMs, which waits for it: the next call's inputs are
// written only once the last call is done with them).
type gpuBackend struct {
	rt *gdn.Runtime
	c  config
	s  gdn.Stream

	pool, slots, cu           *gdn.Buffer
	q, k, v, a, beta, o       *gdn.Buffer
	aLog, dtBias              *gdn.Buffer
	bufs                      []*gdn.Buffer
	lastRows                  int
	prefillMsSum, decodeMsSum float64
}

func newGPUBackend(rt *gdn.Runtime, c config) (*gpuBackend, error) {
	b := &gpuBackend{rt: rt, c: c}
	var err error
	if b.s, err = rt.NewStream(); err != nil {
		return nil, err
	}
	tok := max(c.StepTokens, c.Slots)
	alloc := func(dst **gdn.Buffer, bytes int) {
		if err == nil {
			*dst, err = rt.Alloc(bytes)
			if err == nil {
				b.bufs = append(b.bufs, *dst)
			}
		}
	}
	const d = gdn.HeadDim
	alloc(&b.pool, c.Slots*c.Hv*d*d*4)
	alloc(&b.slots, 4*c.Slots)
	alloc(&b.cu, 4*(c.Slots+1))
	alloc(&b.q, 2*tok*c.Hq*d)
	alloc(&b.k, 2*tok*c.Hq*d)
	alloc(&b.v, 2*tok*c.Hv*d)
	alloc(&b.o, 2*tok*c.Hv*d)
	alloc(&b.a, 4*tok*c.Hv)
	alloc(&b.beta, 4*tok*c.Hv)
	alloc(&b.aLog, 4*c.Hv)
	alloc(&b.dtBias, 4*c.Hv)
	if err == nil {
		lay := newLayer(c)
		err = b.aLog.Write(0, f32Bytes(lay.aLog))
		if err == nil {
			err = b.dtBias.Write(0, f32Bytes(lay.dtBias))
		}
	}
	if err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *gpuBackend) close() {
	for _, x := range b.bufs {
		_ = x.Free()
	}
	_ = b.rt.DestroyStream(b.s)
}

func (b *gpuBackend) stateBytes() int { return b.c.Hv * gdn.HeadDim * gdn.HeadDim * 4 }

func (b *gpuBackend) clearSlot(slot int) error {
	return b.pool.Write(slot*b.stateBytes(), make([]byte, b.stateBytes()))
}

// upload writes the batch's tokens, boundaries and slots.
func (b *gpuBackend) upload(bt *batch) error {
	ints := func(x []int) []byte {
		out := make([]byte, 4*len(x))
		for i, v := range x {
			binary.LittleEndian.PutUint32(out[4*i:], uint32(int32(v)))
		}
		return out
	}
	for _, w := range []struct {
		dst  *gdn.Buffer
		data []byte
	}{
		{b.q, bf16Bytes(bt.q)}, {b.k, bf16Bytes(bt.k)}, {b.v, bf16Bytes(bt.v)},
		{b.a, f32Bytes(bt.a)}, {b.beta, f32Bytes(bt.beta)}, {b.cu, ints(bt.cu)}, {b.slots, ints(bt.slots)},
	} {
		if err := w.dst.Write(0, w.data); err != nil {
			return err
		}
	}
	b.lastRows = bt.tokens()
	return nil
}

func (b *gpuBackend) tensors(bt *batch) (q, k, v, a, beta, o gdn.Tensor, pool gdn.StatePool) {
	t, n, c := bt.tokens(), len(bt.reqs), b.c
	const d = gdn.HeadDim
	q, k = b.q.Tensor(gdn.BF16, 1, t, c.Hq, d), b.k.Tensor(gdn.BF16, 1, t, c.Hq, d)
	v, o = b.v.Tensor(gdn.BF16, 1, t, c.Hv, d), b.o.Tensor(gdn.BF16, 1, t, c.Hv, d)
	a, beta = b.a.Tensor(gdn.FP32, 1, t, c.Hv), b.beta.Tensor(gdn.FP32, 1, t, c.Hv)
	pool = gdn.StatePool{States: b.pool.Tensor(gdn.FP32, c.Slots, c.Hv, d, d), Slots: bt.slots, SlotsDevice: b.slots.Tensor(gdn.Int32, n)}
	return
}

// args uploads the batch and describes it as the full forward's
// arguments: from the pool, q and k normalised inside, the gate from its
// raw input.
func (b *gpuBackend) args(bt *batch) (*gdn.FullArgs, error) {
	if err := b.upload(bt); err != nil {
		return nil, err
	}
	q, k, v, a, beta, o, pool := b.tensors(bt)
	return &gdn.FullArgs{Q: q, K: k, V: v, G: a, Beta: beta, O: o, Pool: pool,
		ALog: b.aLog.Tensor(gdn.FP32, b.c.Hv), DtBias: b.dtBias.Tensor(gdn.FP32, b.c.Hv),
		CuSeqlens: bt.cu, CuSeqlensDevice: b.cu.Tensor(gdn.Int32, len(bt.cu)), L2Norm: true, GateInKernel: true}, nil
}

func (b *gpuBackend) prefill(bt *batch) error {
	f, err := b.args(bt)
	if err != nil {
		return err
	}
	ms, err := b.rt.TimeMs(b.s, func() error { return b.rt.ForwardFull(f, b.s) })
	b.prefillMsSum += ms
	return err
}

// decode runs the same arguments through Decode (one token a sequence).
func (b *gpuBackend) decode(bt *batch) error {
	f, err := b.args(bt)
	if err != nil {
		return err
	}
	d := &gdn.DecodeArgs{Q: f.Q, K: f.K, V: f.V, G: f.G, Beta: f.Beta, O: f.O, Pool: f.Pool, ALog: f.ALog, DtBias: f.DtBias,
		CuSeqlens: f.CuSeqlens, CuSeqlensDevice: f.CuSeqlensDevice, L2Norm: f.L2Norm, GateInKernel: f.GateInKernel}
	ms, err := b.rt.TimeMs(b.s, func() error { return b.rt.Decode(d, b.s) })
	b.decodeMsSum += ms
	return err
}

func (b *gpuBackend) slotState(slot int) ([]float32, error) {
	raw := make([]byte, b.stateBytes())
	if err := b.pool.Read(slot*b.stateBytes(), raw); err != nil {
		return nil, err
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out, nil
}

func (b *gpuBackend) lastO(i int) ([]float32, error) {
	n := b.c.Hv * gdn.HeadDim
	raw := make([]byte, 2*n)
	if err := b.o.Read(2*n*i, raw); err != nil {
		return nil, err
	}
	out := make([]float32, n)
	for j := range out {
		out[j] = dtype.BF16ToFloat32(binary.LittleEndian.Uint16(raw[2*j:]))
	}
	return out, nil
}

func (b *gpuBackend) deviceMs() (float64, float64) { return b.prefillMsSum, b.decodeMsSum }

func f32Bytes(x []float32) []byte {
	out := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}

// bf16Bytes packs values that are already bf16 (drawToken rounds them).
func bf16Bytes(x []float32) []byte {
	out := make([]byte, 2*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint16(out[2*i:], dtype.RoundBF16(v))
	}
	return out
}
