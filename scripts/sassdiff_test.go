package scripts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two caches compared variant by variant: the same instructions at other
// addresses and encodings are the same; other instructions differ; a
// variant in one cache only is named; any of those fails the run.
func TestSASSDiff(t *testing.T) {
	dir := t.TempDir()
	// A cuobjdump that prints a function whose instructions are the
	// cubin's words, at addresses and encodings that vary with its name.
	tool := filepath.Join(dir, "cuobjdump")
	script := `#!/bin/sh
[ "$1" = -sass ] || exit 1
img=$(cat "$2")
echo "		Function : k"
n=0
for w in ${img#*:}; do
  echo "        /*00${n}${#img}0*/                   $w R1, R2 ;   /* 0x00000${#img}0000007 */"
  n=$((n + 1))
done
`
	if err := os.WriteFile(tool, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, entries map[string]string) string {
		c := filepath.Join(dir, name)
		if err := os.Mkdir(c, 0o755); err != nil {
			t.Fatal(err)
		}
		for v, img := range entries {
			if err := os.WriteFile(filepath.Join(c, v+".bin"), cacheEntry(v, false, img), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	old := mk("old", map[string]string{"gdn_a": "x:FMUL FADD", "gdn_b": "x:FMUL", "gdn_c": "x:EXIT"})
	cur := mk("new", map[string]string{"gdn_a": "longer:FMUL FADD", "gdn_b": "x:FFMA", "gdn_d": "x:EXIT"})
	out, err := pyScript(t, "sassdiff.py", old, cur, "--cuobjdump", tool)
	if err == nil {
		t.Errorf("differences, but the run passed:\n%s", out)
	}
	wantLines(t, out, "differs: gdn_b (2 instructions before, 2 after)", "only before: gdn_c", "only after: gdn_d",
		"1 of 4 variants the same")
	if strings.Contains(out, "differs: gdn_a") {
		t.Errorf("the same instructions at other addresses read as different:\n%s", out)
	}
	if out, err := pyScript(t, "sassdiff.py", old, old, "--cuobjdump", tool); err != nil || !strings.Contains(out, "3 of 3 variants the same") {
		t.Errorf("a cache against itself: %v\n%s", err, out)
	}
	if out, err := pyScript(t, "sassdiff.py", old, mk("empty", nil), "--cuobjdump", tool); err == nil || !strings.Contains(out, "no cubin in") {
		t.Errorf("an empty cache accepted: %v\n%s", err, out)
	}
	if out, err := pyScript(t, "sassdiff.py", old, filepath.Join(dir, "none"), "--cuobjdump", tool); err == nil || !strings.Contains(out, "none: not a folder") {
		t.Errorf("a missing cache accepted: %v\n%s", err, out)
	}
}
