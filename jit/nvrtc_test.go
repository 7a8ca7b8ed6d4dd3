package jit

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// needNVRTC returns NVRTC or stops the test: it fails in CI (env CI set),
// where scripts/cuda-sdk.sh provides NVRTC, and skips elsewhere.
func needNVRTC(t testing.TB) *NVRTC {
	t.Helper()
	n, err := LoadNVRTC()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must have NVRTC (eval \"$(scripts/cuda-sdk.sh)\"): %v", err)
		}
		t.Skipf("no NVRTC (run eval \"$(scripts/cuda-sdk.sh)\" first): %v", err)
	}
	return n
}

func TestLoadNVRTC(t *testing.T) {
	n := needNVRTC(t)
	major, minor := n.Version()
	if major < 11 {
		t.Errorf("NVRTC %d.%d: want 11 or later", major, minor)
	}
	if n.Path() == "" || !strings.Contains(filepath.Base(n.Path()), "nvrtc") {
		t.Errorf("Path() = %q, want a libnvrtc file", n.Path())
	}
	archs := n.SupportedArchs()
	if len(archs) == 0 || !n.Supports(90) {
		t.Errorf("SupportedArchs() = %v, want one with 90", archs)
	}
	again, err := LoadNVRTC()
	if err != nil || again != n {
		t.Errorf("second LoadNVRTC = %p, %v; want the same library %p", again, err, n)
	}
	t.Logf("%s, archs %v", n, archs)
}

func TestCandidatesOrder(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"libnvrtc.so.12", "libnvrtc.so.12.4.127", "libnvrtc-builtins.so.12.4"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// GDN_NVRTC_PATH set: its folder only, soname first, then versioned files.
	t.Setenv("GDN_NVRTC_PATH", dir)
	t.Setenv("CUDA_HOME", filepath.Join(dir, "missing"))
	cands, _ := candidates()
	var paths []string
	for _, c := range cands {
		paths = append(paths, c.path)
	}
	want := []string{filepath.Join(dir, "libnvrtc.so.12"), filepath.Join(dir, "libnvrtc.so.12.4.127")}
	if !slices.Equal(paths, want) {
		t.Errorf("with GDN_NVRTC_PATH: candidates %v, want %v", paths, want)
	}
	// Unset: $CUDA_HOME/lib64 (missing, so noted), /usr/local/cuda/lib64, the
	// sonames, then scripts/cuda-sdk.sh's folder (missing here, so the
	// sonames come last; nvrtc_sdk_test.go tests that folder).
	t.Setenv("GDN_NVRTC_PATH", "")
	t.Setenv(SDKDirEnv, filepath.Join(dir, "missing-sdk"))
	cands, skipped := candidates()
	paths = paths[:0]
	for _, c := range cands {
		paths = append(paths, c.path)
	}
	if len(paths) < len(sonames) || !slices.Equal(paths[len(paths)-len(sonames):], sonames) {
		t.Errorf("without GDN_NVRTC_PATH: candidates %v, want the sonames %v last", paths, sonames)
	}
	found := false
	for _, s := range skipped {
		if strings.Contains(s.Path, "missing") {
			found = true
		}
	}
	if !found {
		t.Errorf("skipped = %v, want the missing $CUDA_HOME/lib64", skipped)
	}
}

func TestOpenLibReportsDlerror(t *testing.T) {
	bogus := filepath.Join(t.TempDir(), "libnvrtc.so.99")
	if err := os.WriteFile(bogus, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openLib(bogus); err == nil || !strings.Contains(err.Error(), "libnvrtc.so.99") {
		t.Errorf("openLib(garbage) = %v, want dlerror naming the file", err)
	}
	le := &LoadError{Tried: []Attempt{{Path: "/a/libnvrtc.so.12", Err: "cannot open"}, {Path: "libnvrtc.so", Err: "not found"}}}
	if !errors.Is(le, ErrNoNVRTC) {
		t.Error("LoadError does not unwrap to ErrNoNVRTC")
	}
	for _, s := range []string{"/a/libnvrtc.so.12: cannot open", "libnvrtc.so: not found", "GDN_NVRTC_PATH"} {
		if !strings.Contains(le.Error(), s) {
			t.Errorf("LoadError text lacks %q:\n%s", s, le.Error())
		}
	}
}
