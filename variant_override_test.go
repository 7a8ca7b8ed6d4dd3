package gdn

import (
	"slices"
	"strings"
	"testing"
)

// Forcing a variant reaches every plan the planner can choose for a
// problem, with the planner's own geometry, and refuses the others.
func TestForceVariant(t *testing.T) {
	p := Problem{B: 2, T: 100, Hq: 2, Hv: 8, N: 2, Dtype: FP16}
	got := CoreVariantsFor(p)
	if want := []string{"gdn_core_fp16_bv32", "gdn_core_fp16_bv64"}; !slices.Equal(got, want) {
		t.Fatalf("CoreVariantsFor(fp16) = %v, want %v", got, want)
	}
	for _, name := range got {
		pl, err := PlanCoreForced(p, 132, name)
		if err != nil {
			t.Fatal(err)
		}
		if pl.Variant.Name != name || pl.Grid[0] != uint32(p.Hv*HeadDim/pl.TileWidth) || pl.Grid[1] != uint32(p.N) {
			t.Errorf("%s: plan %v", name, pl)
		}
		// The same geometry the planner gives where it picks this variant itself.
		for _, sms := range forceProbeSMs {
			if auto, _ := PlanCore(p, sms); auto.Variant.Name == name && auto.String() != pl.String() {
				t.Errorf("%s: forced plan %v, the planner's %v", name, pl, auto)
			}
		}
	}
	if _, err := PlanCoreForced(p, 132, "gdn_core_bf16_bv64"); err == nil || !strings.Contains(err.Error(), "cannot run") {
		t.Errorf("bf16 variant on fp16 inputs: %v", err)
	}
	if _, err := PlanCoreForced(p, 132, "nope"); err == nil || !strings.Contains(err.Error(), "not a core kernel variant") {
		t.Errorf("unknown variant: %v", err)
	}

	rt := &Runtime{info: DeviceInfo{SMs: 132}}
	if err := rt.ForceVariant("test_axpy"); err == nil {
		t.Error("ForceVariant accepted a variant that is not a core kernel")
	}
	if err := rt.ForceVariant("gdn_core_fp16_bv32"); err != nil {
		t.Fatal(err)
	}
	// 64 value heads x 8 sequences are far more than 132 SMs: the planner alone takes bv64.
	p.Hv, p.N = 64, 8
	if pl, err := rt.planCore(p); err != nil || pl.TileWidth != 32 {
		t.Errorf("forced bv32 on a problem the planner gives bv64: %v, %v", pl, err)
	}
	p.Dtype = BF16
	if _, err := rt.planCore(p); err == nil {
		t.Error("forced fp16 variant ran a bf16 problem")
	}
	rt.ForceVariant("")
	if rt.ForcedVariant() != "" {
		t.Error("ForceVariant(\"\") did not clear")
	}
	if pl, err := rt.planCore(p); err != nil || pl.TileWidth != 64 {
		t.Errorf("planner's choice after clearing: %v, %v", pl, err)
	}
}
