package jit

import (
	"slices"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/kernsrc"
)

// GDN_JIT_DEFINES reaches the compile options (and so the cache key) only
// in a development build: a release build's request for the same variant
// is the one without it. Run with and without -tags gdndev.
func TestDefinesEnvOnlyInDevBuild(t *testing.T) {
	v, ok := kernsrc.Lookup("test_axpy")
	if !ok {
		t.Fatal("no test_axpy")
	}
	t.Setenv(DefinesEnv, "")
	plain, err := RequestFor(v, sm90a)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(DefinesEnv, "GDN_EXPERIMENT=3 GDN_OTHER")
	req, err := RequestFor(v, sm90a)
	if err != nil {
		t.Fatal(err)
	}
	honoured := slices.Contains(req.Options, "-DGDN_EXPERIMENT=3") && slices.Contains(req.Options, "-DGDN_OTHER")
	if DevBuild {
		if !honoured || Key(req, 12, 4) == Key(plain, 12, 4) {
			t.Errorf("development build: options %v lack %s's defines, or the key ignores them", req.Options, DefinesEnv)
		}
		return
	}
	if honoured || !slices.Equal(req.Options, plain.Options) || Key(req, 12, 4) != Key(plain, 12, 4) {
		t.Errorf("release build: %s changed the request: options %v, want %v", DefinesEnv, req.Options, plain.Options)
	}
}

// GDN_LAB swaps a lab experiment's kernels in only in a development build.
func TestLabOnlyInDevBuild(t *testing.T) {
	v, err := kernsrc.HopperVariant(kernsrc.CoreBF16Fused, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GDN_LAB", "fused_consumers")
	req, err := RequestFor(v, sm90a)
	if err != nil {
		t.Fatal(err)
	}
	swapped := req.Name != v.Name || req.Entries[0] != v.Kernel
	if swapped != DevBuild {
		t.Errorf("development build %v: request %s for %s, entry %s", DevBuild, req.Name, v.Name, req.Entries[0])
	}
	if DevBuild {
		t.Setenv("GDN_LAB", "no_such_experiment")
		if _, err := RequestFor(v, sm90a); err == nil || !strings.Contains(err.Error(), "no_such_experiment") {
			t.Errorf("an unknown experiment: %v", err)
		}
	}
}

// LabWrongOutputs names the selected experiment only where it leaves work
// out and builds the kernel asked about, and only in a development build.
func TestLabWrongOutputsInDevBuild(t *testing.T) {
	fused, err := kernsrc.HopperVariant(kernsrc.CoreBF16Fused, 2)
	if err != nil {
		t.Fatal(err)
	}
	core, err := kernsrc.HopperVariant(kernsrc.CoreBF16, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lab, kernel string
		want        bool
	}{
		{"", fused.Name, false},
		{"noloads_consumers", fused.Name, true},
		{"noloads_consumers", core.Name, false}, // the fused kernels only
		{"noloads_consumers", "no_such_kernel", false},
		{"static_ring", core.Name, false}, // the same work: production's outputs
		{"no_such_experiment", fused.Name, false},
	} {
		t.Setenv("GDN_LAB", c.lab)
		name, wrong := LabWrongOutputs(c.kernel)
		want := c.want && DevBuild
		if wrong != want || (wrong && name != c.lab) || (!wrong && name != "") {
			t.Errorf("GDN_LAB=%q, kernel %s, development build %v: %q, %v; want %v", c.lab, c.kernel, DevBuild, name, wrong, want)
		}
	}
}
