package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/internal/testcache"
	"github.com/gdnjit/gdn/jit"
	"github.com/gdnjit/gdn/kernsrc"
)

func TestWarmupOneVariant(t *testing.T) {
	needNVRTC(t)
	dir := t.TempDir()
	t.Setenv(jit.CacheDirEnv, dir)
	code, out, errOut := runGDN(t, "warmup", "--arch", "sm_90a", "--variants", "test_axpy")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	row := regexp.MustCompile(`(?m)^test_axpy\s+(\d+)\s+(\d+)\s+0\s+0\s+0\s+ok$`)
	if reportMayBeMissing() { // the cubin's registers and frame, no spill count or smem
		row = regexp.MustCompile(`(?m)^test_axpy\s+(\d+)\s+(\d+|-)\s+(0|\?)\s+(0|-)\s+(0|-)\s+ok( \(no report\))?$`)
	}
	if !row.MatchString(out) || !strings.HasPrefix(out, "variant ") {
		t.Errorf("no compiled test_axpy row in:\n%s", out)
	}
	if strings.Contains(out, "test_smem_reverse") {
		t.Errorf("--variants test_axpy compiled more:\n%s", out)
	}
	if !strings.Contains(errOut, "[1/1] test_axpy: compiled") {
		t.Errorf("no progress line in stderr:\n%s", errOut)
	}
	disk, _ := jit.OpenDiskCache(dir)
	if n, _, err := disk.Size(); n != 1 || err != nil {
		t.Errorf("cache holds %d entries (%v), want 1", n, err)
	}

	code, out, _ = runGDN(t, "warmup", "--arch", "sm_90a", "--variants", "test_axpy")
	if code != 0 || !regexp.MustCompile(`(?m)^test_axpy\s+disk\s+(\d+|-)\s+(0|\?)\s`).MatchString(out) {
		t.Errorf("second warm-up: exit %d, want a disk row:\n%s", code, out)
	}
	t.Logf("\n%s", out)
}

func TestWarmupAll(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the whole catalogue (jit's TestCatalogueCompiles checks it too)")
	}
	needNVRTC(t)
	// The tests' kernel cache (package testcache): a row read from disk is
	// the kernel a compile would give, with its report.
	code, out, errOut := runGDN(t, "warmup", "--arch", "sm_90a", "--cache-dir", testcache.Dir(t))
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// NVRTC 13 (the GPU machine's) serves kernels it compiled before from a
	// cache of its own, without a ptxas report: the cubin's registers and
	// stack frame stand in, and the spill count shows as "?". CI's NVRTC
	// 12.4 always reports.
	spill := `0`
	if reportMayBeMissing() {
		spill = `(0|\?)`
	}
	for _, v := range kernsrc.Catalogue() {
		if !regexp.MustCompile(`(?m)^` + v.Name + `\s+(\d+|disk)\s+\d+\s+` + spill + `\s`).MatchString(out) {
			t.Errorf("no row for %s", v.Name)
		}
	}
	t.Logf("\n%s", out)
}

