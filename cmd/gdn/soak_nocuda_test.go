//go:build !cuda

package main

import (
	"strings"
	"testing"
)

// Without a GPU gdn soak says so and fails; it does not claim a result.
func TestSoakWithoutGPU(t *testing.T) {
	code, out, errOut := runGDN(t, "soak", "--count", "1")
	if code != 1 || !strings.Contains(errOut, "no GPU") || strings.Contains(out, "passed") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
