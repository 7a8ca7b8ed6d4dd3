package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/internal/buildinfo"
)

// TestVersionCommand: `gdn version` and `gdn --version` print this binary's
// line on stdout; an argument is a usage error.
func TestVersionCommand(t *testing.T) {
	want := buildinfo.Line("gdn") + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		code, out, errOut := runGDN(t, args...)
		if code != 0 || out != want || errOut != "" {
			t.Errorf("gdn %s: exit %d, stdout %q, stderr %q; want 0, %q, nothing", strings.Join(args, " "), code, out, errOut, want)
		}
	}
	if !strings.HasPrefix(want, "gdn ") || !strings.Contains(want, runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("version line %q lacks the name or the platform", want)
	}
	if code, _, errOut := runGDN(t, "version", "extra"); code != 2 || !strings.Contains(errOut, "unexpected arguments: extra") {
		t.Errorf("gdn version extra: exit %d, stderr %q; want 2 and the argument named", code, errOut)
	}
}
