package gdn

import "math"

// PlanCoreVariant plans a core forward with the named kernel variant
// instead of the planner's choice, for tests and benchmarks that must cover
// every variant whatever the device (Options.Variant; gdn soak and the
// sanitizer runs force each one in turn). The variant must suit the
// problem's dtype; anything else is an *ArgError naming "variant".
//
// Kernel v7 on main has this same function and option (plan.go and
// runtime.go there); this file brings them to the soak branch on the older
// planner, and goes when the branches meet. Here the planner picks the
// value-tile width from the SM count alone, so planning for no SMs and for
// unlimited SMs reaches each variant with the planner's own geometry.
func PlanCoreVariant(p Problem, name string) (Plan, error) {
	for _, sms := range []int{0, math.MaxInt32} {
		if pl, err := PlanCore(p, sms); err == nil && pl.Variant.Name == name {
			return pl, nil
		}
	}
	return Plan{}, argErrorf("variant", "%q is not a core-forward variant for %v inputs", name, p.Dtype)
}
