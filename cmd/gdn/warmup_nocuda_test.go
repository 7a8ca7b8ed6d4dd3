//go:build !cuda

package main

import (
	"strings"
	"testing"
)

func TestWarmupWithoutGPUNeedsArch(t *testing.T) {
	needNVRTC(t)
	code, _, errOut := runGDN(t, "warmup", "--variants", "test_axpy", "--cache-dir", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "--arch sm_90a") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}
