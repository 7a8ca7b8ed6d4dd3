package gdn

import (
	"fmt"

	"github.com/gdnjit/gdn/kernsrc"
)

// Forcing a kernel variant is a test hook: the soak (gdn soak), the
// sanitizer runs and the GPU tests use it to run every plan the planner can
// choose on problems where it would not choose it (the planner picks the
// value-tile width from the SM count, so one GPU alone never exercises every
// variant on every shape). Production code leaves it unset.
//
// The kernel engineer may replace the mechanism (a forced sequence split, a
// green-context slice); keep the two entry points, ForceVariant and
// PlanCoreForced, so that the soak and the tests keep working.

// ForceVariant makes every later call on rt use the named core variant
// (kernsrc.CoreVariants lists them) instead of the planner's choice; "" gives
// the choice back to the planner. A call whose problem the variant cannot run
// (another dtype) fails with an error instead of falling back, so a test
// always knows what ran. Calls in flight keep the plan they started with.
func (rt *Runtime) ForceVariant(name string) error {
	if name == "" {
		rt.forced.Store(nil)
		return nil
	}
	if !isCoreVariant(name) {
		return fmt.Errorf("gdn: ForceVariant: %q is not a core kernel variant (have %s)", name, coreVariantNames())
	}
	rt.forced.Store(&name)
	return nil
}

// ForcedVariant returns the variant set by ForceVariant, "" when the planner
// chooses.
func (rt *Runtime) ForcedVariant() string {
	if p := rt.forced.Load(); p != nil {
		return *p
	}
	return ""
}

// planCore is the plan of a call: the planner's, or the forced variant's.
func (rt *Runtime) planCore(p Problem) (Plan, error) {
	if name := rt.ForcedVariant(); name != "" {
		return PlanCoreForced(p, rt.info.SMs, name)
	}
	return PlanCore(p, rt.info.SMs)
}

// forceProbeSMs are the multiprocessor counts PlanCoreForced tries besides
// the device's own: from one SM (a tiny MIG slice) to far more than any GPU
// has, so every choice the planner makes from the SM count is reached.
var forceProbeSMs = []int{1, 2, 4, 8, 16, 32, 64, 132, 256, 1024, 1 << 16, 1 << 30}

// PlanCoreForced returns the plan that runs problem p with the named variant
// on a device of sms multiprocessors. It is the plan PlanCore chooses for p
// on some SM count (the device's own first), so the geometry is one the
// planner itself would use: a variant the planner can never choose for p (a
// bf16 kernel for fp16 inputs) is an error.
func PlanCoreForced(p Problem, sms int, name string) (Plan, error) {
	for _, n := range append([]int{sms}, forceProbeSMs...) {
		pl, err := PlanCore(p, n)
		if err != nil {
			return Plan{}, err
		}
		if pl.Variant.Name == name {
			return pl, nil
		}
	}
	if !isCoreVariant(name) {
		return Plan{}, fmt.Errorf("gdn: forced variant %q is not a core kernel variant (have %s)", name, coreVariantNames())
	}
	return Plan{}, fmt.Errorf("gdn: forced variant %s cannot run %v", name, p)
}

// CoreVariantsFor lists the core variants the planner can choose for p on
// some device: the plans a test should cover for p.
func CoreVariantsFor(p Problem) []string {
	var out []string
	for _, v := range kernsrc.CoreVariants() {
		if _, err := PlanCoreForced(p, 0, v.Name); err == nil {
			out = append(out, v.Name)
		}
	}
	return out
}

func isCoreVariant(name string) bool {
	for _, v := range kernsrc.CoreVariants() {
		if v.Name == name {
			return true
		}
	}
	return false
}

func coreVariantNames() string {
	s := ""
	for i, v := range kernsrc.CoreVariants() {
		if i > 0 {
			s += ", "
		}
		s += v.Name
	}
	return s
}
