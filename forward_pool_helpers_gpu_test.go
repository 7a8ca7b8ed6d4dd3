//go:build cuda

package gdn_test

import (
	"math"
	"slices"
	"testing"
	"unsafe"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

// The state pool's GPU tests (forward_pool_gpu_test.go) on one helper: a
// pooled prefill uploaded to the device, run, read back and held to
// ref.PoolRecurrent.

// poolSpec is one pooled prefill.
type poolSpec struct {
	shape  ref.Shape
	full   *fullCase // the full forward of this case's options (its shape is shape); nil: the core forward
	layout gdn.StateLayout
	bf16   bool // a bf16 pool (else fp32)
	S      int  // slots
	slots  []int
	every  int // checkpoint_every (0: none)
}

// pooledCall is a poolSpec on the device.
type pooledCall struct {
	r        *gdn.Runtime
	spec     poolSpec
	in       ref.Inputs
	fo       ref.FullOptions
	core     *gdn.DeviceCoreArgs // the core forward's buffers (nil for the full forward)
	full     *gdn.DeviceFullArgs // or the full forward's
	states0  []float64           // the drawn states, N(0, 1), [S, Hv, 128, 128]
	pool     []float64           // the pool as uploaded, as the device reads it (NaN in the pattern slots)
	bits     []uint32            // the pool's bits as uploaded (bf16: one element per word)
	states   driver.DevicePtr
	slotsDev driver.DevicePtr
	ckpt     driver.DevicePtr // checkpoints (spec.every), rows of them
	rows     int
	gotCkpt  []uint32 // the checkpoints the last run wrote (bf16: one element per word)
}

// newPooledCall draws the inputs (seed) and a pool whose named slots hold
// N(0, 1) states (rounded to bf16 for a bf16 pool) and whose other slots
// hold a pattern with NaNs, and uploads it all.
func newPooledCall(t *testing.T, r *gdn.Runtime, spec poolSpec, seed uint64) *pooledCall {
	t.Helper()
	c := &pooledCall{r: r, spec: spec}
	s := spec.shape
	var err error
	if spec.full != nil {
		fc := *spec.full
		fc.shape, fc.opts.WithH0 = s, false
		var h *gdn.HostFullArgs
		c.in, c.fo, h = fullCaseInputs(t, fc, seed)
		h.FinalState = false
		if c.full, err = r.UploadFull(h); err != nil {
			t.Fatal(err)
		}
	} else {
		if c.in, err = ref.Recipe(s, seed, ref.RecipeOptions{}); err != nil {
			t.Fatal(err)
		}
		gcum, _ := ref.ChunkCumsum(s, c.in.G)
		A, _ := ref.SolveA(s, c.in.K, c.in.Beta, gcum)
		c.core, err = r.UploadCore(&gdn.HostCoreArgs{B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: gdn.BF16,
			Q: f32(c.in.Q), K: f32(c.in.K), V: f32(c.in.V), G: f32(gcum), Beta: f32(c.in.Beta), A: f32(A)})
		if err != nil {
			t.Fatal(err)
		}
	}
	h0, err := ref.Recipe(ref.Shape{B: spec.S, T: 1, Hq: 1, Hv: s.Hv}, seed+1, ref.RecipeOptions{WithH0: true})
	if err != nil {
		t.Fatal(err)
	}
	c.states0 = h0.H0
	c.fill()
	c.upload(t)
	if spec.every > 0 {
		starts, err := ref.CheckpointStarts(s, spec.every)
		if err != nil {
			t.Fatal(err)
		}
		c.rows = starts[len(starts)-1]
		if c.ckpt, err = tuning.Context(r).Alloc(max(1, c.rows*s.Hv*gdn.HeadDim*gdn.HeadDim*c.stateSize())); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// stateSize is the bytes of one element of the call's states.
func (c *pooledCall) stateSize() int {
	if c.spec.bf16 {
		return 2
	}
	return 4
}

// checkpoints is the call's checkpoint buffer.
func (c *pooledCall) checkpoints() gdn.Tensor {
	dt := gdn.FP32
	if c.spec.bf16 {
		dt = gdn.BF16
	}
	n := c.rows * c.spec.shape.Hv * gdn.HeadDim * gdn.HeadDim
	return gdn.Tensor{Ptr: uintptr(c.ckpt), Bytes: max(1, n*c.stateSize()), Dtype: dt, Shape: []int{c.rows, c.spec.shape.Hv, gdn.HeadDim, gdn.HeadDim}}
}

// fill sets the pool's values for the slots of c.spec.slots: the drawn
// states in the named slots (rounded to bf16 for a bf16 pool), a pattern
// with NaNs in the others.
func (c *pooledCall) fill() {
	c.pool = slices.Clone(c.states0)
	if c.spec.bf16 {
		c.pool = ref.QuantizeBF16(c.pool)
	}
	c.bits = make([]uint32, len(c.pool))
	per := c.spec.shape.Hv * gdn.HeadDim * gdn.HeadDim
	for i, x := range c.pool {
		if !slices.Contains(c.spec.slots, i/per) {
			c.bits[i] = uint32(i) * 2654435761
			if i%7 == 0 {
				c.bits[i] = 0x7fc00000 | uint32(i)&0xffff // NaN, in bf16 too
			}
			if c.spec.bf16 {
				c.bits[i] &= 0xffff0000
			}
			c.pool[i] = float64(math.Float32frombits(c.bits[i]))
			continue
		}
		c.bits[i] = math.Float32bits(float32(x))
	}
}

// argsForPlan is the core call's arguments with its pool (for PlanOf).
func (c *pooledCall) argsForPlan() *gdn.CoreArgs {
	a := *c.core.Args
	a.Pool, a.Layout = c.statePool(), c.spec.layout
	return &a
}

// upload writes the pool (from c.bits) and the slot table to the device,
// allocating them on the first call.
func (c *pooledCall) upload(t *testing.T) {
	t.Helper()
	ctx := tuning.Context(c.r)
	raw, size := c.rawPool()
	var err error
	if c.states == 0 {
		if c.states, err = ctx.Alloc(size); err != nil {
			t.Fatal(err)
		}
		if c.slotsDev, err = ctx.Alloc(4 * len(c.spec.slots)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ctx.CopyToDevice(c.states, raw, size); err != nil {
		t.Fatal(err)
	}
	table := make([]int32, len(c.spec.slots))
	for i, x := range c.spec.slots {
		table[i] = int32(x)
	}
	if err := ctx.CopyToDevice(c.slotsDev, unsafe.Pointer(&table[0]), 4*len(table)); err != nil {
		t.Fatal(err)
	}
}

// rawPool is the pool's bytes in its dtype.
func (c *pooledCall) rawPool() (unsafe.Pointer, int) {
	if !c.spec.bf16 {
		return unsafe.Pointer(&c.bits[0]), 4 * len(c.bits)
	}
	b := make([]uint16, len(c.bits))
	for i, x := range c.bits {
		b[i] = uint16(x >> 16)
	}
	return unsafe.Pointer(&b[0]), 2 * len(b)
}

// statePool is the pool as the call's argument.
func (c *pooledCall) statePool() gdn.StatePool {
	dt, size := gdn.FP32, 4
	if c.spec.bf16 {
		dt, size = gdn.BF16, 2
	}
	n := len(c.spec.slots)
	return gdn.StatePool{
		States: gdn.Tensor{Ptr: uintptr(c.states), Bytes: size * len(c.bits), Dtype: dt,
			Shape: []int{c.spec.S, c.spec.shape.Hv, gdn.HeadDim, gdn.HeadDim}},
		Slots:       c.spec.slots,
		SlotsDevice: gdn.Tensor{Ptr: uintptr(c.slotsDev), Bytes: 4 * n, Dtype: gdn.Int32, Shape: []int{n}},
	}
}

// run poisons o, runs the call on s and returns o and the pool as read back
// (its bits, one element per word).
func (c *pooledCall) run(t *testing.T, s *driver.Stream) (o []float32, pool []uint32) {
	t.Helper()
	ctx := tuning.Context(c.r)
	var err error
	ckN := c.rows * c.spec.shape.Hv * gdn.HeadDim * gdn.HeadDim
	if c.spec.every > 0 && ckN > 0 { // poisoned: NaN
		if c.spec.bf16 {
			err = ctx.MemsetD16(c.ckpt, 0x7fc0, ckN, nil)
		} else {
			err = ctx.MemsetD32(c.ckpt, 0x7fc00000, ckN, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if c.full != nil {
		a := *c.full.Args
		a.Pool, a.Layout = c.statePool(), c.spec.layout
		if c.spec.every > 0 {
			a.CheckpointEvery, a.Checkpoints = c.spec.every, c.checkpoints()
		}
		if err = ctx.MemsetD16(driverPtr(a.O.Ptr), 0x7fff, a.O.Elems(), nil); err == nil {
			err = c.r.ForwardFull(&a, gdn.Stream(s.Handle()))
		}
	} else {
		a := *c.core.Args
		a.Pool, a.Layout = c.statePool(), c.spec.layout
		if c.spec.every > 0 {
			a.CheckpointEvery, a.Checkpoints = c.spec.every, c.checkpoints()
		}
		if err = ctx.MemsetD16(driverPtr(a.O.Ptr), 0x7fff, a.O.Elems(), nil); err == nil {
			err = c.r.Forward(&a, gdn.Stream(s.Handle()))
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	var res *gdn.HostCoreResult
	if c.full != nil {
		res, err = c.full.Download()
	} else {
		res, err = c.core.Download()
	}
	if err != nil {
		t.Fatal(err)
	}
	pool = c.readStates(t, c.states, len(c.bits))
	if ckN > 0 {
		c.gotCkpt = c.readStates(t, c.ckpt, ckN)
	}
	return res.O, pool
}

// readStates reads n elements of the call's state dtype at p, one a word
// (bf16 in the high half).
func (c *pooledCall) readStates(t *testing.T, p driver.DevicePtr, n int) []uint32 {
	t.Helper()
	ctx := tuning.Context(c.r)
	out := make([]uint32, n)
	var err error
	if c.spec.bf16 {
		b := make([]uint16, n)
		err = ctx.CopyToHost(unsafe.Pointer(&b[0]), p, 2*n)
		for i, x := range b {
			out[i] = uint32(x) << 16
		}
	} else {
		err = ctx.CopyToHost(unsafe.Pointer(&out[0]), p, 4*n)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// check holds o and the named slots to ref.PoolRecurrent (o and ht lines;
// a bf16 pool's elements within 2^-8 |s| + the ht max line of the float64
// s before rounding) and every other slot to its bits as uploaded.
func (c *pooledCall) check(t *testing.T, o []float32, pool []uint32) (eo, es ref.Errors) {
	t.Helper()
	want, err := ref.PoolRecurrent(c.in, c.pool, c.spec.slots, ref.PoolOptions{Layout: ref.StateLayout(c.spec.layout), Full: c.fo,
		CheckpointEvery: c.spec.every})
	if err != nil {
		t.Fatal(err)
	}
	if c.spec.every > 0 {
		c.checkCheckpoints(t, want.Checkpoints, pool)
	}
	eo = ref.Compare32(o, want.O)
	if err := eo.Within(ref.PassO); err != nil {
		t.Errorf("o: %v", err)
	}
	per := c.spec.shape.Hv * gdn.HeadDim * gdn.HeadDim
	var got []float32
	var ws []float64
	for n, slot := range c.spec.slots {
		if slot < 0 {
			continue
		}
		for i := slot * per; i < (slot+1)*per; i++ {
			g, w := math.Float32frombits(pool[i]), want.Pool[i]
			if c.spec.bf16 && !(math.Abs(float64(g)-w) <= math.Abs(w)/256+ref.PassHt.MaxAbs) {
				t.Fatalf("sequence %d's slot %d, element %d: %v, want %v within half a bf16 ulp + %v", n, slot, i-slot*per, g, w, ref.PassHt.MaxAbs)
			}
			got, ws = append(got, g), append(ws, w)
		}
	}
	if !c.spec.bf16 && len(ws) > 0 {
		es = ref.Compare32(got, ws)
		if err := es.Within(ref.PassHt); err != nil {
			t.Errorf("slots: %v", err)
		}
	}
	for i, b := range pool {
		if !slices.Contains(c.spec.slots, i/per) && b != c.bits[i] {
			t.Fatalf("slot %d named by no sequence: element %d is %#x, was %#x", i/per, i%per, b, c.bits[i])
		}
	}
	return eo, es
}

// checkCheckpoints holds the checkpoints to ref's (the checkpoint line; a
// bf16 pool's per element as its slots) and the last checkpoint of each
// sequence whose length is a multiple of E to its slot, bit for bit.
func (c *pooledCall) checkCheckpoints(t *testing.T, want []float64, pool []uint32) {
	t.Helper()
	got := make([]float32, len(c.gotCkpt))
	for i, b := range c.gotCkpt {
		got[i] = math.Float32frombits(b)
		if c.spec.bf16 && !(math.Abs(float64(got[i])-want[i]) <= math.Abs(want[i])/256+ref.PassHt.MaxAbs) {
			t.Fatalf("checkpoint element %d: %v, want %v within half a bf16 ulp + %v", i, got[i], want[i], ref.PassHt.MaxAbs)
		}
	}
	if e := ref.Compare32(got, want); !c.spec.bf16 {
		if err := e.Within(ref.PassHt); err != nil {
			t.Errorf("checkpoints: %v", err)
		}
		t.Logf("checkpoints %v (%d rows)", e, c.rows)
	}
	starts, _ := ref.CheckpointStarts(c.spec.shape, c.spec.every)
	per := c.spec.shape.Hv * gdn.HeadDim * gdn.HeadDim
	for n, se := range c.spec.shape.Seqs() {
		l := se[1] - se[0]
		if l == 0 || l%c.spec.every != 0 || c.spec.slots[n] < 0 {
			continue
		}
		row, slot := starts[n+1]-1, c.spec.slots[n]
		if !equalBits(c.gotCkpt[row*per:(row+1)*per], pool[slot*per:(slot+1)*per]) {
			t.Errorf("sequence %d of %d tokens: its last checkpoint (row %d) is not its final state (slot %d) bit for bit", n, l, row, slot)
		}
	}
}

// free releases the call's device memory.
func (c *pooledCall) free() {
	ctx := tuning.Context(c.r)
	ctx.Free(c.states)
	ctx.Free(c.slotsDev)
	if c.ckpt != 0 {
		ctx.Free(c.ckpt)
	}
	if c.core != nil {
		c.core.Free()
	}
	if c.full != nil {
		c.full.Free()
	}
}
