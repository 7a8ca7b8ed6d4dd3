package kernsrc

import (
	"fmt"
	"slices"
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
	transfer := 0
	for _, v := range HopperVariants() {
		if strings.HasSuffix(v.Name, "_transfer") {
			transfer++
			if !strings.Contains(strings.Join(v.Defines, " "), "GDN_TRANSFER=1") {
				t.Errorf("%s: not built as the transfer pass: %v", v.Name, v.Defines)
			}
		}
	}
	if len(HopperVariants()) != 15 || transfer != 6 {
		t.Errorf("%d Hopper variants (%d transfer), want 15: bf16/fp16/bf16_fp16qk x 1/2 consumers x core/transfer, and bf16_l2norm's, bf16_fused's and bf16_fused_nonorm's cores at BV 128", len(HopperVariants()), transfer)
	}
}

// The in-core L2 norm is a BV 128 core forward on bf16 q and k with a
// converter (GDN_QK_NORM=1 beside GDN_CONV=1): the l2norm variant's and the
// fused preparation's (GDN_FUSED=1); the fused preparation without the
// norm has GDN_FUSED=1 and GDN_QK_NORM=0; nothing else has either.
func TestHopperL2NormVariant(t *testing.T) {
	v, err := HopperVariant(CoreBF16L2Norm, 2)
	if err != nil || v.Name != "gdn_hopper_bf16_l2norm_bv128" {
		t.Fatalf("HopperVariant(bf16_l2norm, 2) = %s, %v", v.Name, err)
	}
	d := " " + strings.Join(v.Defines, " ") + " "
	for _, want := range []string{"GDN_QK_NORM=1", "GDN_CONV=1", "GDN_QK_FP16=0", "GDN_FP16=0", "GDN_THREADS=512"} {
		if !strings.Contains(d, " "+want+" ") {
			t.Errorf("defines %v lack %s", v.Defines, want)
		}
	}
	if _, err := HopperVariant(CoreBF16L2Norm, 1); err == nil {
		t.Error("a BV 64 in-core L2 norm: it has no converter")
	}
	if _, err := HopperTransferVariant(CoreBF16L2Norm, 2); err == nil {
		t.Error("an in-core L2 norm transfer pass")
	}
	norms, fused := 0, 0
	for _, v := range HopperVariants() {
		d := " " + strings.Join(v.Defines, " ") + " "
		if strings.Contains(d, " GDN_QK_NORM=1 ") {
			norms++
		}
		if strings.Contains(d, " GDN_FUSED=1 ") {
			fused++
			norm := map[string]string{"gdn_hopper_bf16_fused_bv128": "1", "gdn_hopper_bf16_fused_nonorm_bv128": "0"}[v.Name]
			if norm == "" || !strings.Contains(d, " GDN_QK_NORM="+norm+" ") || !strings.Contains(d, " GDN_THREADS=512 ") ||
				!strings.Contains(d, " GDN_CONV=1 ") || !strings.Contains(d, " GDN_QK_FP16=0 ") {
				t.Errorf("fused variant %s: %v", v.Name, v.Defines)
			}
		}
	}
	if norms != 2 || fused != 2 {
		t.Errorf("%d variants with GDN_QK_NORM=1, %d with GDN_FUSED=1, want 2 and 2", norms, fused)
	}
	for _, dt := range []CoreDtype{CoreBF16Fused, CoreBF16FusedNoNorm} {
		if _, err := HopperVariant(dt, 1); err == nil {
			t.Errorf("a BV 64 %s variant", dt)
		}
		if _, err := HopperTransferVariant(dt, 2); err == nil {
			t.Errorf("a %s transfer pass", dt)
		}
		if HopperSharedBytes(dt, 2) != HopperSharedBytes(CoreBF16, 2)+HopperFusedScratchBytes {
			t.Errorf("%s: shared memory %d", dt, HopperSharedBytes(dt, 2))
		}
	}
}

