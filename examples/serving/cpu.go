package main

import (
	"fmt"

	"github.com/gdnjit/gdn/ref"
)

// cpuBackend runs the calls in float64 with package ref: the loop's
// scheduling (prompts in chunks continuing from their slots, decode from
// the pool, slots reused) checked without a GPU. Its pool holds the
// states exactly, so a check fails only if the loop ran a request's
// tokens wrongly: skipped, repeated, out of order or from another slot.
type cpuBackend struct {
	c    config
	lay  layer
	pool []float64 // [Slots, Hv, 128, 128]
	o    []float64 // the last call's o
}

func newCPUBackend(c config) *cpuBackend {
	return &cpuBackend{c: c, lay: newLayer(c), pool: make([]float64, c.Slots*c.Hv*ref.D*ref.D)}
}

func (b *cpuBackend) stateLen() int { return b.c.Hv * ref.D * ref.D }

func (b *cpuBackend) clearSlot(slot int) error {
	clear(b.pool[slot*b.stateLen():][:b.stateLen()])
	return nil
}

// run is one pooled call of the batch's sequences.
func (b *cpuBackend) run(bt *batch, decode bool) error {
	in := ref.Inputs{Shape: ref.Shape{B: 1, T: bt.tokens(), Hq: b.c.Hq, Hv: b.c.Hv, CuSeqlens: bt.cu},
		Q: appendF64(nil, bt.q), K: appendF64(nil, bt.k), V: appendF64(nil, bt.v), G: appendF64(nil, bt.a), Beta: appendF64(nil, bt.beta)}
	opts := ref.PoolOptions{Full: ref.FullOptions{L2Norm: true, ALog: appendF64(nil, b.lay.aLog), DtBias: appendF64(nil, b.lay.dtBias)}}
	call := ref.PoolRecurrent
	if decode {
		call = ref.Decode
	}
	res, err := call(in, b.pool, bt.slots, opts)
	if err != nil {
		return err
	}
	b.pool, b.o = res.Pool, res.O
	return nil
}

func (b *cpuBackend) prefill(bt *batch) error { return b.run(bt, false) }

func (b *cpuBackend) decode(bt *batch) error { return b.run(bt, true) }

func (b *cpuBackend) slotState(slot int) ([]float32, error) {
	return ref.Float32s(b.pool[slot*b.stateLen():][:b.stateLen()]), nil
}

func (b *cpuBackend) lastO(i int) ([]float32, error) {
	n := b.c.Hv * ref.D
	if (i+1)*n > len(b.o) {
		return nil, fmt.Errorf("row %d of o: the last call had %d rows", i, len(b.o)/n)
	}
	return ref.Float32s(b.o[i*n:][:n]), nil
}

func (b *cpuBackend) deviceMs() (float64, float64) { return 0, 0 }
