package staleptr

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

const words = 8

// The mistake must die under Hammer, or Hammer proves nothing about the code
// that survives it. It kills its process, so it runs in a child process.
func TestHammerCatchesTypedStores(t *testing.T) {
	if os.Getenv("STALEPTR_CHILD") == "typed" {
		Hammer(words*8, 20000, func() { storeTyped(words) })
		return
	}
	// Hammer crashes the mistake in about 97 runs of 100: five tries.
	var out []byte
	for try := 0; try < 5; try++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHammerCatchesTypedStores$", "-test.count=1")
		cmd.Env = append(os.Environ(), "STALEPTR_CHILD=typed")
		var err error
		if out, err = cmd.CombinedOutput(); err == nil {
			continue
		}
		if !strings.Contains(string(out), "found bad pointer in Go heap") {
			t.Fatalf("the child failed (%v) without the runtime's bad-pointer error:\n%s", err, out)
		}
		return
	}
	t.Fatalf("pointer-typed stores into fresh C memory survived the hammer five times:\n%s", out)
}

// The safe pattern survives; the hammer runs at least iters calls and
// goes on until the collector has run minCycles times during them.
func TestHammerSafeStores(t *testing.T) {
	calls := 0
	before := gcCycles()
	Hammer(words*8, 20000, func() { calls++; storeUintptr(words) })
	if calls < 20000 {
		t.Fatalf("store ran %d times, want at least 20000", calls)
	}
	if n := gcCycles() - before; n < 200 {
		t.Fatalf("%d collections during the hammer, want at least 200", n)
	}
	t.Logf("%d calls, %d collections", calls, gcCycles()-before)
}
