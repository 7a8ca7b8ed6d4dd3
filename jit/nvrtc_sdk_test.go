package jit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSDKLibDir(t *testing.T) {
	for _, c := range []struct {
		sdk, xdg, home, want string
	}{
		{"/opt/sdk", "/x", "/h", "/opt/sdk/lib"},
		{"", "/x", "/h", "/x/gdn/cuda-sdk/lib"},
		{"", "", "/h", "/h/.cache/gdn/cuda-sdk/lib"},
		{"", "", "", ""},
	} {
		t.Setenv(SDKDirEnv, c.sdk)
		t.Setenv("XDG_CACHE_HOME", c.xdg)
		t.Setenv("HOME", c.home)
		if got := sdkLibDir(); got != c.want {
			t.Errorf("GDN_CUDA_SDK_DIR=%q XDG_CACHE_HOME=%q HOME=%q: sdkLibDir() = %q, want %q", c.sdk, c.xdg, c.home, got, c.want)
		}
	}
}

// Without GDN_NVRTC_PATH the folder of scripts/cuda-sdk.sh comes last, its
// builtins opened first (dir set); a missing one is listed as skipped.
func TestCandidatesEndWithSDKFolder(t *testing.T) {
	sdk := t.TempDir()
	lib := filepath.Join(sdk, "lib")
	if err := os.Mkdir(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"libnvrtc.so.12", "libnvrtc-builtins.so.12.4"} {
		if err := os.WriteFile(filepath.Join(lib, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GDN_NVRTC_PATH", "")
	t.Setenv("CUDA_HOME", "")
	t.Setenv(SDKDirEnv, sdk)
	cands, _ := candidates()
	last := cands[len(cands)-1]
	if want := filepath.Join(lib, "libnvrtc.so.12"); last.path != want || last.dir != lib {
		t.Errorf("last candidate %+v, want %s from folder %s", last, want, lib)
	}
	if got := cands[len(cands)-2].path; got != sonames[len(sonames)-1] {
		t.Errorf("candidate before the SDK folder is %q, want the last soname %q", got, sonames[len(sonames)-1])
	}

	missing := filepath.Join(sdk, "none")
	t.Setenv(SDKDirEnv, missing)
	_, skipped := candidates()
	found := false
	for _, s := range skipped {
		found = found || (s.Path == filepath.Join(missing, "lib") && strings.Contains(s.Err, "cuda-sdk.sh"))
	}
	if !found {
		t.Errorf("skipped = %v, want %s/lib noted as scripts/cuda-sdk.sh's cache", skipped, missing)
	}

	// GDN_NVRTC_PATH stays the only place looked at.
	t.Setenv(SDKDirEnv, sdk)
	t.Setenv("GDN_NVRTC_PATH", filepath.Join(sdk, "elsewhere"))
	cands, _ = candidates()
	for _, c := range cands {
		if c.dir == lib {
			t.Errorf("with GDN_NVRTC_PATH set, the SDK folder is still a candidate: %+v", cands)
		}
	}
}

// The error's first line says what to run.
func TestLoadErrorSaysWhatToRun(t *testing.T) {
	le := &LoadError{Tried: []Attempt{{Path: "libnvrtc.so", Err: "not found"}}}
	first, _, _ := strings.Cut(le.Error(), "\n")
	if !strings.Contains(first, `eval "$(scripts/cuda-sdk.sh)"`) || !strings.Contains(first, "GDN_NVRTC_PATH") {
		t.Errorf("first line %q does not say to run scripts/cuda-sdk.sh or set GDN_NVRTC_PATH", first)
	}
}

// sdkFolderOfThisShell returns the lib folder of scripts/cuda-sdk.sh that
// this test's environment names (GDN_CUDA_SDK, which the script exports, or
// the folder of GDN_NVRTC_PATH), or "" when it has no libnvrtc.
func sdkFolderOfThisShell() string {
	var lib string
	if d := os.Getenv("GDN_CUDA_SDK"); d != "" {
		lib = filepath.Join(d, "lib")
	} else if p := os.Getenv("GDN_NVRTC_PATH"); p != "" {
		lib = filepath.Dir(p)
	}
	if lib == "" {
		return ""
	}
	if m, _ := filepath.Glob(filepath.Join(lib, "libnvrtc.so.*")); len(m) == 0 {
		return ""
	}
	return lib
}

// A process started with neither GDN_NVRTC_PATH nor LD_LIBRARY_PATH (a
// shell that ran `make run` but never eval'd scripts/cuda-sdk.sh) finds
// NVRTC in the script's folder and compiles with it: the builtins library
// is opened from the same folder first, since the loader path does not
// name it.
func TestNVRTCFromSDKFolderAlone(t *testing.T) {
	needNVRTC(t)
	lib := sdkFolderOfThisShell()
	if lib == "" {
		t.Skip("no scripts/cuda-sdk.sh folder with libnvrtc in this environment (NVRTC comes from a toolkit)")
	}
	cmd := childCmd(t, "test_axpy", t.TempDir(),
		"GDN_NVRTC_PATH=", "LD_LIBRARY_PATH=", "CUDA_HOME="+filepath.Join(t.TempDir(), "none"),
		SDKDirEnv+"="+filepath.Dir(lib), DebugEnv+"=1")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	log := errb.String()
	if err != nil {
		t.Fatalf("child: %v\nstdout: %s\nstderr:\n%s", err, out, log)
	}
	if _, err := parseChild(out); err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, log)
	}
	loaded := ""
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "nvrtc: loaded ") {
			loaded = l
		}
	}
	if !strings.Contains(loaded, lib+"/") {
		t.Skipf("NVRTC was found before the SDK folder (a system install?): %q", loaded)
	}
	if !strings.Contains(log, "opened builtins "+lib+"/") {
		t.Errorf("the builtins were not opened from %s first:\n%s", lib, log)
	}
}
