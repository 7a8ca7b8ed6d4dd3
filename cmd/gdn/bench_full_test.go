package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/ref"
)

func TestParseBenchArgsFull(t *testing.T) {
	// The default times what the anchors time: q and k given normalised.
	o, err := parseBenchArgs([]string{"--full", "--cases", "tp8_2k"})
	if err != nil || !o.full || o.l2norm || len(o.cases) != 1 {
		t.Errorf("--full: %+v, %v", o, err)
	}
	if !strings.Contains(o.forwardText(), "given normalised") {
		t.Errorf("forward text %q", o.forwardText())
	}
	o, err = parseBenchArgs([]string{"--full", "--no-l2norm"})
	if err != nil || !o.full || o.l2norm || !strings.Contains(o.forwardText(), "given normalised") {
		t.Errorf("--full --no-l2norm: %+v, %v", o, err)
	}
	o, err = parseBenchArgs([]string{"--full", "--l2norm"})
	if err != nil || !o.full || !o.l2norm || !strings.Contains(o.forwardText(), "L2-normalised inside") {
		t.Errorf("--full --l2norm: %+v, %v", o, err)
	}
	o, err = parseBenchArgs([]string{"--full", "--l2norm", "--l2norm-in-prep"})
	if err != nil || !o.l2norm || !o.l2normInPrep || !strings.Contains(o.forwardText(), "preparation's copies") {
		t.Errorf("--full --l2norm --l2norm-in-prep: %+v, %v", o, err)
	}
	o, err = parseBenchArgs([]string{"--full", "--l2norm", "--prep-kernel"})
	if err != nil || !o.l2norm || !o.prepKernel || !strings.Contains(o.forwardText(), "L2-normalised inside, by a preparation kernel of its own") {
		t.Errorf("--full --l2norm --prep-kernel: %+v, %v", o, err)
	}
	o, err = parseBenchArgs([]string{"--full", "--prep-kernel"})
	if err != nil || o.l2norm || !o.prepKernel || !strings.Contains(o.forwardText(), "given normalised; by a preparation kernel of its own") {
		t.Errorf("--full --prep-kernel: %+v, %v", o, err)
	}
	if o, err = parseBenchArgs(nil); err != nil || o.full || o.l2norm || !strings.Contains(o.forwardText(), "core forward") {
		t.Errorf("default: %+v, %v", o, err)
	}
	if o, err = parseBenchArgs([]string{"--transfer-tile", "128", "--segments", "16"}); err != nil || o.transferTile != 128 || o.segments != 16 {
		t.Errorf("--transfer-tile 128: %+v, %v", o, err)
	}
	if o, err = parseBenchArgs([]string{"--early-first", "-1"}); err != nil || o.earlyFirst != -1 {
		t.Errorf("--early-first -1: %+v, %v", o, err)
	}
	if o, err = parseBenchArgs([]string{"--scan-columns", "32"}); err != nil || o.scanColumns != 32 {
		t.Errorf("--scan-columns 32: %+v, %v", o, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--no-l2norm"}, "--l2norm and --no-l2norm apply to the full forward: add --full"},
		{[]string{"--l2norm"}, "--l2norm and --no-l2norm apply to the full forward: add --full"},
		{[]string{"--full", "--l2norm", "--no-l2norm"}, "--l2norm and --no-l2norm: give one"},
		{[]string{"--l2norm-in-prep"}, "--l2norm-in-prep applies to the full forward's L2 norm"},
		{[]string{"--full", "--l2norm-in-prep"}, "--l2norm-in-prep applies to the full forward's L2 norm: add --full --l2norm"},
		{[]string{"--prep-kernel"}, "--prep-kernel applies to the full forward: add --full"},
		{[]string{"--full", "--no-l2norm", "--l2norm-in-prep"}, "--l2norm-in-prep applies to the full forward's L2 norm"},
		{[]string{"--from", "run.csv", "--plot", "a.svg", "--full"}, "--full does not apply"},
		{[]string{"--transfer-tile", "96"}, "--transfer-tile 96: want 64 or 128"},
		{[]string{"--scan-columns", "24"}, "--scan-columns 24: want one of [8 16 32]"},
		{[]string{"--early-first", "2"}, "--early-first 2: want -1, 0 (the planner's) or 1"},
	} {
		if _, err := parseBenchArgs(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want one containing %q", c.args, err, c.want)
		}
	}
}

// The targets are 0.8 x the faster of FlashQLA and FlashInfer, as the
// goal's list rounds them to the microsecond; cases without a FlashQLA row
// have none.
func TestFullTargets(t *testing.T) {
	listed := map[string]float64{
		"tp8_32k": 0.256, "tp8_8k": 0.095, "tp8_2k": 0.049, "tp4_32k": 0.397, "tp2_32k": 0.708, "tp2_16kx2": 0.618,
		"q35_4kx8": 0.345, "q35_1kx8": 0.095, "q397_32k": 1.217, "q397_4kx8": 0.673, "sym32_8kx4": 0.354,
	}
	for _, c := range ref.Suite {
		got := anchorFor(c.Hq, c.Hv, c.Lens).FullTargetMs()
		want, ok := listed[c.Name]
		if !ok {
			if got != 0 {
				t.Errorf("%s: target %v, want none", c.Name, got)
			}
			continue
		}
		if math.Abs(got-want) > 0.0005+1e-9 {
			t.Errorf("%s: target %.4f, the list says %.3f", c.Name, got, want)
		}
	}
}

// fakeFullResults are full-forward measurements as a GPU run would give
// them: one case meeting its target, one missing it (with no FLA full row),
// one without any anchor.
func fakeFullResults() []benchResult {
	tp8, _ := ref.CaseByName("tp8_32k")
	sym, _ := ref.CaseByName("sym32_8kx4")
	chain, _ := ref.CaseByName("chain_equal")
	plan := gdn.Plan{Kernel: "gdn_hopper_bf16_bv64"}
	r := func(c ref.Case, ms float64) benchResult {
		return benchResult{Case: c, Dtype: gdn.BF16, Plan: plan, MedianMs: ms, MinMs: ms, Timing: "graph", Calls: 5, Sets: 1, Reps: 30,
			Full: true, L2Norm: true}
	}
	return []benchResult{r(tp8, 0.2), r(sym, 0.5), r(chain, 0.3)}
}

func TestPrintFullBenchTable(t *testing.T) {
	var b bytes.Buffer
	printBenchTable(&b, fakeFullResults())
	out := b.String()
	for _, want := range []string{"FLA full ms", "vs FLA full", "FlashQLA ms", "FlashInfer ms", "target ms", "vs target",
		"q and k L2-normalised inside", "Met on 1 of 2 cases with a target"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "FLA core") {
		t.Errorf("a full-forward table shows FLA core (other work):\n%s", out)
	}
	// Columns: case Hq Hv lens ms TFLOP/s GB/s x-floor FLA-full vs-FLA-full
	// FlashQLA FlashInfer target vs-target timing variant.
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 16 {
			rows[f[0]] = f
		}
	}
	for name, want := range map[string][]string{
		"tp8_32k":     {"0.2000", "0.9061", "4.53x", "0.320", "1.655", "0.256", "1.28x"},
		"sym32_8kx4":  {"0.5000", "-", "-", "0.629", "0.442", "0.354", "0.71x"},
		"chain_equal": {"0.3000", "-", "-", "-", "-", "-", "-"},
	} {
		f := rows[name]
		if f == nil {
			t.Errorf("no row for %s:\n%s", name, out)
			continue
		}
		if got := append([]string{f[4]}, f[8:14]...); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: ms and anchors %v, want %v", name, got, want)
		}
	}
	res := fakeFullResults()
	for i := range res {
		res[i].L2Norm = false
	}
	b.Reset()
	printBenchTable(&b, res)
	if !strings.Contains(b.String(), "q and k given normalised, as the anchors are timed") {
		t.Errorf("--no-l2norm run not said:\n%s", b.String())
	}
}

