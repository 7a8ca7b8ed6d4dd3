package launch

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/problem/problemtest"
	"github.com/gdnjit/gdn/kernsrc"
)

// withPool moves a's states into a pool of s slots (B sequences of a).
func withPool(a *problem.Core, s int, slots []int, dt dtype.Dtype) {
	hv := a.V.Shape[2]
	a.H0, a.Ht = problem.Tensor{}, problem.Tensor{}
	st := problem.Tensor{Ptr: 1 << 41, Dtype: dt, Shape: []int{s, hv, 128, 128}}
	st.Bytes = st.Elems() * dt.Size()
	a.Pool = problem.Pool{States: st, Slots: slots,
		SlotsDevice: problem.Tensor{Ptr: 1 << 42, Bytes: 4 * len(slots), Dtype: dtype.Int32, Shape: []int{len(slots)}}}
}

// servingFields reads back the serving layer's part of a packed block.
func servingFields(b *[kernsrc.HopperParamsBytes]byte) (poolSlots int32, slots uintptr) {
	return int32(binary.LittleEndian.Uint32(b[kernsrc.HopperOffScalars+4+4*6:])), uintptr(binary.LittleEndian.Uint64(b[kernsrc.HopperOffState:]))
}

// A pooled call runs the states variant of its plan's kernel with the pool
// in h0 and ht, the table and the format in its block; the slot values are
// data: a call with other slots finds the same prepared call, without
// allocating, while another pool or layout is another call.
func TestPooledCallKey(t *testing.T) {
	c, _ := hostPath()
	a := problemtest.Core(3, 200, 2, 4)
	withPool(a, 8, []int{5, -1, 2}, dtype.BF16)
	a.Layout = problem.LayoutVK
	e, err := c.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	c.release(e)
	if !strings.HasSuffix(e.plan.Variant.Name, "_states") {
		t.Errorf("pooled call runs %s, want a states variant", e.plan.Variant.Name)
	}
	bf := readBlock(&e.block)
	want := int32(kernsrc.HopperFlagPoolSlots | kernsrc.HopperFlagPoolBF16 | kernsrc.HopperFlagStateVK)
	if bf.h0 != a.Pool.States.Ptr || bf.ht != a.Pool.States.Ptr || bf.flags&kernsrc.HopperStateFlags != want {
		t.Errorf("block %+v, want the pool in h0 and ht, flags %#x", bf, want)
	}
	if s, p := servingFields(&e.block); s != 8 || p != a.Pool.SlotsDevice.Ptr {
		t.Errorf("block's pool slots %d, table %#x", s, p)
	}
	a.Pool.Slots = []int{-1, 7, 0}
	e2, err := c.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	c.release(e2)
	if e2 != e || c.len() != 1 {
		t.Errorf("other slot values prepared another call (%d cached)", c.len())
	}
	a.Pool.Slots[0], a.Pool.Slots[2] = 4, 1
	if n := testing.AllocsPerRun(100, func() {
		if err := hostPathCall(c, a); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocs per repeated pooled call", n)
	}
	for _, edit := range []func(){
		func() { a.Pool.States.Ptr += 1 << 30 },
		func() { a.Layout = problem.LayoutKV },
		func() { a.Pool.States.Dtype, a.Pool.States.Bytes = dtype.FP32, 2*a.Pool.States.Bytes },
	} {
		edit()
		e3, err := c.prepare(a)
		if err != nil {
			t.Fatal(err)
		}
		c.release(e3)
		if e3 == e {
			t.Errorf("another pool or layout found the same prepared call (%+v)", readBlock(&e3.block))
		}
		e = e3
	}
	// Without a pool and in [K,V], today's kernel and block.
	b := problemtest.Core(3, 200, 2, 4)
	e4, err := c.prepare(b)
	if err != nil {
		t.Fatal(err)
	}
	c.release(e4)
	if strings.HasSuffix(e4.plan.Variant.Name, "_states") || readBlock(&e4.block).flags&kernsrc.HopperStateFlags != 0 {
		t.Errorf("plain call: %s, flags %#x", e4.plan.Variant.Name, readBlock(&e4.block).flags)
	}
	b.Layout = problem.LayoutVK
	if e5, err := c.prepare(b); err != nil || !strings.HasSuffix(e5.plan.Variant.Name, "_states") ||
		readBlock(&e5.block).flags&kernsrc.HopperStateFlags != kernsrc.HopperFlagStateVK {
		t.Errorf("[V,K] h0 and ht: %v", err)
	} else {
		c.release(e5)
	}
}

// The passes of a pooled split call: the transfer pass reads no state and
// writes its own; the output pass starts from its own (the scan's) and
// writes the pool; an early pass reads the pool and writes its own.
func TestPooledSplitCall(t *testing.T) {
	for _, early := range []int{0, 1} {
		c, _ := splitHostPath(2)
		c.knobs.EarlyFirstSegment = early
		a := problemtest.Core(3, 1000, 2, 4)
		withPool(a, 5, []int{4, -1, 0}, dtype.FP32)
		a.Layout = problem.LayoutVK
		e, err := c.prepare(a)
		if err != nil {
			t.Fatal(err)
		}
		sc := e.split
		if sc == nil || sc.plan.Early != (early == 1) || !strings.HasSuffix(e.plan.Variant.Name, "_states") || strings.HasSuffix(sc.xferVariant.Name, "_states") {
			t.Fatalf("early %d: plan %v (%s), transfer %s", early, e.plan, e.plan.Variant.Name, sc.xferVariant.Name)
		}
		caller := int32(kernsrc.HopperFlagPoolSlots | kernsrc.HopperFlagStateVK)
		tr := readBlock(&sc.transfer.block)
		if tr.h0 != 0 || tr.flags&kernsrc.HopperStateFlags != 0 {
			t.Errorf("early %d: transfer block %+v", early, tr)
		}
		out := readBlock(&sc.output.block)
		if out.ht != a.Pool.States.Ptr || out.flags&kernsrc.HopperStateFlags != caller || out.flags&kernsrc.HopperFlagH0Own == 0 ||
			out.flags&kernsrc.HopperFlagHtOwn != 0 || out.nHt != 3 {
			t.Errorf("early %d: output block %+v", early, out)
		}
		if s, p := servingFields(&sc.output.block); s != 5 || p != a.Pool.SlotsDevice.Ptr {
			t.Errorf("early %d: output pass's pool slots %d, table %#x", early, s, p)
		}
		// The scan starts from the pool (a states variant) unless the early
		// pass's end states are its start.
		if strings.HasSuffix(sc.scanVariant.Name, "_states") != (early == 0) {
			t.Errorf("early %d: scan %s", early, sc.scanVariant.Name)
		}
		if early == 1 {
			ea := readBlock(&sc.early.block)
			if ea.h0 != a.Pool.States.Ptr || ea.flags&kernsrc.HopperStateFlags != caller || ea.flags&kernsrc.HopperFlagHtOwn == 0 ||
				ea.flags&kernsrc.HopperFlagH0Own != 0 {
				t.Errorf("early block %+v", ea)
			}
		}
		c.release(e)
		closeAll(c)
	}
}

// Checkpoints: an unsplit call's block carries the buffer, the interval in
// chunks and the rows (no per-row table: the kernel sums its rows from
// cu_seqlens); a split call's output and early passes get a base per row,
// start*ck + c0, uploaded after the segment tables.
func TestCheckpointCalls(t *testing.T) {
	a := problemtest.Core(1, 757, 1, 2)
	a.H0, a.Ht = problem.Tensor{}, problem.Tensor{}
	a.CuSeqlens = []int{0, 300, 557, 757}
	a.CuSeqlensDevice = problem.Tensor{Ptr: 1 << 40, Bytes: 16, Dtype: dtype.Int32, Shape: []int{4}}
	a.CheckpointEvery = 128
	a.Checkpoints = problem.Tensor{Ptr: 1 << 43, Bytes: 5 * 2 * 128 * 128 * 4, Dtype: dtype.FP32, Shape: []int{5, 2, 128, 128}}
	c, _ := hostPath()
	e, err := c.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	c.release(e)
	ck := func(b *[kernsrc.HopperParamsBytes]byte) (chunks, rows int32, buf, table uintptr) {
		i32 := func(i int) int32 { return int32(binary.LittleEndian.Uint32(b[kernsrc.HopperOffScalars+4+4*i:])) }
		ptr := func(i int) uintptr { return uintptr(binary.LittleEndian.Uint64(b[kernsrc.HopperOffState+8*i:])) }
		return i32(7), i32(8), ptr(1), ptr(2)
	}
	if ch, rows, buf, table := ck(&e.block); ch != 2 || rows != 5 || buf != a.Checkpoints.Ptr || table != 0 ||
		!strings.HasSuffix(e.plan.Variant.Name, "_states") {
		t.Errorf("unsplit: %d chunks, %d rows, buffer %#x, table %#x, %s", ch, rows, buf, table, e.plan.Variant.Name)
	}

	// Sequences of 300, 257 and 200 tokens, 128-token segments: starts 0,
	// 2, 4 (of 5 rows); ck = 2.
	p, err := problem.ValidateCore(a)
	if err != nil {
		t.Fatal(err)
	}
	output, _, _, firsts, _ := plan.SegmentTables(p, 2, true)
	if got, want := ckptBases(p, output), []int32{4, 8, 10, 2, 6}; !slices.Equal(got, want) {
		t.Errorf("early plan's output bases %v, want %v (pairs %v)", got, want, output)
	}
	if got, want := ckptBases(p, firsts), []int32{0, 4, 8}; !slices.Equal(got, want) {
		t.Errorf("early bases %v, want %v", got, want)
	}
	output, _, _, _, _ = plan.SegmentTables(p, 2, false)
	if got, want := ckptBases(p, output), []int32{4, 8, 10, 0, 2, 4, 6, 8}; !slices.Equal(got, want) {
		t.Errorf("output bases %v, want %v (pairs %v)", got, want, output)
	}
	for _, early := range []int{0, 1} {
		sc, _ := splitHostPath(2)
		sc.knobs.EarlyFirstSegment = early
		e, err := sc.prepare(a)
		if err != nil {
			t.Fatal(err)
		}
		blocks := []*[kernsrc.HopperParamsBytes]byte{&e.split.output.block}
		if early == 1 {
			blocks = append(blocks, &e.split.early.block)
		}
		for _, b := range blocks {
			if ch, rows, buf, table := ck(b); ch != 2 || rows != 5 || buf != a.Checkpoints.Ptr || table <= uintptr(e.split.lease.Table()) {
				t.Errorf("early %d: pass with %d chunks, %d rows, buffer %#x, table %#x", early, ch, rows, buf, table)
			}
		}
		if ch, _, buf, _ := ck(&e.split.transfer.block); ch != 0 || buf != 0 {
			t.Errorf("early %d: the transfer pass keeps checkpoints", early)
		}
		sc.release(e)
		closeAll(sc)
	}
}
