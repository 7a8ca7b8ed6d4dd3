package problem

import (
	"strconv"
	"sync"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
)

// Layout is how a call's 128 x 128 states lie in memory (docs/SPEC.md,
// "State layout"): h0, ht, a pool, checkpoints and per-token states alike.
type Layout uint8

const (
	// LayoutKV puts entry (k, v) at k*128 + v: FLA's default.
	LayoutKV Layout = iota
	// LayoutVK puts entry (k, v) at v*128 + k: FLA's state_v_first,
	// FlashInfer's.
	LayoutVK
)

func (l Layout) String() string {
	switch l {
	case LayoutKV:
		return "[K,V]"
	case LayoutVK:
		return "[V,K]"
	}
	return "Layout(" + strconv.Itoa(int(l)) + ")"
}

// CheckLayout refuses a layout other than [K,V] and [V,K].
func CheckLayout(l Layout) error {
	if l != LayoutKV && l != LayoutVK {
		return gdnerr.Argf("state_layout", "%v, want [K,V] (0) or [V,K] (1)", l)
	}
	return nil
}

// Pool is a call's state pool and slot table (docs/SPEC.md, "State pool"):
// gdn.StatePool's twin.
type Pool struct {
	States      Tensor // [S, Hv, 128, 128] FP32 or BF16, read and written in place
	Slots       []int  // the host copy of the slot table: one per sequence
	SlotsDevice Tensor // the table the kernels read: Int32 [N]
}

// Given reports whether any part of the pool is given (a part without the
// rest is an error, which CheckPool names).
func (p Pool) Given() bool {
	return p.States.Present() || p.States.Shape != nil || p.Slots != nil || p.SlotsDevice.Present()
}

// PoolInfo is what a validated pool tells the planner and the launches.
type PoolInfo struct {
	S     int         // slots
	Dtype dtype.Dtype // FP32 or BF16
}

// StateBytes is the size of one slot's states: Hv states of 128 x 128.
func (i PoolInfo) StateBytes(hv int) int { return hv * HeadDim * HeadDim * i.Dtype.Size() }

// CheckPool validates a pool for a call of n sequences and hv value heads:
// the states' dtype, shape, alignment and size; the host table's length,
// range and distinct written slots; the device table's dtype and size. It
// allocates nothing unless it fails (the duplicate check borrows a bit set
// from a sync.Pool).
func CheckPool(p Pool, n, hv int) (PoolInfo, error) {
	var info PoolInfo
	st := p.States
	if !st.Present() {
		return info, gdnerr.Argf("pool", "missing: a slot table is given without the pool it indexes")
	}
	if st.Dtype != dtype.FP32 && st.Dtype != dtype.BF16 {
		return info, gdnerr.Argf("pool", "dtype %v, want fp32 or bf16", st.Dtype)
	}
	if len(st.Shape) != 4 || st.Shape[0] < 1 || st.Shape[1] != hv || st.Shape[2] != HeadDim || st.Shape[3] != HeadDim {
		return info, gdnerr.Argf("pool", "shape %v, want [S, %d, %d, %d] with S >= 1", st.Shape, hv, HeadDim, HeadDim)
	}
	if err := checkTensor("pool", st, st.Dtype, shapeOf(st.Shape[0], hv, HeadDim, HeadDim), 16); err != nil {
		return info, err
	}
	info.S, info.Dtype = st.Shape[0], st.Dtype
	if p.Slots == nil {
		return info, gdnerr.Argf("slots", "missing: a pool needs its slot table (the host copy, one slot per sequence)")
	}
	if len(p.Slots) != n {
		return info, gdnerr.Argf("slots", "%d entries for %d sequences: want one per sequence", len(p.Slots), n)
	}
	d := p.SlotsDevice
	if !d.Present() {
		return info, gdnerr.Argf("slots (device)", "missing: the kernels read the table from device memory (int32 [%d])", n)
	}
	if err := checkTensor("slots (device)", d, dtype.Int32, shapeOf(n), 4); err != nil {
		return info, err
	}
	for i, s := range p.Slots {
		if s >= info.S {
			return info, gdnerr.Argf("slots", "sequence %d's slot %d is out of range: the pool has %d slots (negative means none)", i, s, info.S)
		}
	}
	return info, checkDistinct(p.Slots, info.S)
}

// bitsets lends checkDistinct its scratch, so that a call validated again
// and again allocates nothing.
var bitsets = sync.Pool{New: func() any { return new([]uint64) }}

// checkDistinct refuses two sequences writing one slot (0 <= slot < s):
// which state remained would depend on the schedule.
func checkDistinct(slots []int, s int) error {
	if len(slots) < 2 {
		return nil
	}
	bp := bitsets.Get().(*[]uint64)
	defer bitsets.Put(bp)
	words := (s + 63) / 64
	if cap(*bp) < words {
		*bp = make([]uint64, words)
	}
	bits := (*bp)[:words]
	clear(bits)
	for i, x := range slots {
		if x < 0 {
			continue
		}
		w, b := x/64, uint64(1)<<(x%64)
		if bits[w]&b != 0 {
			first := 0
			for slots[first] != x {
				first++
			}
			return gdnerr.Argf("slots", "sequences %d and %d both write slot %d: written slots must be distinct in one call", first, i, x)
		}
		bits[w] |= b
	}
	return nil
}

// poolSpan is the bytes of the pool's states.
func poolSpan(p Pool) span { return spanOf(p.States) }

// checkPoolApart refuses a pool that shares memory with another of the
// call's tensors (the pool is input and output at once: a kernel reading
// an input while another CTA writes a slot there would race). names and
// spans list the others; an empty span is skipped.
func checkPoolApart(p Pool, names []string, spans []span) error {
	ps := poolSpan(p)
	for i, s := range spans {
		if ps.overlaps(s) {
			return gdnerr.Argf("pool", "shares memory with %s (pool [%#x, %#x), %s [%#x, %#x)): the pool must not overlap another tensor",
				names[i], ps.p, ps.p+ps.n, names[i], s.p, s.p+s.n)
		}
	}
	if ts := (span{p.SlotsDevice.Ptr, uintptr(len(p.Slots)) * 4}); ps.overlaps(ts) {
		return gdnerr.Argf("pool", "shares memory with slots (device): the pool must not overlap another tensor")
	}
	return nil
}
