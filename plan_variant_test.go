package gdn

import (
	"errors"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/kernsrc"
)

// Every core variant of the problem's dtype can be forced, with the
// planner's geometry; other names are an *ArgError naming "variant",
// returned by Forward before the device is touched.
func TestPlanCoreVariant(t *testing.T) {
	p := Problem{B: 2, T: 100, Hq: 2, Hv: 8, N: 2, Dtype: FP16}
	forced := 0
	for _, v := range kernsrc.HopperVariants() {
		pl, err := PlanCoreVariant(p, v.Name)
		if !strings.Contains(v.Name, "fp16") || strings.HasSuffix(v.Name, "_transfer") { // the transfer pass is no core forward
			var ae *ArgError
			if !errors.As(err, &ae) || ae.Arg != "variant" {
				t.Errorf("%s on fp16 inputs: %v, want an ArgError naming variant", v.Name, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		forced++
		if pl.Variant.Name != v.Name || pl.Grid[0] != uint32(p.Hv*HeadDim/pl.TileWidth) || pl.Grid[1] != uint32(p.N) {
			t.Errorf("%s: plan %v", v.Name, pl)
		}
		// The planner's own geometry wherever it picks this variant itself.
		for _, sms := range []int{1, 16, 64, 132, 1 << 20} {
			if auto, _ := PlanCore(p, sms); auto.Variant.Name == v.Name && auto.String() != pl.String() {
				t.Errorf("%s: forced plan %v, the planner's %v", v.Name, pl, auto)
			}
		}
	}
	if forced != 2 {
		t.Errorf("%d fp16 variants forced, want 2", forced)
	}
	if _, err := PlanCoreVariant(p, "test_axpy"); err == nil {
		t.Error("a test kernel planned as a core variant")
	}
	rt := &Runtime{calls: newCallCache(newPlanCache(0, "gdn_hopper_fp16_bv64"), nil, nil)}
	var ae *ArgError
	if err := rt.Forward(goodArgs(1, 10, 1, 2), 0); !errors.As(err, &ae) || ae.Arg != "variant" {
		t.Errorf("Forward of bf16 inputs with an fp16 variant: %v", err)
	}
}
