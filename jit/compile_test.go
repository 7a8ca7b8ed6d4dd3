package jit

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/internal/testcache"
	"github.com/gdnjit/gdn/kernsrc"
)

var sm90a = Target{Major: 9, Minor: 0, ArchSpecific: true}

// TestCatalogueCompiles is the CI spill check (docs/TOOLCHAIN.md): every variant
// compiles for sm_90a with 0 bytes of spills and no serialized wgmma. Where
// NVRTC leaves out the ptxas report (13.0, at times) the report is the
// cubin's own (CubinReport): no spill counts, so a stack frame fails the
// check instead, and serialisation cannot be seen (logged). Where both are
// there they must agree.
// sharedCompiler compiles through the tests' kernel cache (package
// testcache): an entry there is the kernel a compile would give, report
// included, so these tests check every variant without compiling it again
// on each run.
func sharedCompiler(t *testing.T) *Compiler {
	t.Helper()
	disk, err := OpenDiskCache(testcache.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	return NewCompiler(disk)
}

func TestCatalogueCompiles(t *testing.T) {
	needNVRTC(t)
	c := sharedCompiler(t)
	cat := kernsrc.Catalogue()
	if len(cat) == 0 {
		t.Fatal("empty catalogue")
	}
	for _, v := range cat {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			req, err := RequestFor(v, sm90a)
			if err != nil {
				t.Fatal(err)
			}
			a, err := c.Compile(req)
			if err != nil {
				t.Fatal(err)
			}
			if a.IsPTX || len(a.Image) == 0 || !bytes.HasPrefix(a.Image, []byte("\x7fELF")) {
				t.Fatalf("image of %d bytes is not a cubin", len(a.Image))
			}
			f, ok := a.Report.Function(a.Symbol(v.Kernel))
			if !ok || !f.Entry {
				t.Fatalf("report has no entry %s:\n%s\nlog:\n%s", v.Kernel, a.Report, a.Log)
			}
			if a.Report.Spills() {
				t.Errorf("spills:\n%s", a.Report)
			}
			if a.Report.Serialized() {
				t.Errorf("ptxas serialized the wgmma instructions:\n%s", strings.Join(a.Report.Warnings, "\n"))
			}
			if a.Report.FromCubin {
				t.Logf("no ptxas report: registers and stack frame from the cubin (wgmma serialisation unseen)")
			} else if f.Arch != "sm_90a" {
				t.Errorf("ptxas compiled %s for %q", v.Kernel, f.Arch)
			} else if cr, err := CubinReport(a.Image); err != nil {
				t.Error(err)
			} else if cf, _ := cr.Function(f.Name); cf.Registers != f.Registers || cf.StackFrame != f.StackFrame {
				t.Errorf("the cubin says %d registers and a %d-byte frame, ptxas %d and %d", cf.Registers, cf.StackFrame, f.Registers, f.StackFrame)
			}
			t.Logf("METRIC variant=%s registers=%d spill_bytes=%d stack=%d smem=%d compile_ms=%.0f",
				v.Name, f.Registers, a.Report.SpillBytes(), f.StackFrame, f.SharedBytes, a.CompileTime.Seconds()*1e3)
			for _, w := range a.Report.Warnings {
				t.Logf("ptxas: %s", w)
			}
		})
	}
}

// skipWithoutReport skips a test that reads ptxas's own report when NVRTC
// returned none (NVRTC 13.0 at times leaves the log empty despite
// --ptxas-options=-v, for programs it compiled before: a cache of its own)
// and the report is the cubin's (CubinReport). CI's NVRTC 12.4 always
// reports, so the checks never skip there.
func skipWithoutReport(t *testing.T, a *Artifact) {
	t.Helper()
	if a.Report.FromCubin || strings.TrimSpace(a.Log) == "" {
		t.Skipf("NVRTC returned no ptxas report for %s", a.Name)
	}
}

func TestCompileErrorHasLog(t *testing.T) {
	needNVRTC(t)
	req := Request{
		Name:   "broken",
		File:   "broken.cu",
		Source: "extern \"C\" __global__ void k(float* x) {\n  x[0] = 1.0f;\n  undeclared_thing(x);\n}\n",
		Target: sm90a,
	}
	_, err := NewCompiler(nil).Compile(req)
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("Compile = %v, want a *CompileError", err)
	}
	for _, s := range []string{"broken.cu(3)", "undeclared_thing"} {
		if !strings.Contains(ce.Log, s) || !strings.Contains(err.Error(), s) {
			t.Errorf("log lacks %q:\n%s", s, ce.Log)
		}
	}
	if !strings.Contains(err.Error(), "-arch=sm_90a") {
		t.Errorf("error lacks the options: %v", err)
	}
}

func TestCompileMissingEntry(t *testing.T) {
	needNVRTC(t)
	req := Request{
		Name:    "noentry",
		Source:  "extern \"C\" __global__ void k(float* x) { x[0] = 1.0f; }\n",
		Entries: []string{"not_a_kernel"},
		Target:  sm90a,
	}
	_, err := NewCompiler(nil).Compile(req)
	var ce *CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Log, "not_a_kernel") {
		t.Fatalf("Compile = %v, want a *CompileError naming not_a_kernel", err)
	}
}

