package gdn

import (
	"errors"
	"reflect"
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

// The Runtime hands each call down as it came, with its stream, and the
// device's answer (error or plan) back up; nothing of it allocates.
func TestForwardHandsCallsDown(t *testing.T) {
	rt, rec := openRecorded()
	var c CoreArgs
	setEvery(t, &c)
	if err := rt.Forward(&c, 0x7000); err != nil || rec.stream != 0x7000 || !reflect.DeepEqual(*coreArgsOf(rec.core), c) {
		t.Errorf("Forward: %v, stream %#x, args %+v", err, rec.stream, rec.core)
	}
	var f FullArgs
	setEvery(t, &f)
	if err := rt.ForwardFull(&f, 0x8000); err != nil || rec.stream != 0x8000 || !reflect.DeepEqual(*fullArgsOf(rec.full), f) {
		t.Errorf("ForwardFull: %v, stream %#x, args %+v", err, rec.stream, rec.full)
	}
	if pl, err := rt.PlanOf(&c); err != nil || pl.Kernel != rec.kernel || pl.TileWidth != 64 {
		t.Errorf("PlanOf: %v, %v", pl, err)
	}
	if pl, err := rt.PlanOfFull(&f); err != nil || pl.Kernel != rec.kernel || pl.TileWidth != 128 {
		t.Errorf("PlanOfFull: %v, %v", pl, err)
	}
	rec.err = errors.New("launch failed")
	if err := rt.Forward(&c, 0); err != rec.err {
		t.Errorf("Forward's error %v, want the device's", err)
	}
	if _, err := rt.PlanOfFull(&f); err != rec.err {
		t.Errorf("PlanOfFull's error %v, want the device's", err)
	}
	rec.err = nil
	if n := testing.AllocsPerRun(100, func() { rt.Forward(&c, 1) }); n != 0 {
		t.Errorf("Forward allocates %v times a call above the device, want 0", n)
	}
	if rt.Target() != "sm_90a" || rt.Device() != (DeviceInfo{}) {
		t.Errorf("Target %q, Device %+v", rt.Target(), rt.Device())
	}
}
