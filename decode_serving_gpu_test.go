//go:build cuda

package gdn_test

import (
	"errors"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

// servingCall is a decode call of four one-token sequences on the device,
// from a pool of eight fp32 slots in [K,V], with its host inputs.
type servingCall struct {
	m     *devMem
	a     *gdn.DecodeArgs
	s     ref.Shape
	in    ref.Inputs
	opts  ref.PoolOptions
	slots []int
}

func newServingCall(t *testing.T, r *gdn.Runtime, seed uint64) *servingCall {
	s := ref.Shape{B: 4, T: 1, Hq: 1, Hv: 2}
	p, err := ref.DecodeRecipe(s, seed, ref.DecodeRecipeOptions{PoolSlots: 8})
	if err != nil {
		t.Fatal(err)
	}
	m := newDevMem(t, r)
	a := uploadDecode(m, decodeInputs{shape: s, in: p.Inputs, pool: p.Pool, slots: p.Slots, opts: p.Options,
		dt: gdn.BF16, betaDt: gdn.FP32, stateDt: gdn.FP32})
	return &servingCall{m: m, a: a, s: s, in: p.Inputs, opts: p.Options, slots: p.Slots}
}

// run calls Decode on stream st (o poisoned first) and holds o and the
// pool to ref.Decode from the pool as it was on the device.
func (c *servingCall) run(t *testing.T, r *gdn.Runtime, st gdn.Stream) {
	t.Helper()
	c.m.poison(c.a.O)
	before := c.m.bits(c.a.Pool.States)
	want, err := ref.Decode(c.in, valuesOf(gdn.FP32, before), c.slots, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Decode(c.a, st); err != nil {
		t.Fatal(err)
	}
	c.check(t, before, want)
}

// check holds the device's o and pool to want; slots the call does not
// name keep the bits they had before it.
func (c *servingCall) check(t *testing.T, before []uint32, want ref.PoolResult) {
	t.Helper()
	if err := c.m.ctx.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := ref.Compare64(valuesOf(gdn.BF16, c.m.bits(c.a.O)), want.O).Within(ref.PassDecodeO); err != nil {
		t.Errorf("o: %v", err)
	}
	after := c.m.bits(c.a.Pool.States)
	per := c.s.Hv * 128 * 128
	named := map[int]bool{}
	for _, x := range c.slots {
		named[x] = true
	}
	for slot := range 8 {
		got := after[slot*per : (slot+1)*per]
		if named[slot] {
			checkStates(t, "slot", valuesOf(gdn.FP32, got), want.Pool[slot*per:(slot+1)*per], false)
			continue
		}
		for i, b := range got {
			if b != before[slot*per+i] {
				t.Fatalf("slot %d, named by no sequence, changed", slot)
			}
		}
	}
}

// A new slot table between two calls on the same buffers is data: the
// second call uses the prepared call of the first and reads and writes
// the new slots.
func TestDecodeNewSlotsSameCall(t *testing.T) {
	r := testRuntime(t)
	c := newServingCall(t, r, 4501)
	c.run(t, r, 0)
	calls := gdn.DecodeCalls(r)
	next := make([]int, len(c.slots))
	for i, x := range c.slots {
		next[i] = (x + 3) % 8
	}
	next[2] = -1
	c.slots, c.a.Pool.Slots = next, next
	table := make([]float64, len(next))
	for i, x := range next {
		table[i] = float64(x)
	}
	c.m.upload(c.a.Pool.SlotsDevice.Ptr, bytesOf(gdn.Int32, table))
	c.run(t, r, 0)
	if got := gdn.DecodeCalls(r); got != calls {
		t.Errorf("%d prepared decode calls after a new slot table, %d before: the table's contents must not be part of the key", got, calls)
	}
	// A repeated call allocates nothing.
	if n := testing.AllocsPerRun(20, func() { _ = r.Decode(c.a, 0) }); n != 0 {
		t.Errorf("a repeated Decode allocates %v times", n)
	}
}

// A decode call captured into the caller's own graph is one kernel node,
// and the graph's replay computes the call.
func TestDecodeInsideCallerGraph(t *testing.T) {
	r := testRuntime(t)
	c := newServingCall(t, r, 4502)
	ctx := tuning.Context(r)
	stream, err := ctx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Destroy()
	st := gdn.Stream(stream.Handle())
	c.run(t, r, st) // loads the kernel and prepares the call outside the capture
	if err := stream.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := r.Decode(c.a, st); err != nil {
		stream.EndCapture()
		t.Fatalf("Decode inside the caller's capture: %v", err)
	}
	graph, err := stream.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer graph.Destroy()
	if nodes, err := graph.KernelNodes(); err != nil || len(nodes) != 1 {
		t.Fatalf("caller's graph has %d kernel nodes (%v), want 1", len(nodes), err)
	}
	exec, err := graph.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Destroy()
	c.m.poison(c.a.O)
	before := c.m.bits(c.a.Pool.States)
	want, err := ref.Decode(c.in, valuesOf(gdn.FP32, before), c.slots, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Launch(stream); err != nil {
		t.Fatal(err)
	}
	if err := stream.Synchronize(); err != nil {
		t.Fatal(err)
	}
	c.check(t, before, want)
}

// Bad input is an error naming the argument, and nothing is written: o
// keeps its poison and the pool its bits.
func TestDecodeBadInputWritesNothing(t *testing.T) {
	r := testRuntime(t)
	c := newServingCall(t, r, 4503)
	pool := c.m.bits(c.a.Pool.States)
	for name, edit := range map[string]func(a *gdn.DecodeArgs){
		"neg_eigval":   func(a *gdn.DecodeArgs) { a.NegEigval = true },
		"slots":        func(a *gdn.DecodeArgs) { a.Pool.Slots = []int{0, 0, 1, 2} },
		"state_layout": func(a *gdn.DecodeArgs) { a.Layout = 5 },
		"pool":         func(a *gdn.DecodeArgs) { a.Pool.States.Dtype = dtype.FP16 },
	} {
		a := *c.a
		edit(&a)
		err := r.Decode(&a, 0)
		var ae *gdn.ArgError
		if !errors.As(err, &ae) || ae.Arg != name || !errors.Is(err, gdn.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for i, b := range c.m.bits(c.a.O) {
		if b != 0x7fff {
			t.Fatalf("o written at %d after refused calls", i)
		}
	}
	for i, b := range c.m.bits(c.a.Pool.States) {
		if b != pool[i] {
			t.Fatalf("pool written at %d after refused calls", i)
		}
	}
}