// The CSV of a full run says so, carries FLA full, the target and the
// comparisons that apply, and reads back (for --plot, --compare, --from).
func TestWriteBenchCSVFull(t *testing.T) {
	var b bytes.Buffer
	if err := writeBenchCSV(&b, fakeFullResults()); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	recs, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	tp8, chain := recs[1], recs[3]
	for c, want := range map[string]string{"forward": "full", "l2norm": "true", "fla_full_ms": "0.9061", "vs_fla_full": "4.5305",
		"vs_fla_core": "", "target_ms": "0.256", "vs_target": "1.28", "a_dtype": ""} {
		if got := tp8[col[c]]; !strings.HasPrefix(got, want) || (want == "" && got != "") {
			t.Errorf("tp8_32k %s = %q, want %q", c, got, want)
		}
	}
	if chain[col["target_ms"]] != "" || chain[col["vs_target"]] != "" {
		t.Errorf("chain_equal has a target: %v", chain)
	}
	rows, err := readBenchCSV(strings.NewReader(text), "full.csv")
	if err != nil {
		t.Fatal(err)
	}
	if r := rows[0]; r.Forward != "full" || r.FLAFullMs != 0.9061 || math.Abs(r.TargetMs-0.256) > 1e-9 || r.FlashQLAMs != 0.32 {
		t.Errorf("read back %+v", r)
	}
	// A core run's CSV: forward core, no target, no FLA-full comparison.
	b.Reset()
	if err := writeBenchCSV(&b, fakeResults()); err != nil {
		t.Fatal(err)
	}
	rows, err = readBenchCSV(&b, "core.csv")
	if err != nil {
		t.Fatal(err)
	}
	if r := rows[0]; r.Forward != "core" || r.TargetMs != 0 || r.FLAFullMs != 0.9061 {
		t.Errorf("core row %+v", r)
	}
	// CSVs from before --full have no forward column: core.
	old, err := readBenchCSVFile(filepath.Join("testdata", "bench_v6.csv"))
	if err != nil || old[0].Forward != "core" {
		t.Errorf("old CSV: %v, %v", old[0].Forward, err)
	}
	if _, err := readBenchCSV(strings.NewReader(csvHead[:len(csvHead)-1]+",forward\na,2,8,1,1,0.1,,,,half\n"), "x.csv"); err == nil ||
		!strings.Contains(err.Error(), `forward "half": want core or full`) {
		t.Errorf("bad forward: %v", err)
	}
}