func TestCompileTemplateEntryAndHeaders(t *testing.T) {
	needNVRTC(t)
	req := Request{
		Name:    "tmpl",
		Source:  "#include \"scale.cuh\"\ntemplate <int N> __global__ void scale(float* x) { x[threadIdx.x] *= factor<N>(); }\n",
		Headers: map[string]string{"scale.cuh": "template <int N> __device__ float factor() { return float(N); }\n"},
		Entries: []string{"scale<4>"},
		Target:  Target{Major: 8, Minor: 0},
	}
	a, err := NewCompiler(nil).Compile(req)
	if err != nil {
		t.Fatal(err)
	}
	sym := a.Symbol("scale<4>")
	if sym == "scale<4>" || !strings.HasPrefix(sym, "_Z") {
		t.Errorf("lowered name %q, want a mangled name", sym)
	}
	// (A report read from the cubin, where NVRTC 13 served the program
	// from a cache of its own and left out ptxas's log, names no arch.)
	switch f, ok := a.Report.Function(sym); {
	case !ok || !f.Entry:
		t.Errorf("no entry %s in the report:\n%s", sym, a.Report)
	case !a.Report.FromCubin && f.Arch != "sm_80":
		t.Errorf("ptxas compiled %s for %q, want sm_80:\n%s", sym, f.Arch, a.Report)
	}
	// The cubin's own report, the one NVRTC 13 falls back on, finds the
	// templated entry by its mangled name too.
	if cr, err := CubinReport(a.Image); err != nil {
		t.Error(err)
	} else if cf, ok := cr.Function(sym); !ok || !cf.Entry {
		t.Errorf("the cubin's report has no entry %s:\n%s", sym, cr)
	}
}

func TestCompilePTX(t *testing.T) {
	needNVRTC(t)
	req := Request{
		Name:    "ptx",
		Source:  "extern \"C\" __global__ void k(float* x) { x[0] = 1.0f; }\n",
		Entries: []string{"k"},
		Target:  Target{Major: 9, Minor: 0, PTX: true},
	}
	a, err := NewCompiler(nil).Compile(req)
	if err != nil {
		t.Fatal(err)
	}
	if !a.IsPTX || !bytes.Contains(a.Image, []byte(".target sm_90")) || len(a.Report.Functions) != 0 {
		t.Errorf("IsPTX=%v report=%v image starts %q", a.IsPTX, a.Report, a.Image[:min(200, len(a.Image))])
	}
	for _, o := range req.CompileOptions() {
		if strings.HasPrefix(o, "--ptxas") {
			t.Errorf("PTX target has ptxas option %q", o)
		}
	}
}

func TestCompileOptions(t *testing.T) {
	req := Request{Options: []string{"-DX=1"}, Target: sm90a}
	got := strings.Join(req.CompileOptions(), " ")
	if got != "-std=c++17 -arch=sm_90a --ptxas-options=-v -DX=1" {
		t.Errorf("CompileOptions = %q", got)
	}
}

func TestRequestFor(t *testing.T) {
	v, ok := kernsrc.Lookup("test_axpy")
	if !ok {
		t.Fatal("no test_axpy")
	}
	req, err := RequestFor(v, sm90a)
	if err != nil {
		t.Fatal(err)
	}
	if req.Name != "test_axpy" || req.File != v.File || len(req.Entries) != 1 || req.Entries[0] != "gdn_test_axpy" {
		t.Errorf("RequestFor = %+v", req)
	}
	if _, ok := req.Headers["gdn_common.cuh"]; !ok {
		t.Errorf("headers %v lack gdn_common.cuh", keys(req.Headers))
	}
	if _, err := RequestFor(kernsrc.Variant{Name: "x", File: "nope.cu"}, sm90a); err == nil {
		t.Error("RequestFor with a missing file succeeded")
	}
}

// TestBuiltinsWithoutLoaderPath loads NVRTC from its folder in a process
// whose LD_LIBRARY_PATH is empty: the builtins library must be found by the
// dlopen of its folder, not by the loader path.
func TestBuiltinsWithoutLoaderPath(t *testing.T) {
	n := needNVRTC(t)
	cmd := childCmd(t, "test_axpy", t.TempDir(),
		"LD_LIBRARY_PATH=", "GDN_NVRTC_PATH="+filepath.Dir(n.Path()))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if _, err := parseChild(out); err != nil {
		t.Fatal(err)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The Hopper kernel's test builds (kernsrc.HopperHooked), which only the
// GPU tests compile, compile clean too: the transfer pass walking to the
// end, and the early pass delayed.
func TestHopperHooksCompile(t *testing.T) {
	needNVRTC(t)
	xfer, err := kernsrc.HopperTransferVariant(kernsrc.CoreBF16, 2)
	if err != nil {
		t.Fatal(err)
	}
	core, err := kernsrc.HopperVariant(kernsrc.CoreBF16, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := sharedCompiler(t)
	for _, pair := range [][2]kernsrc.Variant{
		{xfer, kernsrc.HopperHooked(xfer, kernsrc.HopperHooks{WalkToEnd: true})},
		{core, kernsrc.HopperHooked(core, kernsrc.HopperHooks{DelayEarlyPass: true})},
	} {
		prod, v := pair[0], pair[1]
		t.Run(v.Name, func(t *testing.T) {
			req, err := RequestFor(v, sm90a)
			if err != nil {
				t.Fatal(err)
			}
			a, err := c.Compile(req)
			if err != nil {
				t.Fatal(err)
			}
			preq, err := RequestFor(prod, sm90a)
			if err != nil {
				t.Fatal(err)
			}
			p, err := c.Compile(preq)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(a.Image, p.Image) {
				t.Errorf("%s builds the same cubin as %s: the hook changes nothing", v.Name, prod.Name)
			}
			skipWithoutReport(t, a)
			if _, ok := a.Report.Function(a.Symbol(v.Kernel)); !ok || a.Report.Spills() || a.Report.Serialized() {
				t.Errorf("%s:\n%s", v.Kernel, a.Report)
			}
		})
	}
}
