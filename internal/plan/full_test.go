package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/kernsrc"
)

// Every core variant of the problem's dtype can be forced, with the
// planner's geometry; other names are an *gdnerr.ArgError naming "variant",
// returned by Forward before the device is touched.
func TestVariant(t *testing.T) {
	p := problem.Problem{B: 2, T: 100, Hq: 2, Hv: 8, N: 2, Dtype: dtype.FP16}
	forced := 0
	for _, v := range kernsrc.HopperVariants() {
		pl, err := Variant(p, v.Name)
		if !strings.HasPrefix(v.Name, "gdn_hopper_fp16_") || strings.HasSuffix(v.Name, "_transfer") { // the transfer pass is no core forward
			var ae *gdnerr.ArgError
			if !errors.As(err, &ae) || ae.Arg != "variant" {
				t.Errorf("%s on fp16 inputs: %v, want an gdnerr.ArgError naming variant", v.Name, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		forced++
		if pl.Variant.Name != v.Name || pl.Grid[0] != uint32(p.Hv*problem.HeadDim/pl.TileWidth) || pl.Grid[1] != uint32(p.N) {
			t.Errorf("%s: plan %v", v.Name, pl)
		}
		// The planner's own geometry wherever it picks this variant itself.
		for _, sms := range []int{1, 16, 64, 132, 1 << 20} {
			if auto, _ := Core(p, sms, Knobs{}); auto.Variant.Name == v.Name && auto.String() != pl.String() {
				t.Errorf("%s: forced plan %v, the planner's %v", v.Name, pl, auto)
			}
		}
	}
	if forced != 2 {
		t.Errorf("%d fp16 variants forced, want 2", forced)
	}
	if _, err := Variant(p, "test_axpy"); err == nil {
		t.Error("a test kernel planned as a core variant")
	}
}

// The full forward's core on bf16 v with fp16 copies of q and k runs the
// bf16_fp16qk variants; a bf16 variant's name forces the same tile, while
// plain bf16 inputs cannot take a bf16_fp16qk variant.
func TestVariantFP16QK(t *testing.T) {
	p := problem.Problem{B: 2, T: 100, Hq: 2, Hv: 8, N: 2, Dtype: dtype.BF16, QKDtype: dtype.FP16}
	for _, nc := range kernsrc.HopperConsumers {
		mixed, _ := kernsrc.HopperVariant(kernsrc.CoreBF16FP16QK, nc)
		plain, _ := kernsrc.HopperVariant(kernsrc.CoreBF16, nc)
		for _, name := range []string{mixed.Name, plain.Name} {
			pl, err := Variant(p, name)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if pl.Variant.Name != mixed.Name {
				t.Errorf("%s forced on fp16 q, k and bf16 v: variant %s, want %s", name, pl.Variant.Name, mixed.Name)
			}
		}
		bf := p
		bf.QKDtype = dtype.BF16
		if _, err := Variant(bf, mixed.Name); err == nil {
			t.Errorf("%s forced on bf16 q and k", mixed.Name)
		}
	}
	for _, sms := range []int{16, 132} {
		if pl, err := Core(p, sms, Knobs{}); err != nil || !strings.Contains(pl.Variant.Name, "_bf16_fp16qk_") {
			t.Errorf("Core on fp16 q, k and bf16 v (%d SMs): %v, %v", sms, pl.Variant.Name, err)
		}
	}
}

// fullProblem is the core problem of a full forward of b sequences of t
// tokens (before the L2 norm's or the fused preparation's flags).
func fullProblem(b, t, hq, hv int, dt dtype.Dtype) problem.Problem {
	return problem.Problem{B: b, T: t, Hq: hq, Hv: hv, N: b, Dtype: dt, QKDtype: dt, ADtype: dtype.FP16, BetaDtype: dtype.FP32}
}

// The full forward normalises q and k in the core kernel exactly where the
// core forward of its normalised copies would run unsplit at BV 128 on bf16
// inputs, unless Knobs.L2NormInPrep; a QKNorm problem always plans that
// one variant, unsplit, and never shares a plan-cache entry with its copies.
func TestNormInCore(t *testing.T) {
	full := fullProblem
	for _, c := range []struct {
		name   string
		p      problem.Problem
		l2     bool
		inPrep bool
		want   bool
	}{
		{"q35_4kx8", full(8, 4096, 16, 32, dtype.BF16), true, false, true},
		{"sym32_8kx4", full(4, 8192, 32, 32, dtype.BF16), true, false, true},
		{"q397_4kx8: G = 4", full(8, 4096, 16, 64, dtype.BF16), true, false, false},
		{"in prep", full(8, 4096, 16, 32, dtype.BF16), true, true, false},
		{"no L2Norm", full(8, 4096, 16, 32, dtype.BF16), false, false, false},
		{"fp16", full(8, 4096, 16, 32, dtype.FP16), true, false, false},
		{"tp8_32k splits", full(1, 32768, 2, 8, dtype.BF16), true, false, false},
		{"few CTAs: BV 64", full(1, 640, 2, 4, dtype.BF16), true, false, false},
	} {
		if got := NormInCore(c.p, 132, Knobs{L2NormInPrep: c.inPrep}, c.l2); got != c.want {
			t.Errorf("%s: NormInCore %v, want %v", c.name, got, c.want)
		}
	}

	q := full(1, 640, 2, 4, dtype.BF16) // would take BV 64 with copies
	q.QKNorm = true
	pl, err := Core(q, 132, Knobs{})
	if err != nil || pl.Variant.Name != "gdn_hopper_bf16_l2norm_bv128" || pl.SegmentChunks != 0 {
		t.Errorf("QKNorm plan %v (%v), want gdn_hopper_bf16_l2norm_bv128 unsplit", pl, err)
	}
	long := full(1, 32768, 2, 8, dtype.BF16) // would split with copies
	long.QKNorm = true
	if pl, err := Core(long, 132, Knobs{}); err != nil || pl.SegmentChunks != 0 {
		t.Errorf("QKNorm plan of a long sequence %v (%v): split", pl, err)
	}
	copies := full(8, 4096, 16, 32, dtype.BF16)
	copies.QKDtype = dtype.FP16
	normed := full(8, 4096, 16, 32, dtype.BF16)
	normed.QKNorm = true
	if a, b := cachedVariants(copies, normed); a != "gdn_hopper_bf16_fp16qk_bv128" || b != "gdn_hopper_bf16_l2norm_bv128" {
		t.Errorf("plan cache: copies %s, in-core norm %s", a, b)
	}
}

// cachedVariants plans a and then b through one plan cache (132 SMs) and
// names the variant each got: problems that differ only in how q and k
// reach the core must not share an entry.
func cachedVariants(a, b problem.Problem) (string, string) {
	c := NewCache(132, "")
	pa, _ := c.Tile(a)
	pb, _ := c.Tile(b)
	return pa.Variant.Name, pb.Variant.Name
}

// The core kernel does the full forward's whole preparation wherever it
// could normalise q and k itself, whatever G, unless Knobs.L2NormInPrep
// or Knobs.PrepKernel; a fused problem plans its own variant, unsplit,
// in a plan-cache entry of its own.
func TestFusedPrep(t *testing.T) {
	full := fullProblem
	for _, c := range []struct {
		name               string
		p                  problem.Problem
		l2, inPrep, kernel bool
		want               bool
	}{
		{"q35_4kx8", full(8, 4096, 16, 32, dtype.BF16), true, false, false, true},
		{"q397_4kx8: G = 4", full(8, 4096, 16, 64, dtype.BF16), true, false, false, true},
		{"sym32_8kx4", full(4, 8192, 32, 32, dtype.BF16), true, false, false, true},
		{"L2NormInPrep", full(8, 4096, 16, 32, dtype.BF16), true, true, false, false},
		{"PrepKernel", full(8, 4096, 16, 32, dtype.BF16), true, false, true, false},
		{"no L2Norm", full(8, 4096, 16, 32, dtype.BF16), false, false, false, true},
		{"no L2Norm, L2NormInPrep", full(8, 4096, 16, 32, dtype.BF16), false, true, false, true},
		{"no L2Norm, PrepKernel", full(8, 4096, 16, 32, dtype.BF16), false, false, true, false},
		{"no L2Norm, fp16", full(8, 4096, 16, 32, dtype.FP16), false, false, false, false},
		{"no L2Norm, tp8_32k splits", full(1, 32768, 2, 8, dtype.BF16), false, false, false, false},
		{"fp16", full(8, 4096, 16, 32, dtype.FP16), true, false, false, false},
		{"tp8_32k splits", full(1, 32768, 2, 8, dtype.BF16), true, false, false, false},
		{"few CTAs: BV 64", full(1, 640, 2, 4, dtype.BF16), true, false, false, false},
	} {
		if got := FusedPrep(c.p, 132, Knobs{L2NormInPrep: c.inPrep, PrepKernel: c.kernel}, c.l2); got != c.want {
			t.Errorf("%s: FusedPrep %v, want %v", c.name, got, c.want)
		}
	}
	q := full(1, 640, 2, 4, dtype.BF16) // would take BV 64 with copies
	q.QKNorm, q.Fused = true, true
	pl, err := Core(q, 132, Knobs{})
	if err != nil || pl.Variant.Name != "gdn_hopper_bf16_fused_bv128" || pl.SegmentChunks != 0 ||
		pl.SharedBytes != kernsrc.HopperSharedBytes(kernsrc.CoreBF16Fused, 2) || pl.Block[0] != 512 {
		t.Errorf("fused plan %v (%v), want gdn_hopper_bf16_fused_bv128 unsplit, its shared memory, 512 threads", pl, err)
	}
	// Without the norm too: its own variant at BV 128 on a shape that
	// would take BV 64, and never split (on a shape that would).
	for _, c := range []struct {
		name string
		p    problem.Problem
	}{{"few CTAs", full(1, 640, 2, 4, dtype.BF16)}, {"tp8_32k", full(1, 32768, 2, 8, dtype.BF16)}} {
		q := c.p
		q.Fused = true
		pl, err := Core(q, 132, Knobs{})
		if err != nil || pl.Variant.Name != "gdn_hopper_bf16_fused_nonorm_bv128" || pl.SegmentChunks != 0 ||
			pl.SharedBytes != kernsrc.HopperSharedBytes(kernsrc.CoreBF16FusedNoNorm, 2) || pl.Block[0] != 512 {
			t.Errorf("%s, fused without the norm: %v (%v), want gdn_hopper_bf16_fused_nonorm_bv128 unsplit", c.name, pl, err)
		}
	}
	normed := full(8, 4096, 16, 32, dtype.BF16)
	normed.QKNorm = true
	fused := normed
	fused.Fused = true
	if a, b := cachedVariants(normed, fused); a != "gdn_hopper_bf16_l2norm_bv128" || b != "gdn_hopper_bf16_fused_bv128" {
		t.Errorf("plan cache: in-core norm %s, fused %s", a, b)
	}
	given := full(8, 4096, 16, 32, dtype.BF16)
	fusedGiven := given
	fusedGiven.Fused = true
	if a, b := cachedVariants(given, fusedGiven); a != "gdn_hopper_bf16_bv128" || b != "gdn_hopper_bf16_fused_nonorm_bv128" {
		t.Errorf("plan cache: as given %s, fused without the norm %s", a, b)
	}
}

// Full names the core a full forward runs: the fused preparation
// with L2Norm where the core runs unsplit at BV 128 (or is forced to),
// the copies where it splits or is forced to BV 64; without L2Norm the
// fused preparation without the norm where the core of q and k as given
// runs unsplit at BV 128, that core elsewhere.
func TestFull(t *testing.T) {
	q35 := problem.Problem{B: 8, T: 4096, Hq: 16, Hv: 32, Dtype: dtype.BF16}
	tp8 := problem.Problem{B: 1, T: 32768, Hq: 2, Hv: 8, Dtype: dtype.BF16}
	small := problem.Problem{B: 1, T: 640, Hq: 2, Hv: 4, Dtype: dtype.BF16}
	for _, c := range []struct {
		name    string
		p       problem.Problem
		variant string
		l2      bool
		want    string
		split   bool
	}{
		{"q35 l2norm", q35, "", true, "gdn_hopper_bf16_fused_bv128", false},
		{"q35", q35, "", false, "gdn_hopper_bf16_fused_nonorm_bv128", false},
		{"tp8_32k", tp8, "", false, "gdn_hopper_bf16_bv128", true},
		{"small", small, "", false, "gdn_hopper_bf16_bv64", false},
		{"small, BV 128 forced", small, "gdn_hopper_bf16_bv128", false, "gdn_hopper_bf16_fused_nonorm_bv128", false},
		{"q35 fp16 l2norm", problem.Problem{B: 8, T: 4096, Hq: 16, Hv: 32, Dtype: dtype.FP16}, "", true, "gdn_hopper_fp16_bv128", false},
		{"tp8_32k l2norm", tp8, "", true, "gdn_hopper_bf16_fp16qk_bv128", true},
		{"small l2norm", small, "", true, "gdn_hopper_bf16_fp16qk_bv64", false},
		{"small l2norm, BV 128 forced", small, "gdn_hopper_bf16_bv128", true, "gdn_hopper_bf16_fused_bv128", false},
		{"q35 l2norm, BV 64 forced", q35, "gdn_hopper_bf16_bv64", true, "gdn_hopper_bf16_fp16qk_bv64", false},
	} {
		pl, err := Full(c.p, 132, Knobs{Variant: c.variant}, c.l2)
		if err != nil || pl.Variant.Name != c.want || (pl.SegmentChunks > 0) != c.split {
			t.Errorf("%s: %v (%v), want %s, split %v", c.name, pl, err, c.want, c.split)
		}
	}
}

// Kernels names what a default Runtime runs: the full forward's core
// does the whole preparation with L2Norm wherever it runs unsplit at BV 128
// (G = 2 and 4 alike), and without L2Norm too (its variant without the
// norm); the preparation kernel is listed with every full forward (the
// calls the core does not fuse, and Knobs.PrepKernel, run it); a split
// plan takes the copies and brings its transfer pass and the scan.
func TestKernels(t *testing.T) {
	has := func(p problem.Problem, full bool, name string) bool {
		vs, err := Kernels(p, 132, full)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if v.Name == name {
				return true
			}
		}
		return false
	}
	q35 := problem.Problem{B: 8, T: 4096, Hq: 16, Hv: 32, Dtype: dtype.BF16}
	q397 := problem.Problem{B: 8, T: 4096, Hq: 16, Hv: 64, Dtype: dtype.BF16}
	tp8 := problem.Problem{B: 1, T: 32768, Hq: 2, Hv: 8, Dtype: dtype.BF16}
	for _, c := range []struct {
		p    problem.Problem
		full bool
		name string
		want bool
	}{
		{q35, false, "gdn_hopper_bf16_bv128", true},
		{q35, false, "gdn_prep_chunk_bf16", false},
		{q35, true, "gdn_prep_chunk_bf16", true},
		{q397, true, "gdn_prep_chunk_bf16_h4", true},
		{q35, true, "gdn_hopper_bf16_fused_bv128", true},
		{q35, false, "gdn_hopper_bf16_fused_bv128", false},
		{q35, true, "gdn_hopper_bf16_fused_nonorm_bv128", true},
		{q35, false, "gdn_hopper_bf16_fused_nonorm_bv128", false},
		{tp8, true, "gdn_hopper_bf16_fused_nonorm_bv128", false},
		{q35, true, "gdn_hopper_bf16_l2norm_bv128", false},
		{q35, true, "gdn_hopper_bf16_fp16qk_bv128", false},
		{q397, true, "gdn_hopper_bf16_fused_bv128", true},
		{q397, true, "gdn_hopper_bf16_fp16qk_bv128", false},
		{tp8, false, "gdn_scan_states_c8", true},
		{tp8, false, "gdn_scan_states_c32", false},
		{tp8, true, "gdn_hopper_bf16_fused_bv128", false},
		{tp8, true, "gdn_hopper_bf16_fp16qk_bv128_transfer", true},
	} {
		if got := has(c.p, c.full, c.name); got != c.want {
			t.Errorf("Hq %d Hv %d full %v: %s listed %v, want %v", c.p.Hq, c.p.Hv, c.full, c.name, got, c.want)
		}
	}
}
