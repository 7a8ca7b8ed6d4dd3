package lab_test

import (
	"strings"
	"testing"

	"github.com/gdnjit/gdn/internal/testcache"
	"github.com/gdnjit/gdn/jit"
	"github.com/gdnjit/gdn/kernsrc"
	"github.com/gdnjit/gdn/kernsrc/lab"
)

// Every experiment names a file of its own and applies to some catalogue
// variants: those it builds with its roles, named apart, from its own
// main file; the others it leaves alone.
func TestExperimentsApply(t *testing.T) {
	if _, err := lab.Lookup("nope"); err == nil {
		t.Error("an unknown experiment was found")
	}
	for _, e := range lab.Experiments() {
		applied := 0
		for _, v := range kernsrc.Catalogue() {
			lv, err := e.Variant(v)
			if err != nil {
				t.Fatalf("%s of %s: %v", e.Name, v.Name, err)
			}
			if lv.Name == v.Name {
				if lv.Kernel != v.Kernel || lv.Text != "" {
					t.Errorf("%s left %s's name but changed its build: %+v", e.Name, v.Name, lv)
				}
				continue
			}
			applied++
			src, err := lv.Source()
			// The production kernel on the variant's configuration (wrapped
			// by the experiment's Cfg) and the experiment's roles, which its
			// file defines.
			cfg := strings.TrimSuffix(strings.TrimPrefix(v.Kernel, kernsrc.HopperKernel+"<"), ">")
			defines := "struct " + e.Roles
			if e.Cfg != "" {
				cfg = e.Cfg + "<" + cfg + ">"
				defines = "struct " + e.Cfg
			}
			want := kernsrc.HopperKernel + "<" + cfg + ">"
			if e.Roles != "" {
				want = kernsrc.HopperKernel + "<" + cfg + ", " + e.Roles + ">"
			}
			if err != nil || !strings.Contains(src, defines) || lv.Kernel != want || !strings.HasSuffix(lv.Name, "_lab_"+e.Name) {
				t.Errorf("%s of %s: %+v, want entry %s (%v)", e.Name, v.Name, lv, want, err)
			}
			// The files it uses come first, each once, in order, then its own.
			at := 0
			for _, f := range append(append([]string(nil), e.Uses...), e.File) {
				mark := "#line 1 \"lab/" + f + "\"\n"
				if len(e.Uses) == 0 {
					break
				}
				i := strings.Index(src[at:], mark)
				if i < 0 || strings.Count(src, mark) != 1 {
					t.Errorf("%s of %s: %s not once after byte %d of its program", e.Name, v.Name, f, at)
					break
				}
				at += i + len(mark)
			}
		}
		if applied == 0 {
			t.Errorf("%s applies to no catalogue variant", e.Name)
		}
	}
}

// The experiments compile for sm_90a with NVRTC (when it is found), with
// no spill and their wgmma pipelined: a time measured on a kernel that
// spills or serialises its products says nothing of the design it tests.
func TestExperimentsCompile(t *testing.T) {
	if _, err := jit.LoadNVRTC(); err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	if testing.Short() {
		t.Skip("compiles kernels")
	}
	// Through the tests' kernel cache (package testcache): an entry there
	// is what a compile of these sources gives.
	disk, err := jit.OpenDiskCache(testcache.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	c := jit.NewCompiler(disk)
	for _, e := range lab.Experiments() {
		for _, v := range kernsrc.HopperVariants() {
			lv, _ := e.Variant(v)
			if lv.Name == v.Name {
				continue
			}
			req, err := jit.RequestFor(lv, jit.Target{Major: 9, Minor: 0, ArchSpecific: true})
			if err != nil {
				t.Fatal(err)
			}
			a, err := c.Compile(req)
			if err != nil {
				t.Fatalf("%s: %v", lv.Name, err)
			}
			t.Logf("%s:\n%s", lv.Name, a.Report)
			// (NVRTC 13 returns a program it compiled before without the
			// report; then the registers come from the cubin, and whether
			// ptxas serialised the products is not known.)
			if _, ok := a.Report.Function(a.Symbol(lv.Kernel)); !ok || a.Report.Spills() ||
				(!a.Report.FromCubin && a.Report.Serialized()) {
				t.Errorf("%s spills or serialises its wgmma:\n%s", lv.Name, a.Report)
			}
		}
	}
}

// An experiment's doc says "(outputs wrong)" exactly when it is marked
// WrongOutputs, the mark a timing run reads to let its NaN outputs pass.
func TestExperimentsWrongOutputsDocumented(t *testing.T) {
	for _, e := range lab.Experiments() {
		if says := strings.Contains(e.Doc, "(outputs wrong)"); says != e.WrongOutputs {
			t.Errorf("%s: WrongOutputs %v, but its doc %q", e.Name, e.WrongOutputs, e.Doc)
		}
	}
}
