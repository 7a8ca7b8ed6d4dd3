package gdn

import (
	"errors"
	"testing"
)

// nil arguments are an *ArgError naming "args", before the device is
// touched (the Runtime here is open, without one).
func TestForwardNilArgs(t *testing.T) {
	rt := &Runtime{}
	rt.guard.open.Store(true)
	_, errPlan := rt.PlanOf(nil)
	_, errPlanFull := rt.PlanOfFull(nil)
	for name, err := range map[string]error{
		"Forward":     rt.Forward(nil, 0),
		"ForwardFull": rt.ForwardFull(nil, 0),
		"PlanOf":      errPlan,
		"PlanOfFull":  errPlanFull,
	} {
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Arg != "args" {
			t.Errorf("%s(nil): %v, want an ArgError naming args", name, err)
		}
	}
}
