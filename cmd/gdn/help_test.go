package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// `gdn help` lists every command once, in commandOrder, help last.
func TestHelpOrder(t *testing.T) {
	_, out, _ := runGDN(t, "help")
	var listed []string
	_, list, _ := strings.Cut(out, "commands:\n")
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		listed = append(listed, strings.Fields(line)[0])
	}
	want := append(slices.Clone(commandOrder), "help")
	if !slices.Equal(listed, want) {
		t.Errorf("gdn help lists %v, want %v", listed, want)
	}
	for name := range commands {
		if !slices.Contains(commandOrder, name) {
			t.Errorf("command %s has no place in commandOrder", name)
		}
	}
}

// `gdn help CMD` shows, in this order, the usage line(s), the summary, the
// notes and the flags by group; every flag is in exactly one group, and
// every line fits helpWidth.
func TestHelpFlagsGrouped(t *testing.T) {
	for _, name := range commandOrder {
		t.Run(name, func(t *testing.T) {
			code, out, _ := runGDN(t, "help", name)
			if code != 0 {
				t.Fatalf("exit %d", code)
			}
			if !strings.HasPrefix(out, "usage: gdn "+name) {
				t.Errorf("help does not start with the usage line:\n%s", out)
			}
			summary := wrapText(commands[name].summary, "", helpWidth)
			iSummary := strings.Index(out, "\n\n"+summary+"\n")
			if iSummary < 0 {
				t.Fatalf("no summary after the usage line:\n%s", out)
			}
			if strings.Contains(out, "\nother flags:") {
				t.Errorf("flags outside every group of flagGroups[%q]:\n%s", name, out[strings.Index(out, "\nother flags:"):])
			}
			last := iSummary
			for _, g := range flagGroups[name] {
				at := strings.Index(out, "\n"+g.title+":\n")
				if at < last {
					t.Errorf("group %q missing or out of order", g.title)
					continue
				}
				last = at
				for _, f := range g.flags {
					i := strings.Index(out, "\n  --"+f+"\n")
					if i < 0 {
						i = strings.Index(out, "\n  --"+f+" ")
					}
					if i < last {
						t.Errorf("flag --%s missing, or not in group %q in its order", f, g.title)
						continue
					}
					last = i
				}
			}
			for _, line := range strings.Split(out, "\n") {
				if len(line) > helpWidth && !strings.HasPrefix(line, "  --") {
					t.Errorf("line of %d columns: %q", len(line), line)
				}
			}
			if strings.Count(out, "\n  --") != countFlags(t, name) {
				t.Errorf("%d flags shown, the command has %d", strings.Count(out, "\n  --"), countFlags(t, name))
			}
		})
	}
}

// countFlags counts the flags of a command from its own -h output, which
// the flag package makes (one "--name" line each).
func countFlags(t *testing.T, name string) int {
	_, _, errOut := runGDN(t, name, "-h")
	return strings.Count(errOut, "\n  --")
}

func TestWrapSynopsis(t *testing.T) {
	long := "[--one | " + strings.Repeat("[--inner N] ", 12) + "--two]"
	for _, form := range []string{strings.Repeat("[--flag [--inner N]] ", 6) + "--last", long + " --last"} {
		got := wrapSynopsis("usage: gdn x ", form)
		for _, line := range strings.Split(got, "\n") {
			if len(line) > helpWidth {
				t.Errorf("line over %d columns: %q", helpWidth, line)
			}
			if strings.Contains(line, "[--inner N") != strings.Contains(line, "--inner N]") {
				t.Errorf("an inner group split across lines: %q", line)
			}
		}
		if strings.Join(strings.Fields(got), " ") != "usage: gdn x "+strings.Join(strings.Fields(form), " ") {
			t.Errorf("wrapping changed the words:\n%s", got)
		}
	}
	// Groups that fit stay whole.
	for _, line := range strings.Split(wrapSynopsis("usage: gdn x ", strings.Repeat("[--flag [--inner N]] ", 6)), "\n") {
		if strings.Count(line, "[") != strings.Count(line, "]") {
			t.Errorf("a group that fits a line was split: %q", line)
		}
	}
}

// A failed command prints one line, "gdn CMD: " and the error, with no
// prefix said twice.
func TestErrorPrintedOnce(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.New("gdn: sm_75: unsupported GPU"), "gdn warmup: sm_75: unsupported GPU"},
		{fmt.Errorf("gdn warmup: %w", errors.New("gdn: x")), "gdn warmup: x"},
		{fmt.Errorf("in.npz: npz: %w", errors.New("npz: could not create zip reader: zip: not a valid zip file")),
			"gdn warmup: in.npz: npz: could not create zip reader: zip: not a valid zip file"},
		{errors.New("--sms 0: want at least 1"), "gdn warmup: --sms 0: want at least 1"},
	} {
		if got := errorLine("warmup", c.err); got != c.want {
			t.Errorf("errorLine(%q) = %q, want %q", c.err, got, c.want)
		}
	}

	code, _, errOut := runGDN(t, "warmup", "--arch", "sm_75")
	if code != 1 || !strings.HasPrefix(errOut, "gdn warmup: sm_75: ") || strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "gdn: ") {
		t.Errorf("warmup --arch sm_75: exit %d, stderr %q; want one line, gdn named once", code, errOut)
	}
	bad := filepath.Join(t.TempDir(), "bad.npz")
	if err := os.WriteFile(bad, []byte("not a zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runGDN(t, "run", "--in", bad, "--out", filepath.Join(t.TempDir(), "o.npz"))
	if want := "gdn run: " + bad + ": not an .npz file: zip: not a valid zip file\n"; code != 1 || errOut != want {
		t.Errorf("run on a non-zip file: exit %d, stderr %q, want %q", code, errOut, want)
	}
}
