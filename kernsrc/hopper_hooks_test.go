package kernsrc

import (
	"strings"
	"testing"
)

// A hooked variant wraps the production configuration in the hooks'
// templates, compiles hopper_hooks.cu and keeps the launch contract; no
// hook, or a variant of another family, is returned unchanged.
func TestHopperHooked(t *testing.T) {
	v, err := HopperTransferVariant(CoreBF16, 1)
	if err != nil {
		t.Fatal(err)
	}
	h := HopperHooked(v, HopperHooks{WalkToEnd: true, DelayEarlyPass: true})
	want := "gdn_hopper_fwd<DelayEarlyPass<WalkToEnd<HopperCfg<Elt::bf16, Elt::bf16, 1, Pass::transfer, Prep::none>>>>"
	if h.Kernel != want || h.File != "hopper_hooks.cu" || h.Name != v.Name+"_walk_delayed" {
		t.Errorf("hooked %+v, want entry %s", h, want)
	}
	if strings.Join(h.Defines, " ") != strings.Join(v.Defines, " ") {
		t.Errorf("defines %v, want the production variant's %v", h.Defines, v.Defines)
	}
	src, err := h.Source()
	if err != nil || !strings.Contains(src, "struct WalkToEnd") || !strings.Contains(src, "struct DelayEarlyPass") {
		t.Errorf("hopper_hooks.cu: %v", err)
	}
	if got := HopperHooked(v, HopperHooks{}); got.Kernel != v.Kernel || got.Name != v.Name {
		t.Errorf("no hooks: %+v", got)
	}
	s, _ := ScanVariant(8)
	if got := HopperHooked(s, HopperHooks{WalkToEnd: true}); got.Kernel != s.Kernel || got.File != s.File {
		t.Errorf("scan variant hooked: %+v", got)
	}
	for _, c := range Catalogue() {
		if c.File == "hopper_hooks.cu" {
			t.Errorf("catalogue variant %s compiles the test builds", c.Name)
		}
	}
}
