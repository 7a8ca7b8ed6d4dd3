package gdn

import "github.com/gdnjit/gdn/internal/gdnerr"

// Forward runs the core forward (g_cumsum and A given) on device buffers,
// enqueued on stream s. Arguments are validated first (errors wrap
// ErrInvalidArgument and name the argument); nothing is launched or written
// when they are wrong. The call does not synchronise the stream, so it may
// itself be captured into a CUDA graph. A call repeated with the same
// arguments allocates nothing, on the host or the device: the Runtime keeps
// its plan, encoded tensor maps, graph and, for a plan that splits long
// sequences across SMs, its scratch device memory, allocated when the
// arguments are first seen.
func (rt *Runtime) Forward(a *CoreArgs, s Stream) error {
	if err := rt.guard.Enter(); err != nil {
		return err
	}
	defer rt.guard.Leave()
	if a == nil {
		return gdnerr.Argf("args", "nil *CoreArgs")
	}
	return rt.dev.Forward(a.core(), uintptr(s))
}

// ForwardFull runs the full forward on device buffers, enqueued on stream
// s: the log-gate (from its raw inputs with GateInKernel) and its
// chunk-local sum, the L2 normalisation of q and k (with L2Norm), A, then
// the core forward (Forward: the same plans, sequence parallelism and graph
// cache). Arguments are validated first; nothing is written when they are
// wrong. On bf16 inputs, with or without L2Norm, wherever the core runs
// unsplit at 128-wide value tiles, the core kernel does all of it itself
// and the call needs no scratch. Elsewhere the first call with a set of
// arguments allocates the scratch the steps need (g_cumsum in fp32 and A2
// in fp16: 132 bytes per token and value head; with L2Norm a copy of q and
// k), kept for repeated calls, which allocate nothing.
func (rt *Runtime) ForwardFull(a *FullArgs, s Stream) error {
	if err := rt.guard.Enter(); err != nil {
		return err
	}
	defer rt.guard.Leave()
	if a == nil {
		return gdnerr.Argf("args", "nil *FullArgs")
	}
	return rt.dev.ForwardFull(a.full(), uintptr(s))
}

// PlanOf returns the plan Forward runs a with (validated as Forward does):
// the kernel, its geometry and, when sequences are split across SMs, the
// segments. The call is prepared (and kept) as Forward would.
func (rt *Runtime) PlanOf(a *CoreArgs) (Plan, error) {
	if err := rt.guard.Enter(); err != nil {
		return Plan{}, err
	}
	defer rt.guard.Leave()
	if a == nil {
		return Plan{}, gdnerr.Argf("args", "nil *CoreArgs")
	}
	pl, err := rt.dev.PlanOf(a.core())
	return planOf(pl), err
}

// PlanOfFull returns the plan of the core forward that ForwardFull runs a
// with, after its preparation (see PlanOf). The call is prepared (and
// kept) as ForwardFull would: the first call with a set of arguments
// allocates its scratch.
func (rt *Runtime) PlanOfFull(a *FullArgs) (Plan, error) {
	if err := rt.guard.Enter(); err != nil {
		return Plan{}, err
	}
	defer rt.guard.Leave()
	if a == nil {
		return Plan{}, gdnerr.Argf("args", "nil *FullArgs")
	}
	pl, err := rt.dev.PlanOfFull(a.full())
	return planOf(pl), err
}

// ForwardMixed runs a mixed batch (docs/SPEC.md, "Mixed batches"): prompt
// chunks and decode sequences packed on one token axis with one cu_seqlens
// and one slot table, as serving schedulers pack them. The sequences of 1
// to MaxDecodeTokens tokens run through the decode kernel (Decode), the
// others through the full forward (ForwardFull), each continuing from its
// slot of a.Pool, which is required; checkpoints, if asked for, are the
// prompts' (a decode sequence has none). Arguments are those of
// ForwardFull and validated whole first; nothing is launched or written
// when they are wrong. The launches go one after the other on s, which
// may be capturing: the whole call then lands in the caller's graph. Each
// run of consecutive sequences of one kind is one call: a scheduler that
// packs its decode sequences together (as vLLM's does) makes two.
func (rt *Runtime) ForwardMixed(a *FullArgs, s Stream) error {
	if err := rt.guard.Enter(); err != nil {
		return err
	}
	defer rt.guard.Leave()
	if a == nil {
		return gdnerr.Argf("args", "nil *FullArgs")
	}
	return rt.dev.ForwardMixed(a.full(), uintptr(s))
}
