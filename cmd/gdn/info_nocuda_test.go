//go:build !cuda

package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/jit"
)

// Without -tags cuda there is no device: info still reports NVRTC and the
// cache, and warmup asks for --arch.

func TestInfoWithoutGPU(t *testing.T) {
	needNVRTC(t)
	t.Setenv(jit.CacheDirEnv, t.TempDir())
	code, out, errOut := runGDN(t, "info")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	n, _ := jit.LoadNVRTC()
	major, minor := n.Version()
	for _, s := range []string{
		"no CUDA device: ",
		"(no CUDA: the driver stub",
		fmt.Sprintf("%d.%d at %s", major, minor, n.Path()),
		"cache", "0 entries",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("info lacks %q:\n%s", s, out)
		}
	}
	t.Logf("\n%s", out)
}
