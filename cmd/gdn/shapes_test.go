package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/testcache"
)

func TestParseShape(t *testing.T) {
	cases := []struct {
		in           string
		b, t, hq, hv int
		n            int
		seqs         bool
	}{
		{"tp8_32k", 1, 32768, 2, 8, 1, false},
		{"q35_4kx8", 1, 32768, 16, 32, 8, true},
		{"Hq=2, Hv=6, T=300, B=3", 3, 300, 2, 6, 3, false},
		{"Hq=16,Hv=32,lens=4096x8", 1, 32768, 16, 32, 8, true},
		{"Hq=1,Hv=1,lens=7000+33+0+1", 1, 7034, 1, 1, 4, true},
	}
	for _, c := range cases {
		p, err := parseShape(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if p.B != c.b || p.T != c.t || p.Hq != c.hq || p.Hv != c.hv || p.N != c.n || (p.Seqs != nil) != c.seqs {
			t.Errorf("%q: got %+v", c.in, p)
		}
	}
	for _, bad := range []string{"Hq=2,Hv=8", "Hq=2,Hv=7,T=10", "Hq=2,Hv=8,T=10,lens=5x2", "Hq=2,Hv=8,T=-1",
		"Hq=2,Hv=8,T=10,X=1", "nonsense", "Hq=2,Hv=8,lens=4096y8"} {
		if _, err := parseShape(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestVariantsForShapes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "shapes.txt")
	os.WriteFile(file, []byte("# Qwen3.5 TP8\ntp8_32k\n\nHq=16,Hv=32,lens=4096x8  # many heads\n"), 0o644)
	shapes, err := readShapes("Hq=2,Hv=8,T=2048", file)
	if err != nil || len(shapes) != 3 {
		t.Fatalf("readShapes: %d shapes, %v", len(shapes), err)
	}
	vs, err := variantsForShapes(shapes, []gdn.Dtype{gdn.BF16, gdn.FP16}, 132, false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
	}
	// Few heads take 64-wide tiles (more CTAs) and split (a 128-wide
	// transfer pass, the scan); 8 x 32 chains fill the GPU at 128.
	want := "gdn_hopper_bf16_bv64,gdn_hopper_bf16_bv128_transfer,gdn_scan_states_c8," +
		"gdn_hopper_fp16_bv64,gdn_hopper_fp16_bv128_transfer,gdn_hopper_bf16_bv128,gdn_hopper_fp16_bv128"
	if got := strings.Join(names, ","); got != want {
		t.Errorf("variants %s, want %s", got, want)
	}
	// With the full forward: its preparation (four heads a block where the
	// grid is large), its core on the fp16 copies of q and k where it
	// splits, and doing the whole preparation itself on the 16/32-head bf16
	// shape.
	vs, err = variantsForShapes(shapes, []gdn.Dtype{gdn.BF16, gdn.FP16}, 132, true)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, v := range vs {
		got[v.Name] = true
	}
	for _, name := range append(names, "gdn_prep_chunk_bf16", "gdn_prep_chunk_fp16", "gdn_prep_chunk_bf16_h4",
		"gdn_hopper_bf16_fp16qk_bv64", "gdn_hopper_bf16_fp16qk_bv128_transfer", "gdn_hopper_bf16_fused_bv128",
		"gdn_hopper_bf16_fused_nonorm_bv128") {
		if !got[name] {
			t.Errorf("--full: %s missing from %d variants", name, len(vs))
		}
	}
	if _, err := readShapes("", filepath.Join(dir, "missing")); err == nil {
		t.Error("missing shapes file accepted")
	}
}

func TestWarmupShapes(t *testing.T) {
	needNVRTC(t)
	// tp8_2k runs split at BV 64: its output pass, a 128-wide transfer pass
	// and the scan, and nothing else.
	code, out, errOut := runGDN(t, "warmup", "--arch", "sm_90a", "--cache-dir", testcache.Dir(t), "--shapes", "tp8_2k")
	if code != 0 || !strings.Contains(out, "gdn_hopper_bf16_bv64 ") || !strings.Contains(out, "gdn_hopper_bf16_bv128_transfer") ||
		!strings.Contains(out, "gdn_scan_states") || strings.Contains(out, "gdn_hopper_bf16_bv128 ") || strings.Contains(out, "gdn_prep") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// --full adds the full forward's preparation and its core on fp16 copies.
	code, out, errOut = runGDN(t, "warmup", "--arch", "sm_90a", "--cache-dir", testcache.Dir(t), "--shapes", "tp8_2k", "--full")
	if code != 0 || !strings.Contains(out, "gdn_prep_chunk_bf16") || !strings.Contains(out, "gdn_hopper_bf16_fp16qk_bv64") {
		t.Fatalf("--full: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if code, _, _ := runGDN(t, "warmup", "--arch", "sm_90a", "--full"); code == 0 {
		t.Error("--full without --shapes accepted")
	}
	if code, _, _ := runGDN(t, "warmup", "--arch", "sm_90a", "--shapes", "tp8_2k", "--variants", "test_axpy"); code == 0 {
		t.Error("--shapes with --variants accepted")
	}
}
