package scripts

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/kernsrc/lab"
	"github.com/gdnjit/gdn/ref"
)

// latestPerfVersion is the performance log's newest version file
// (docs/perf/vNN.md or vNN-vMM.md, by its last number) and its text.
func latestPerfVersion(t *testing.T) (string, string) {
	t.Helper()
	files, err := filepath.Glob("../docs/perf/v*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no version files in docs/perf (%v)", err)
	}
	num := regexp.MustCompile(`(\d+)\.md$`)
	best, bestN := "", -1
	for _, f := range files {
		m := num.FindStringSubmatch(f)
		if m == nil {
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n > bestN {
			best, bestN = f, n
		}
	}
	b, err := os.ReadFile(best)
	if err != nil {
		t.Fatal(err)
	}
	return best, string(b)
}

// nextCallSteps are the device-run.sh steps of the commands in a version's
// "The next call" section (indented command lines, continuations joined).
func nextCallSteps(text string) []string {
	i := strings.Index(text, "### The next call")
	if i < 0 {
		return nil
	}
	sec := text[i+len("### The next call"):]
	if j := strings.Index(sec, "\n### "); j >= 0 {
		sec = sec[:j]
	}
	var steps []string
	inCmd := false
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "    ") {
			inCmd = false
			continue
		}
		fields := strings.Fields(line)
		if !inCmd {
			k := -1
			for n, f := range fields {
				if strings.HasSuffix(f, "device-run.sh") {
					k = n
				}
			}
			if k < 0 {
				continue
			}
			fields, inCmd = fields[k+1:], true
		}
		for _, f := range fields {
			if f != "\\" {
				steps = append(steps, f)
			}
		}
		if !strings.HasSuffix(strings.TrimSpace(line), "\\") {
			inCmd = false
		}
	}
	return steps
}

// The newest version's next device call names only steps device-run.sh
// has, lab experiments that exist and suite cases: a typo there costs a
// step of a scarce device call.
func TestNextCallNamesWhatExists(t *testing.T) {
	file, text := latestPerfVersion(t)
	steps := nextCallSteps(text)
	if len(steps) == 0 {
		t.Skipf("%s has no next call", file)
	}
	usage, err := os.ReadFile("device-run.sh")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`\[([a-z0-9]+)`).FindAllStringSubmatch(string(usage[:strings.Index(string(usage), "set -uo")]), -1) {
		known[m[1]] = true
	}
	labs := map[string]bool{}
	for _, e := range lab.Experiments() {
		labs[e.Name] = true
	}
	for _, s := range steps {
		name, arg, _ := strings.Cut(s, ":")
		if !known[name] {
			t.Errorf("%s: step %q: device-run.sh has no step %q", file, s, name)
			continue
		}
		if name != "lab" && name != "labfull" {
			continue
		}
		exp, cases, _ := strings.Cut(arg, "@")
		if !labs[exp] {
			t.Errorf("%s: step %q: no lab experiment %q", file, s, exp)
		}
		for _, c := range strings.Split(cases, ",") {
			if _, ok := ref.CaseByName(c); c != "" && !ok {
				t.Errorf("%s: step %q: no suite case %q", file, s, c)
			}
		}
	}
}

// nextCallSteps reads a command across its continuation lines and leaves
// the prose out.
func TestNextCallSteps(t *testing.T) {
	text := "# v1\n### The next call\n\nSome prose with labfull:nope in it.\n\n" +
		"    .bin/device-run.sh warmup labfull:a@x,y \\\n      labfull:b@z\n\nMore prose.\n\n" +
		"    GDN_LAB=X NCU_GDN=.bin/gdn-dev .bin/device-run.sh ncufull:k@c\n### Next\n    .bin/device-run.sh bench\n"
	got := strings.Join(nextCallSteps(text), " ")
	if want := "warmup labfull:a@x,y labfull:b@z ncufull:k@c"; got != want {
		t.Errorf("steps %q, want %q", got, want)
	}
}
