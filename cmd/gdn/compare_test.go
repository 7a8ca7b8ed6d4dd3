package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeCSV writes text to a file in a temporary folder and returns its path.
func writeCSV(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const csvHead = "case,hq,hv,lens,median_ms,floor_ms,fla_core_ms,flashqla_fwd_ms,flashinfer_fwd_ms\n"

func TestPrintCompare(t *testing.T) {
	old, err := readBenchCSVFile(writeCSV(t, "old.csv", csvHead+
		"a,2,8,32768,2.0,0.05,0.8,,\n"+
		"b,16,32,4096x8,1.0,0.2,,,\n"+
		"c,4,4,16384,1.0,0.01,,,\n"+
		"gone,1,1,64,1.0,0.001,,,\n"))
	if err != nil {
		t.Fatal(err)
	}
	cur, err := readBenchCSVFile(writeCSV(t, "new.csv", csvHead+
		"a,2,8,32768,1.0,0.05,0.8,,\n"+
		"b,16,32,4096x8,2.0,0.2,,,\n"+
		"c,4,4,8192,0.5,0.01,,,\n"+
		"fresh,1,1,64,1.0,0.001,,,\n"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := printCompare(&b, old, cur, "old.csv"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"2.0000  1.0000     2.00x", // a: twice as fast
		"1.0000  2.0000     0.50x", // b: twice as slow
		"geometric mean over 2 cases 1.00x",
		"only in this run: [fresh]",
		"only in old.csv: [gone]",
		"different shape (not compared): [c]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if err := printCompare(&b, old[3:], cur[:1], "old.csv"); err == nil || !strings.Contains(err.Error(), "no case in common") {
		t.Errorf("disjoint runs: %v", err)
	}
}

func TestBenchFromCSV(t *testing.T) {
	dir := t.TempDir()
	chart := filepath.Join(dir, "v6.svg")
	code, out, errOut := runGDN(t, "bench", "--from", filepath.Join("testdata", "bench_v6.csv"),
		"--compare", filepath.Join("testdata", "bench_v2.csv"), "--plot", chart)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	if !strings.Contains(out, "tp8_32k") || !strings.Contains(out, "3.2630  2.1220     1.54x") || !strings.Contains(out, "over 14 cases") {
		t.Errorf("comparison of v2 and v6:\n%s", out)
	}
	if st, err := os.Stat(chart); err != nil || st.Size() < 1000 {
		t.Errorf("chart: %v", err)
	}
}

func TestReadBenchCSVErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"", "empty file"},
		{"case,hq,hv,lens,median_ms\n", `no column "floor_ms"`},
		{csvHead, "no rows"},
		{csvHead + "a,2,8,1,fast,0.1,,,\n", `line 2: median_ms "fast"`},
		{csvHead + "a,2,8,1,0,0.1,,,\n", "want a positive number"},
		{csvHead + "a,x,8,1,1,0.1,,,\n", `hq "x": want a positive integer`},
		{csvHead + ",2,8,1,1,0.1,,,\n", "empty case name"},
		{csvHead + "a,2,8,1,1,0.1,-3,,\n", `fla_core_ms "-3"`},
		{csvHead + "a,2,8,1,NaN,0.1,,,\n", `median_ms "NaN": want a positive number`},
		{csvHead + "a,2,8,1,1,+Inf,,,\n", `floor_ms "+Inf": want a positive number`},
		{csvHead + "a,2,8,1,1,0.1,NaN,,\n", `fla_core_ms "NaN"`},
		{csvHead + "a,2,8\n", "wrong number of fields"},
	} {
		_, err := readBenchCSVFile(writeCSV(t, "x.csv", c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want one containing %q", c.text, err, c.want)
		}
	}
	if _, err := readBenchCSVFile(filepath.Join(t.TempDir(), "none.csv")); err == nil {
		t.Error("a missing file: no error")
	}
}

// Runs from different GPUs are compared with a note that says so; runs
// from the same GPU, or a CSV that does not name its GPU, without.
func TestPrintCompareDevices(t *testing.T) {
	head := strings.TrimSuffix(csvHead, "\n") + ",device\n"
	read := func(name, dev string) []benchRow {
		rows, err := readBenchCSVFile(writeCSV(t, name, head+"a,2,8,32768,2.0,0.05,0.8,,,"+dev+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	h100, h200, none := read("h100.csv", "NVIDIA H100 80GB HBM3"), read("h200.csv", "NVIDIA H200"), read("none.csv", "")
	for _, c := range []struct {
		old, cur []benchRow
		note     bool
	}{{h100, h200, true}, {h100, h100, false}, {none, h200, false}} {
		var b strings.Builder
		if err := printCompare(&b, c.old, c.cur, "old.csv"); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), "different GPUs (old.csv: "+c.old[0].Device+"; this run: "+c.cur[0].Device+")"); got != c.note {
			t.Errorf("old %q, new %q: note %v, want %v:\n%s", c.old[0].Device, c.cur[0].Device, got, c.note, b.String())
		}
	}
}