// The chart of a full run has its own legend (FLA full, the target); rows
// of both forwards are refused.
func TestWriteBenchPlotFull(t *testing.T) {
	rows, err := benchRowsOf(fakeFullResults())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "full.svg")
	if err := writeBenchPlot(path, rows); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gdn (full forward)", "FLA full (same work)", "target (0.8 x the faster of FlashQLA and FlashInfer)", "full forward (from raw gates)"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	core, err := benchRowsOf(fakeResults())
	if err != nil {
		t.Fatal(err)
	}
	if err := writeBenchPlot(path, append(core, rows...)); err == nil || !strings.Contains(err.Error(), "both the core and the full") {
		t.Errorf("mixed rows: %v", err)
	}
}

// --compare never sets a core time against a full one.
func TestPrintCompareForwards(t *testing.T) {
	full, err := benchRowsOf(fakeFullResults())
	if err != nil {
		t.Fatal(err)
	}
	core, err := benchRowsOf(fakeResults())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	err = printCompare(&b, core, full, "core.csv")
	if err == nil || !strings.Contains(err.Error(), "the other forward") {
		t.Errorf("core against full: %v\n%s", err, b.String())
	}
	b.Reset()
	if err := printCompare(&b, full, full, "full.csv"); err != nil || !strings.Contains(b.String(), "over 3 cases 1.00x") {
		t.Errorf("full against full: %v\n%s", err, b.String())
	}
	b.Reset()
	// The old run: tp8_32k of the full forward, chain_equal of the core.
	chainCore := full[2]
	chainCore.Forward = "core"
	mixed := []benchRow{full[0], chainCore}
	if err := printCompare(&b, mixed, full, "mixed.csv"); err != nil || !strings.Contains(b.String(), "one of the full (not compared): [chain_equal]") {
		t.Errorf("partly other forward: %v\n%s", err, b.String())
	}
	// A full forward with the norm inside is not set against one without
	// (before docs/PERF.md v35 --full meant --l2norm).
	given := slices.Clone(full)
	for i := range given {
		given[i].L2Norm = "false"
	}
	if full[0].L2Norm != "true" {
		t.Fatalf("fake full rows: l2norm %q, want true", full[0].L2Norm)
	}
	b.Reset()
	if err := printCompare(&b, full, given, "l2norm.csv"); err == nil || !strings.Contains(err.Error(), "L2 norm inside") {
		t.Errorf("norm inside against given normalised: %v\n%s", err, b.String())
	}
	b.Reset()
	mixed = []benchRow{given[0], full[1]}
	if err := printCompare(&b, mixed, given, "mixed.csv"); err != nil || !strings.Contains(b.String(), "without (not compared): ["+full[1].Case+"]") ||
		!strings.Contains(b.String(), "over 1 cases") {
		t.Errorf("partly with the norm: %v\n%s", err, b.String())
	}
}

