package gdn

import (
	"github.com/gdnjit/gdn/internal/hostpath"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/kernsrc"
)

// recorder is a device that keeps the last call the Runtime handed it,
// and answers with err (and a plan naming its kernel). It allocates
// nothing.
type recorder struct {
	core    problem.Core
	full    problem.Full
	decode  problem.Decode
	mixed   bool // the last full call was ForwardMixed's
	stream  uintptr
	calls   int
	closed  int
	err     error
	kernel  string
	planned plan.Plan
}

func (r *recorder) Forward(a problem.Core, s uintptr) error {
	r.core, r.stream, r.calls = a, s, r.calls+1
	return r.err
}

func (r *recorder) ForwardFull(a problem.Full, s uintptr) error {
	r.full, r.stream, r.calls = a, s, r.calls+1
	return r.err
}

func (r *recorder) Decode(a problem.Decode, s uintptr) error {
	r.decode, r.stream, r.calls = a, s, r.calls+1
	return r.err
}

func (r *recorder) ForwardMixed(a problem.Full, s uintptr) error {
	r.full, r.stream, r.calls, r.mixed = a, s, r.calls+1, true
	return r.err
}

func (r *recorder) PlanOf(a problem.Core) (plan.Plan, error) {
	r.core, r.calls = a, r.calls+1
	return plan.Plan{Variant: kernsrc.Variant{Name: r.kernel}, TileWidth: 64}, r.err
}

func (r *recorder) PlanOfFull(a problem.Full) (plan.Plan, error) {
	r.full, r.calls = a, r.calls+1
	return plan.Plan{Variant: kernsrc.Variant{Name: r.kernel}, TileWidth: 128}, r.err
}

func (r *recorder) Target() string { return "sm_90a" }

func (r *recorder) Close() { r.closed++ }

// openRecorded is an open Runtime without a GPU: its device is a recorder,
// its context nil (the driver refuses every call on it).
func openRecorded() (*Runtime, *recorder) {
	rec := &recorder{kernel: "gdn_hopper_bf16_bv64"}
	rt := &Runtime{dev: rec}
	rt.host = hostpath.New(nil, rec, &rt.guard)
	rt.guard.open.Store(true)
	return rt, rec
}
