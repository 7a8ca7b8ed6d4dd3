package launch

import (
	"errors"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/problem/problemtest"
	"github.com/gdnjit/gdn/internal/scratch"
	"github.com/gdnjit/gdn/internal/scratch/scratchtest"
)

// testLauncher is a Launcher without a GPU: its call caches on a fake
// encoder and a fake scratch device, an H200's 132 SMs. It validates,
// plans and prepares calls; it cannot load kernels or launch.
func testLauncher(k plan.Knobs) (*Launcher, *scratchtest.Device) {
	f := scratchtest.New()
	pool := scratch.NewPool(f)
	l := &Launcher{sms: 132, knobs: k, full: newFullCache(), pool: pool}
	l.calls = newCallCache(132, k, (&fakeEncoder{}).encode, nil, pool)
	return l, f
}

// PlanOf is the planner's plan for the call's problem, split or not.
func TestLauncherPlanOf(t *testing.T) {
	l, _ := testLauncher(plan.Knobs{})
	for _, a := range []*problem.Core{problemtest.Core(8, 4096, 16, 32), problemtest.Core(1, 32768, 2, 8), problemtest.Varlen()} {
		p, err := problem.ValidateCore(a)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := plan.Core(p, 132, plan.Knobs{})
		if got, err := l.PlanOf(*a); err != nil || got.String() != want.String() {
			t.Errorf("%v: PlanOf %v (%v), the planner's %v", p, got, err, want)
		}
	}
	if _, err := l.PlanOf(problem.Core{}); err == nil {
		t.Error("PlanOf of empty arguments: no error")
	}
}

// PlanOfFull prepares the full call as ForwardFull would: where the core
// does the whole preparation (bf16, unsplit at BV 128) no scratch at all
// and the fused variant; with the PrepKernel knob a chunk table and
// working buffers, and the core on the preparation's copies. Either way
// the plan is plan.Full's.
func TestLauncherPlanOfFull(t *testing.T) {
	a := problemtest.Full(8, 4096, 16, 32)
	a.L2Norm = true
	p, err := problem.ValidateFull(a)
	if err != nil {
		t.Fatal(err)
	}
	l, f := testLauncher(plan.Knobs{})
	want, _ := plan.Full(p, 132, plan.Knobs{}, true)
	if got, err := l.PlanOfFull(*a); err != nil || got.String() != want.String() || !strings.Contains(got.Variant.Name, "_fused_") {
		t.Errorf("fused: PlanOfFull %v (%v), want %v", got, err, want)
	}
	if len(f.Live) != 0 {
		t.Errorf("fused: %d scratch allocations, want none", len(f.Live))
	}

	k := plan.Knobs{PrepKernel: true}
	l, f = testLauncher(k)
	want, _ = plan.Full(p, 132, k, true)
	got, err := l.PlanOfFull(*a)
	switch {
	case errors.Is(err, driver.ErrNoCUDA):
		// Without -tags cuda the preparation's parameters cannot be packed:
		// the call fails, and its scratch goes with it.
		l.full.held.close()
		l.pool.Close()
		if len(f.Live) != 0 {
			t.Errorf("a failed preparation left %d allocations", len(f.Live))
		}
	case err != nil || got.String() != want.String() || strings.Contains(got.Variant.Name, "_fused_"):
		t.Errorf("PrepKernel: PlanOfFull %v (%v), want %v", got, err, want)
	case len(f.Live) != 2:
		t.Errorf("PrepKernel: %d scratch allocations, want 2 (the chunk table, the working buffers)", len(f.Live))
	}
	if _, err := l.PlanOfFull(problem.Full{}); err == nil {
		t.Error("PlanOfFull of empty arguments: no error")
	}
}
