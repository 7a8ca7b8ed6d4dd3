package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/jit"
)

// runGDN runs one gdn command line in-process and returns its exit status,
// stdout and stderr.
func runGDN(t *testing.T, args ...string) (code int, out, errOut string) {
	t.Helper()
	var o, e bytes.Buffer
	oldOut, oldErr := stdout, stderr
	stdout, stderr = &o, &e
	defer func() { stdout, stderr = oldOut, oldErr }()
	code = gdnMain(args)
	return code, o.String(), e.String()
}

// needNVRTC stops a test that needs NVRTC: it fails in CI (env CI set),
// where scripts/cuda-sdk.sh provides NVRTC, and skips elsewhere.
func needNVRTC(t *testing.T) {
	t.Helper()
	if _, err := jit.LoadNVRTC(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must have NVRTC (eval \"$(scripts/cuda-sdk.sh)\"): %v", err)
		}
		t.Skipf("no NVRTC: %v", err)
	}
}

func TestHelpAndUnknownCommand(t *testing.T) {
	code, out, _ := runGDN(t, "help")
	if code != 0 {
		t.Errorf("gdn help: exit %d", code)
	}
	for _, name := range []string{"warmup", "info", "help"} {
		if !strings.Contains(out, "\n  "+name) {
			t.Errorf("usage lacks %s:\n%s", name, out)
		}
	}
	for _, c := range commands {
		if c.summary == "" || strings.Contains(c.summary, "\n") {
			t.Errorf("summary %q is not one line", c.summary)
		}
	}
	code, _, errOut := runGDN(t, "frobnicate")
	if code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) || !strings.Contains(errOut, "warmup") {
		t.Errorf("unknown command: exit %d, stderr:\n%s", code, errOut)
	}
	if code, _, _ := runGDN(t); code != 2 {
		t.Errorf("no command: exit %d, want 2", code)
	}
	code, out, errOut = runGDN(t, "help", "warmup")
	if code != 0 || !strings.Contains(out, "--variants") || errOut != "" {
		t.Errorf("help warmup: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, out, errOut = runGDN(t, "warmup", "-h")
	if code != 0 || !strings.Contains(errOut, "--variants") || out != "" {
		t.Errorf("warmup -h: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, _, errOut = runGDN(t, "warmup", "--no-such-flag")
	if code != 2 || !strings.Contains(errOut, "no-such-flag") {
		t.Errorf("bad flag: exit %d, stderr:\n%s", code, errOut)
	}
	code, _, errOut = runGDN(t, "info", "extra")
	if code != 2 || !strings.Contains(errOut, "unexpected arguments: extra") {
		t.Errorf("stray argument: exit %d, stderr:\n%s", code, errOut)
	}
}

func TestSize(t *testing.T) {
	for b, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 141 << 30: "141.0 GiB"} {
		if got := size(b); got != want {
			t.Errorf("size(%d) = %q, want %q", b, got, want)
		}
	}
}
