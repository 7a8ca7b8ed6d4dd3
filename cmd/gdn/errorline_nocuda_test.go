//go:build !cuda

package main

import (
	"strings"
	"testing"
)

// Without a GPU, gdn bench fails with one line that names gdn once,
// although its cause is the library's "gdn: open device 0: ..." error.
func TestErrorLineWithoutGPU(t *testing.T) {
	code, _, errOut := runGDN(t, "bench", "--cases", "tp8_32k")
	line := strings.TrimSpace(errOut[strings.LastIndex(strings.TrimSpace(errOut), "\n")+1:])
	if code != 1 || !strings.HasPrefix(line, "gdn bench: no GPU") || strings.Contains(line, "gdn: ") || !strings.Contains(line, "open device 0") {
		t.Errorf("exit %d, last line %q", code, line)
	}
}
