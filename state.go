package gdn

import "github.com/gdnjit/gdn/internal/problem"

// StateLayout is how a call's 128 x 128 states lie in memory: h0, ht, a
// pool, checkpoints and per-token states alike (docs/SPEC.md, "State
// layout"). The kernels read and write either directly; the same call in
// the other layout gives the same o, bit for bit, and states that are the
// exact transposes. (An alias of the layers' own type, as Dtype is, so
// that a call's layout reaches validation and the kernels unconverted; its
// String gives "[K,V]" or "[V,K]".)
type StateLayout = problem.Layout

const (
	// StateKV puts entry (k, v) at k*128 + v: FLA's default, and gdn's.
	StateKV = problem.LayoutKV
	// StateVK puts entry (k, v) at v*128 + k: FLA's state_v_first,
	// FlashInfer's.
	StateVK = problem.LayoutVK
)

// StatePool is a serving engine's cache of states and the slot table of
// one call (docs/SPEC.md, "State pool"). Sequence n starts from
// States[Slots[n]] and its final state is written back there, in place; a
// negative slot starts from zero and writes nothing. The written slots of
// one call must be distinct; slots the table does not name are untouched.
//
//	States       [S, Hv, 128, 128] FP32 or BF16 (a bf16 state is widened
//	             as read and rounded to nearest even once as written)
//	Slots        one int per sequence, on the host (validated)
//	SlotsDevice  the same values, Int32 [N], in device memory (read by
//	             the kernels; the caller keeps the two equal)
//
// The table is data, not part of a prepared call's key: changing it
// between calls keeps the Runtime's plans and graphs.
type StatePool struct {
	States      Tensor
	Slots       []int
	SlotsDevice Tensor
}

// Present reports whether any part of the pool is given.
func (p StatePool) Present() bool { return p.pool().Given() }

// pool is p as the layers below see it.
func (p StatePool) pool() problem.Pool {
	return problem.Pool{States: problem.Tensor(p.States), Slots: p.Slots, SlotsDevice: problem.Tensor(p.SlotsDevice)}
}