// A variant that fails to compile fails the warmup; one that spills is
// reported (table, stderr) and fails it only with --strict: it was cached
// and runs.
func TestWarmupFailsOnCompileErrorAndStrictSpill(t *testing.T) {
	needNVRTC(t)
	oldCat, oldReq := catalogue, requestFor
	defer func() { catalogue, requestFor = oldCat, oldReq }()
	variants := []kernsrc.Variant{
		{Name: "test_axpy", File: "test_kernels.cu", Kernel: "gdn_test_axpy"},
		{Name: "spiller", Kernel: "spill"},
		{Name: "broken", Kernel: "broken"},
	}
	runs := 0
	requestFor = func(v kernsrc.Variant, t jit.Target) (jit.Request, error) {
		switch v.Name {
		case "spiller":
			// A source of its own each run: NVRTC 13 returns a program it
			// compiled before without the ptxas report, and the spill would
			// go unseen (docs/TOOLCHAIN.md).
			return jit.Request{Name: v.Name, Target: t, Entries: []string{"spill"}, Options: []string{"-maxrregcount=16"},
				Source: spillSource + fmt.Sprintf("// run %d\n", runs)}, nil
		case "broken":
			return jit.Request{Name: v.Name, Target: t, Source: "extern \"C\" __global__ void broken() { nope(); }\n"}, nil
		}
		return jit.RequestFor(v, t)
	}
	run := func(vs []kernsrc.Variant, args ...string) (int, string, string) {
		runs++
		catalogue = func() []kernsrc.Variant { return vs }
		return runGDN(t, append([]string{"warmup", "--arch", "sm_90a", "--cache-dir", t.TempDir()}, args...)...)
	}

	// A spill shows with or without ptxas's report (NVRTC 13 leaves some
	// out): the cubin's stack frame stands for it (spill count "?").
	code, out, errOut := run(variants)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, re := range []string{`(?m)^test_axpy\s.*\sok( \(no report\))?$`, `(?m)^spiller\s+\d+\s+\d+\s+([1-9]\d*|\?)\s.*SPILLS$`, `(?m)^broken\s.*COMPILE ERROR$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("table lacks %s:\n%s", re, out)
		}
	}
	for _, s := range []string{"spiller spills registers", "broken failed", "nope", "1 of 3 variants failed"} {
		if !strings.Contains(errOut, s) {
			t.Errorf("stderr lacks %q:\n%s", s, errOut)
		}
	}
	if code, _, errOut = run(variants, "--strict"); code != 1 || !strings.Contains(errOut, "1 of 3 variants failed, 1 more spill") {
		t.Errorf("--strict: exit %d, stderr:\n%s", code, errOut)
	}

	// Spills alone: a warning, exit 0; with --strict, exit 1.
	clean := variants[:2]
	if code, _, errOut = run(clean); code != 0 || !strings.Contains(errOut, "warning: 1 of 2 variants spill registers") {
		t.Errorf("spill without --strict: exit %d, want 0 with a warning:\n%s", code, errOut)
	}
	if code, _, errOut = run(clean, "--strict"); code != 1 || !strings.Contains(errOut, "1 of 2 variants spill registers (--strict)") {
		t.Errorf("spill with --strict: exit %d, want 1:\n%s", code, errOut)
	}
}

// spillSource needs far more than the 24 registers -maxrregcount allows.
const spillSource = `extern "C" __global__ void spill(const float* x, float* y) {
  float v[48];
#pragma unroll
  for (int i = 0; i < 48; i++) v[i] = x[threadIdx.x * 48 + i];
  float s = 0;
#pragma unroll
  for (int j = 0; j < 48; j++)
#pragma unroll
    for (int i = 0; i < 48; i++) s += v[i] * v[(i + j) % 48];
  y[threadIdx.x] = s;
}
`

func TestWarmupBadArguments(t *testing.T) {
	needNVRTC(t)
	code, _, errOut := runGDN(t, "warmup", "--arch", "sm_90a", "--variants", "test_axpy,nope", "--cache-dir", t.TempDir())
	if code != 1 || !strings.Contains(errOut, `no variant "nope"`) || !strings.Contains(errOut, "test_axpy") {
		t.Errorf("unknown variant: exit %d, stderr:\n%s", code, errOut)
	}
	code, _, errOut = runGDN(t, "warmup", "--arch", "hopper", "--cache-dir", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "hopper") {
		t.Errorf("bad arch: exit %d, stderr:\n%s", code, errOut)
	}
	// Any target but sm_90a is one line of error, before anything compiles.
	for _, arch := range []string{"sm_75", "sm_80", "sm_200", "compute_90"} {
		code, out, errOut := runGDN(t, "warmup", "--arch", arch, "--cache-dir", t.TempDir())
		want := "gdn warmup: " + arch + ": unsupported GPU: the kernels need sm_90a"
		if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, want) || strings.Contains(errOut, "\x00") {
			t.Errorf("--arch %s: exit %d, stdout %q, stderr:\n%s", arch, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"--all", "--variants", "test_axpy"}, {"--all", "--shapes", "a;Hq=1,Hv=1,lens=64"}} {
		code, _, errOut := runGDN(t, append([]string{"warmup", "--arch", "sm_90a", "--cache-dir", t.TempDir()}, args...)...)
		if code != 1 || !strings.Contains(errOut, "--all compiles every variant") {
			t.Errorf("%v: exit %d, stderr:\n%s", args, code, errOut)
		}
	}
}

// TestWarmupSM90 reads sm_90 as sm_90a and says so once.
func TestWarmupSM90(t *testing.T) {
	needNVRTC(t)
	code, out, errOut := runGDN(t, "warmup", "--arch", "sm_90", "--variants", "test_axpy", "--cache-dir", t.TempDir())
	if code != 0 || strings.Count(errOut, "sm_90 taken as sm_90a") != 1 || !strings.Contains(errOut, "for sm_90a") {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestWarmupAllFlag: --all compiles the whole catalogue, as no selection
// does (a two-variant catalogue keeps it quick).
func TestWarmupAllFlag(t *testing.T) {
	needNVRTC(t)
	oldCat := catalogue
	defer func() { catalogue = oldCat }()
	catalogue = func() []kernsrc.Variant {
		return []kernsrc.Variant{
			{Name: "test_axpy", File: "test_kernels.cu", Kernel: "gdn_test_axpy"},
			{Name: "test_smem_reverse", File: "test_kernels.cu", Kernel: "gdn_test_smem_reverse"},
		}
	}
	code, out, errOut := runGDN(t, "warmup", "--arch", "sm_90a", "--all", "--cache-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	for _, v := range catalogue() {
		if !strings.Contains(out, v.Name) {
			t.Errorf("--all: %s missing from the table:\n%s", v.Name, out)
		}
	}
}

func TestProgressPlain(t *testing.T) {
	var b strings.Builder
	p := newProgress(&b, 2)
	p.step("a", warmResult{art: &jit.Artifact{}})
	p.step("b", warmResult{art: &jit.Artifact{FromDisk: true}})
	p.finish()
	if b.String() != "[1/2] a: compiled\n[2/2] b: from disk\n" {
		t.Errorf("plain progress:\n%q", b.String())
	}
	f, err := os.CreateTemp(t.TempDir(), "notatty")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a regular file is a terminal")
	}
}

// reportMayBeMissing reports whether the NVRTC found may return no ptxas
// report: NVRTC 13 (the GPU machine's) sometimes leaves the log empty for
// kernels it compiled before (a cache of its own; see jit's
// skipWithoutReport). CI's NVRTC 12.4 always reports, so there the checks
// that read the report never relax.
func reportMayBeMissing() bool {
	n, err := jit.LoadNVRTC()
	if err != nil {
		return false
	}
	major, _ := n.Version()
	return major >= 13
}

// TestWarmTableNoReport: a cubin whose ptxas report lacks the kernel (NVRTC
// 13's own cache returns such) is not called "ok", so that device-run.sh's
// check of the table does not pass a kernel nobody saw the registers of;
// one with a report, or a PTX image, is.
func TestWarmTableNoReport(t *testing.T) {
	var out bytes.Buffer
	old := stdout
	stdout = &out
	defer func() { stdout = old }()
	v := func(name string) kernsrc.Variant { return kernsrc.Variant{Name: name, Kernel: "k"} }
	reported := jit.Report{Functions: []jit.FunctionReport{{Name: "k", Entry: true, Registers: 40}}}
	printWarmTable([]warmResult{
		{variant: v("with_report"), art: &jit.Artifact{Report: reported}},
		{variant: v("without_report"), art: &jit.Artifact{}},
		{variant: v("ptx_image"), art: &jit.Artifact{IsPTX: true}},
	})
	for _, re := range []string{`(?m)^with_report\s+\d+\s+40\s+0\s.*\sok$`, `(?m)^without_report\s.*\sok \(no report\)$`, `(?m)^ptx_image\s.*\sok \(ptx\)$`} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("table lacks %s:\n%s", re, out.String())
		}
	}
}

// Without ptxas's report (NVRTC 13 leaves some out) a variant is "ok (no
// report)" and does not fail --strict; a spill still does: the report
// read from the cubin counts its stack frame. (The compile is stubbed with
// the artifacts NVRTC 13 returns.)
func TestWarmupWithoutPtxasReport(t *testing.T) {
	needNVRTC(t)
	oldCat, oldCompile := catalogue, compile
	defer func() { catalogue, compile = oldCat, oldCompile }()
	catalogue = func() []kernsrc.Variant {
		return []kernsrc.Variant{{Name: "test_axpy", File: "test_kernels.cu", Kernel: "gdn_test_axpy"}}
	}
	for _, c := range []struct {
		name   string
		report jit.Report
		row    string
		strict int
	}{
		{"no report at all", jit.Report{}, `(?m)^test_axpy\s+\d+\s+-\s+0\s+-\s+-\s+ok \(no report\)$`, 0},
		{"cubin, no frame", jit.Report{FromCubin: true, Functions: []jit.FunctionReport{{Name: "gdn_test_axpy", Entry: true, Registers: 10}}},
			`(?m)^test_axpy\s+\d+\s+10\s+\?\s+0\s+-\s+ok \(no report\)$`, 0},
		{"cubin, a frame", jit.Report{FromCubin: true, Functions: []jit.FunctionReport{{Name: "gdn_test_axpy", Entry: true, Registers: 16, StackFrame: 8}}},
			`(?m)^test_axpy\s+\d+\s+16\s+\?\s+8\s+-\s+SPILLS$`, 1},
	} {
		compile = func(*jit.Compiler, jit.Request) (*jit.Artifact, error) {
			return &jit.Artifact{Name: "test_axpy", Image: []byte("\x7fELF"), Report: c.report}, nil
		}
		for _, strict := range []bool{false, true} {
			args := []string{"warmup", "--arch", "sm_90a", "--cache-dir", t.TempDir()}
			want := 0
			if strict {
				args, want = append(args, "--strict"), c.strict
			}
			code, out, errOut := runGDN(t, args...)
			if code != want || !regexp.MustCompile(c.row).MatchString(out) || !strings.Contains(errOut, "1 of 1 variants came without a ptxas report") {
				t.Errorf("%s, strict %v: exit %d, want %d; stdout:\n%s\nstderr:\n%s", c.name, strict, code, want, out, errOut)
			}
		}
	}
}
