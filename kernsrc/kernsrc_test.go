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
		if !definesEntry(src, v.Kernel) {
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
			if !strings.Contains(v.Kernel, "Pass::transfer") {
				t.Errorf("%s: not built as the transfer pass: %s", v.Name, v.Kernel)
			}
		}
	}
	if len(HopperVariants()) != 15 || transfer != 6 {
		t.Errorf("%d Hopper variants (%d transfer), want 15: bf16/fp16/bf16_fp16qk x 1/2 consumers x core/transfer, and bf16_l2norm's, bf16_fused's and bf16_fused_nonorm's cores at BV 128", len(HopperVariants()), transfer)
	}
}

// definesEntry reports whether src, or a header it may include, defines
// the kernel entry: an extern "C" __global__ function of that name, or the
// __global__ template a name expression (gdn_hopper_fwd<...>) instantiates.
func definesEntry(src, entry string) bool {
	name, _, tmpl := strings.Cut(entry, "<")
	if !tmpl {
		return strings.Contains(src, `extern "C" __global__`) && strings.Contains(src, name)
	}
	for _, text := range append([]string{src}, values(Headers())...) {
		if strings.Contains(text, "template <class Cfg") && strings.Contains(text, "__global__ void __launch_bounds__(Cfg::kThreads, 1) "+name+"(") {
			return true
		}
	}
	return false
}

func values(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// The in-core L2 norm is a BV 128 core forward on bf16 q and k with a
// converter (Prep::norm, one converter warpgroup): the l2norm variant's and
// the fused preparation's (Prep::fused); the fused preparation without the
// norm is Prep::fused_nonorm; nothing else has either.
func TestHopperL2NormVariant(t *testing.T) {
	v, err := HopperVariant(CoreBF16L2Norm, 2)
	if err != nil || v.Name != "gdn_hopper_bf16_l2norm_bv128" {
		t.Fatalf("HopperVariant(bf16_l2norm, 2) = %s, %v", v.Name, err)
	}
	c, _ := HopperCfgOf(CoreBF16L2Norm, 2, false)
	if c.Prep != PrepNorm || c.Converters() != 1 || c.QKFP16 || c.VFP16 || c.Threads() != 512 {
		t.Errorf("bf16_l2norm config %+v: %d converters, %d threads", c, c.Converters(), c.Threads())
	}
	for _, want := range []string{"Prep::norm", "Elt::bf16, Elt::bf16, 2,", "GDN_THREADS=512"} {
		if !strings.Contains(v.Kernel+" "+strings.Join(v.Defines, " "), want) {
			t.Errorf("%s (%v) lacks %s", v.Kernel, v.Defines, want)
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
		if strings.Contains(v.Kernel, "Prep::norm>") || strings.Contains(v.Kernel, "Prep::fused>") {
			norms++
		}
		if strings.Contains(v.Kernel, "Prep::fused") {
			fused++
			prep := map[string]string{"gdn_hopper_bf16_fused_bv128": "Prep::fused>", "gdn_hopper_bf16_fused_nonorm_bv128": "Prep::fused_nonorm>"}[v.Name]
			d := " " + strings.Join(v.Defines, " ") + " "
			if prep == "" || !strings.Contains(v.Kernel, prep) || !strings.Contains(d, " GDN_THREADS=512 ") ||
				!strings.Contains(v.Kernel, "<Elt::bf16, Elt::bf16, 2, Pass::forward,") {
				t.Errorf("fused variant %s: %s %v", v.Name, v.Kernel, v.Defines)
			}
		}
	}
	if norms != 2 || fused != 2 {
		t.Errorf("%d variants with the in-core norm, %d with the fused preparation, want 2 and 2", norms, fused)
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
		if c, _ := HopperCfgOf(dt, 2, false); c.Converters() != 1 || c.SharedBytes() != HopperSharedBytes(dt, 2) {
			t.Errorf("%s config %+v", dt, c)
		}
	}
}

// The dtype pair decides the storage of v and o and of q and k (the
// configuration's VFP16, QKFP16: the name expression's two Elt arguments).
func TestHopperVariantDtypeDefines(t *testing.T) {
	for _, c := range []struct {
		dt        CoreDtype
		vfp, qkfp bool
		v, qk     string
	}{{CoreBF16, false, false, "Elt::bf16", "Elt::bf16"}, {CoreFP16, true, true, "Elt::fp16", "Elt::fp16"},
		{CoreBF16FP16QK, false, true, "Elt::bf16", "Elt::fp16"}} {
		v, err := HopperVariant(c.dt, 2)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _ := HopperCfgOf(c.dt, 2, false)
		if cfg.VFP16 != c.vfp || cfg.QKFP16 != c.qkfp || !strings.Contains(v.Kernel, "<"+c.v+", "+c.qk+", 2,") {
			t.Errorf("%s: config %+v, entry %s, want %s and %s", c.dt, cfg, v.Kernel, c.v, c.qk)
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
			c, err := HopperCfgOf(dt, nc, false)
			if b := HopperSharedBytes(dt, nc); b > 227<<10 || b%1024 != 0 || (err == nil && b+c.StaticSharedBytes() > 227<<10) {
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
