//go:build !cuda

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gdnjit/gdn"
)

// Without a GPU gdn soak says so and fails; it does not claim a result.
func TestSoakWithoutGPU(t *testing.T) {
	code, out, errOut := runGDN(t, "soak", "--count", "1")
	if code != 1 || !strings.Contains(errOut, "no GPU") || strings.Contains(out, "passed") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// A problem whose GPU call fails prints one FAIL line with both commands
// that reproduce it (a zero Runtime of the CPU build fails every call).
func TestSoakFailureLine(t *testing.T) {
	var out bytes.Buffer
	old := stdout
	stdout = &out
	defer func() { stdout = old }()
	o, err := parseSoakArgs([]string{"--seed", "9"})
	if err != nil {
		t.Fatal(err)
	}
	p := drawSoakProblem(9, 3)
	st := newSoakStats()
	v := p.Variant
	if v == variantAuto {
		v = ""
	}
	rts := newSoakRuntimes(0)
	rts.rts[soakRuntimeKey(v, p.Segments, p.SMs, p.PrepHeads)] = openedSoakRuntime(&gdn.Runtime{})
	if res := runSoakProblem(rts, o, 3, p, st); res.launchErr == nil {
		t.Error("a failed GPU call is not counted as one")
	}
	line := out.String()
	if st.failed != 1 || strings.Count(line, "\n") != 1 || !strings.HasPrefix(line, "FAIL case 3 [") {
		t.Fatalf("failed %d, output %q", st.failed, line)
	}
	_, repro, ok := strings.Cut(strings.TrimSpace(line), "reproduce: ")
	first, second, ok2 := strings.Cut(repro, "  # or: ")
	if !ok || !ok2 || first != "gdn soak --seed 9 --case 3" || second != "gdn soak --problem '"+p.String()+"'" {
		t.Fatalf("reproduce part %q", repro)
	}
	if back, err := parseSoakProblem(strings.Trim(strings.TrimPrefix(second, "gdn soak --problem "), "'")); err != nil || back.String() != p.String() {
		t.Errorf("the printed spec does not give the problem back: %v", err)
	}
}