// The dtype pair decides GDN_FP16 (v and o) and GDN_QK_FP16 (q and k).
func TestHopperVariantDtypeDefines(t *testing.T) {
	for _, c := range []struct {
		dt         CoreDtype
		fp16, qk16 string
	}{{CoreBF16, "GDN_FP16=0", "GDN_QK_FP16=0"}, {CoreFP16, "GDN_FP16=1", "GDN_QK_FP16=1"},
		{CoreBF16FP16QK, "GDN_FP16=0", "GDN_QK_FP16=1"}} {
		v, err := HopperVariant(c.dt, 2)
		if err != nil {
			t.Fatal(err)
		}
		d := " " + strings.Join(v.Defines, " ") + " "
		if !strings.Contains(d, " "+c.fp16+" ") || !strings.Contains(d, " "+c.qk16+" ") {
			t.Errorf("%s: defines %v, want %s and %s", c.dt, v.Defines, c.fp16, c.qk16)
		}
		if want := "gdn_hopper_" + string(c.dt) + "_bv128"; v.Name != want {
			t.Errorf("%s: name %s, want %s", c.dt, v.Name, want)
		}
	}
	if _, err := PrepVariant(PrepChunkKernel, CoreBF16FP16QK, 1); err == nil {
		t.Error("a prep variant for bf16_fp16qk: the preparation is built per input dtype")
	}
}

func TestHopperVariantRejects(t *testing.T) {
	if _, err := HopperVariant("fp8", 1); err == nil {
		t.Error("fp8 accepted")
	}
	if _, err := HopperVariant(CoreBF16, 3); err == nil {
		t.Error("3 consumers accepted")
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

// The shared-memory size is checked against the kernel's layout by a
// static_assert when the variant compiles (package jit's catalogue test);
// here, that both consumer counts fit the 227 KB a Hopper block may opt
// into, and that the block is whole warpgroups within the 1024 threads.
func TestHopperSharedBytesAndThreads(t *testing.T) {
	for _, nc := range HopperConsumers {
		for _, dt := range coreDtypes {
			if b := HopperSharedBytes(dt, nc); b > 227<<10 || b%1024 != 0 {
				t.Errorf("%d consumers, %s: %d bytes of shared memory", nc, dt, b)
			}
			for _, xfer := range []bool{false, true} {
				if th := HopperThreads(dt, nc, xfer); th%128 != 0 || th > 1024 || th < 128*(nc+1) {
					t.Errorf("%d consumers, %s, transfer %v: %d threads", nc, dt, xfer, th)
				}
			}
		}
	}
}

// One prep variant per dtype and head count, named apart, each telling the
// kernel its head count and the shared memory the launch gives it; other
// head counts are refused.
func TestPrepVariants(t *testing.T) {
	names := map[string]bool{}
	for _, v := range PrepVariants() {
		names[v.Name] = true
	}
	if len(names) != 2*len(PrepHeads()) {
		t.Errorf("%d distinct prep variants, want %d", len(names), 2*len(PrepHeads()))
	}
	for _, h := range PrepHeads() {
		v, err := PrepVariant(PrepChunkKernel, CoreFP16, h)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{fmt.Sprintf("GDN_PREP_HEADS=%d", h), fmt.Sprintf("GDN_PREP_CHUNK_SMEM=%d", PrepChunkSharedBytes(h))}
		for _, d := range want {
			if !slices.Contains(v.Defines, d) {
				t.Errorf("%s: defines %v lack %s", v.Name, v.Defines, d)
			}
		}
	}
	if PrepChunkSharedBytes(4) <= PrepChunkSharedBytes(1) {
		t.Error("blocks of several heads need room for their copy of K K^T")
	}
	for _, h := range []int{0, 3, -1} {
		if _, err := PrepVariant(PrepChunkKernel, CoreBF16, h); err == nil {
			t.Errorf("%d heads a block accepted", h)
		}
	}
}
