package kernsrc

import (
	"strings"
	"testing"
)

func TestCatalogueNamesAndSources(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range Catalogue() {
		if seen[v.Name] {
			t.Errorf("duplicate variant name %q", v.Name)
		}
		seen[v.Name] = true
		src, err := v.Source()
		if err != nil {
			t.Errorf("%s: %v", v.Name, err)
			continue
		}
		if !strings.Contains(src, `extern "C" __global__`) || !strings.Contains(src, v.Kernel) {
			t.Errorf("%s: %s does not define entry %s", v.Name, v.File, v.Kernel)
		}
		got, ok := Lookup(v.Name)
		if !ok || got.Name != v.Name {
			t.Errorf("Lookup(%q) = %v, %v", v.Name, got, ok)
		}
	}
	if len(CoreVariants()) != 4 {
		t.Errorf("%d core variants, want 4 (bf16/fp16 x 32/64)", len(CoreVariants()))
	}
}

func TestCoreVariantRejects(t *testing.T) {
	if _, err := CoreVariant("fp8", 64); err == nil {
		t.Error("fp8 accepted")
	}
	if _, err := CoreVariant(CoreBF16, 48); err == nil {
		t.Error("tile width 48 accepted")
	}
}

func TestHeadersAndDigest(t *testing.T) {
	h := Headers()
	if _, ok := h["gdn_common.cuh"]; !ok {
		t.Fatalf("headers %v lack gdn_common.cuh", h)
	}
	for name := range h {
		if !strings.HasSuffix(name, ".cuh") {
			t.Errorf("header %q", name)
		}
	}
	if d := Digest(); len(d) != 64 || d != Digest() {
		t.Errorf("digest %q", d)
	}
	if _, err := Source("missing.cu"); err == nil {
		t.Error("missing source found")
	}
}

// The shared-memory size is checked against struct Smem by a static_assert
// when the variant compiles (package jit's catalogue test); here, that both
// tile widths fit the 227 KB a Hopper block may opt into, 16-byte aligned.
func TestCoreSharedBytes(t *testing.T) {
	for _, bv := range CoreTileWidths {
		if b := CoreSharedBytes(bv); b > 227<<10 || b%16 != 0 {
			t.Errorf("tile %d: %d bytes of shared memory", bv, b)
		}
	}
}