// The full forward's inputs: the recipe with raw g and no g_cumsum or A;
// with L2Norm inside, q and k as drawn (the kernel normalises them).
func TestGenRecipeFull(t *testing.T) {
	s := testShape
	raw := genRecipe(s, gdn.BF16, 7, false)
	unit := genRecipe(s, gdn.BF16, 7, true)
	if raw.G != nil || raw.A != nil || raw.Bytes() != fullInputBytes(s, 2) {
		t.Errorf("full inputs carry g_cumsum or A, or Bytes %d != %d", raw.Bytes(), fullInputBytes(s, 2))
	}
	norm := func(x []float32) float64 {
		n := 0.0
		for _, v := range x[:ref.D] {
			n += float64(v) * float64(v)
		}
		return math.Sqrt(n)
	}
	if n := norm(unit.Q); math.Abs(n-1) > 1e-2 {
		t.Errorf("unit q row norm %v", n)
	}
	if n := norm(raw.K); n < 5 || n > 20 {
		t.Errorf("raw k row norm %v, want about sqrt(128)", n)
	}
	h := raw.hostFullArgs(true)
	if !h.L2Norm || &h.G[0] != &raw.GRaw[0] || h.GateInKernel || !h.FinalState || len(h.H0) != s.StateLen() {
		t.Errorf("host args %+v", h)
	}
	// The core set of the same seed shares the raw draws.
	core := genInputs(s, gdn.BF16, 7)
	if core.GRaw[5] != unit.GRaw[5] || core.Q[3] != unit.Q[3] || core.A == nil {
		t.Error("genInputs is not genRecipe plus g_cumsum and A")
	}
}

// gdn bench --full without a GPU: the no-GPU error, before drawing inputs.
func TestBenchFullWithoutGPU(t *testing.T) {
	if rt, err := gdn.Open(gdn.Options{}); !errors.Is(err, gdn.ErrNoCUDA) {
		if rt != nil {
			rt.Close()
		}
		t.Skip("this build can reach a GPU")
	}
	err := runBench([]string{"--full", "--cases", "tp8_2k"})
	if !errors.Is(err, gdn.ErrNoCUDA) || !strings.Contains(err.Error(), "no GPU") {
		t.Errorf("err = %v, want a no-GPU error wrapping ErrNoCUDA", err)
	}
}
