//go:build !cuda

package main

import (
	"strings"
	"testing"
)

// TestOpenWithoutCUDA checks gdn_open in a build without the cuda tag:
// GDN_ERR_NO_CUDA, no handle, and the reason in slot 0.
func TestOpenWithoutCUDA(t *testing.T) {
	h, st := openRuntime(nil)
	if st != statusNoCUDA || h != 0 {
		t.Fatalf("openRuntime = %d, %d; want 0, %d", h, st, statusNoCUDA)
	}
	if msg := lastError(0); !strings.Contains(msg, "CUDA") {
		t.Errorf("slot 0 holds %q, want the reason", msg)
	}
}
