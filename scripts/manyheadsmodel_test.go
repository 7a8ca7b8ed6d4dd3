package scripts

import (
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// manyHeadsModel runs scripts/manyheads_model.py with args and returns its
// output (skipping the test without python3). The script goes to python3
// on its standard input, read here, so that go test's cache knows it.
func manyHeadsModel(t *testing.T, args ...string) string {
	t.Helper()
	return manyHeadsScript(t, "manyheads_model.py", args...)
}

// pyScript runs a Python script of this folder with args (from standard
// input, so that a test needs no executable bit, in this folder, where it
// finds the modules it imports) and returns its output and error,
// skipping the test without python3.
func pyScript(t *testing.T, file string, args ...string) (string, error) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, append([]string{"-"}, args...)...)
	cmd.Stdin = strings.NewReader(string(src))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// manyHeadsScript runs one of the model's scripts, which must succeed.
func manyHeadsScript(t *testing.T, file string, args ...string) string {
	t.Helper()
	out, err := pyScript(t, file, args...)
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", file, args, err, out)
	}
	return out
}

// tableRows returns the data rows of the markdown tables in text, each
// split into its trimmed cells (header and separator rows left out).
func tableRows(text string) [][]string {
	var rows [][]string
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| ---") {
			continue
		}
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "| ---") {
			continue // a header
		}
		cells := strings.Split(strings.Trim(l, "|"), " | ")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		rows = append(rows, cells)
	}
	return rows
}

// The cost model of docs/perf/many-heads-model.md reproduces today's
// measured many-head rows (core and full), the two BV 64 check rows and
// today's per-chunk times within 10%, and says so with --check.
func TestManyHeadsModelCalibration(t *testing.T) {
	out := manyHeadsModel(t, "--check", "--table", "calibration")
	want := map[string]bool{}
	for _, fw := range []string{"core", "full"} {
		for _, c := range []string{"q35_4kx8", "q35_1kx8", "q397_4kx8", "sym32_8kx4", "varlen_mix", "tp2_16kx2", "q397_32k"} {
			want[fw+" "+c+" (ms)"] = true
		}
		want[fw+" chunk, q35 pair (us)"] = true
	}
	for _, r := range tableRows(out) {
		if len(r) != 4 {
			t.Fatalf("row %q: want 4 cells", r)
		}
		model, err1 := strconv.ParseFloat(r[1], 64)
		measured, err2 := strconv.ParseFloat(r[2], 64)
		if err1 != nil || err2 != nil || measured <= 0 {
			t.Fatalf("row %q: model and measured are not numbers", r)
		}
		if e := math.Abs(model/measured - 1); e > 0.10 {
			t.Errorf("%s: model %.4f against measured %.4f, off by %.1f%%", r[0], model, measured, 100*e)
		}
		delete(want, r[0])
	}
	for r := range want {
		t.Errorf("no calibration row %q in:\n%s", r, out)
	}
}

// Every row of every table the model prints is on the design page as
// printed: the page's numbers are the model's, not a stale copy.
func TestManyHeadsModelPage(t *testing.T) {
	out := manyHeadsModel(t) + manyHeadsScript(t, "manyheads_corrected.py")
	page, err := os.ReadFile("../docs/perf/many-heads-model.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| ---") {
			continue
		}
		n++
		if !strings.Contains(string(page), l+"\n") {
			t.Errorf("the page lacks the model's row\n%s\n(rerun python3 scripts/manyheads_model.py and manyheads_corrected.py and copy their tables)", l)
		}
	}
	if n < 80 {
		t.Errorf("the model printed %d table rows, want the nine tables (80 or more)", n)
	}
}

// The corrected model (manyheads_corrected.py) keeps its two fitted rows
// exact and every other what-if within 12% (--check), and predicts what
// v44 measured where the first model did not: the turns gain nothing on
// the consumers alone (under 1.05x), where the first model said 1.2x or
// more.
func TestManyHeadsCorrectedPremise(t *testing.T) {
	out := manyHeadsScript(t, "manyheads_corrected.py", "--check", "--table", "premise")
	rows := tableRows(out)
	if len(rows) != 2 {
		t.Fatalf("want 2 premise rows, got %d:\n%s", len(rows), out)
	}
	for _, r := range rows {
		first, err1 := strconv.ParseFloat(r[1], 64)
		corrected, err2 := strconv.ParseFloat(r[2], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("row %q: not numbers", r)
		}
		if first < 1.2 {
			t.Errorf("%s: the first model's prediction %.2f, want the 1.2x or more it was refuted at", r[0], first)
		}
		if corrected >= 1.05 || corrected < 0.95 {
			t.Errorf("%s: the corrected model predicts %.2f, want within 5%% of no gain, as measured", r[0], corrected)
		}
	}
}
