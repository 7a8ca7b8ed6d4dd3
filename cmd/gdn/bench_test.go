package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/ref"
)

func TestParseBenchArgs(t *testing.T) {
	o, err := parseBenchArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.cases) != len(ref.Suite) || o.reps != 30 || o.warmup != 5 || o.calls != 0 || o.dtype != gdn.BF16 || o.aDtype != gdn.FP32 || o.runtimeGraphs {
		t.Errorf("defaults: %+v", o)
	}
	o, err = parseBenchArgs([]string{"--cases", " q397_32k, tp8_2k ", "--dtype", "fp16", "--a-dtype", "BF16", "--reps", "3", "--csv", "x.csv"})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.cases) != 2 || o.cases[0].Name != "q397_32k" || o.cases[1].Name != "tp8_2k" || o.dtype != gdn.FP16 || o.aDtype != gdn.BF16 || o.reps != 3 || o.csvPath != "x.csv" {
		t.Errorf("parsed %+v", o)
	}
	if !strings.Contains(o.forwardText(), "A in bf16") {
		t.Errorf("forwardText %q does not name A's dtype", o.forwardText())
	}

	var errBuf bytes.Buffer
	stderr = &errBuf
	defer func() { stderr = os.Stderr }()
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"--cases", "tp8_32k,nope"}, `unknown case "nope"; the suite has tp8_32k, tp8_8k`},
		{[]string{"--dtype", "fp32"}, "--dtype"},
		{[]string{"--a-dtype", "fp16"}, "--a-dtype fp16: want fp32 or bf16"},
		{[]string{"--full", "--a-dtype", "bf16"}, "--a-dtype applies to the core forward"},
		{[]string{"--from", "run.csv", "--plot", "a.svg", "--a-dtype", "fp32"}, "--a-dtype does not apply"},
		{[]string{"--reps", "0"}, "--reps 0"},
		{[]string{"--warmup", "0"}, "--warmup 0"},
		{[]string{"--calls", "-1"}, "--calls -1"},
		{[]string{"--plot", "chart.pdf"}, "--plot chart.pdf: want a .svg or .png"},
		{[]string{"--from", "run.csv"}, "--from needs --plot or --compare"},
		{[]string{"--from", "run.csv", "--plot", "a.svg", "--csv", "b.csv"}, "--from replaces the run"},
		{[]string{"--from", "run.csv", "--plot", "a.svg", "--cases", "tp8_2k"}, "--from replaces the run"},
	}
	for _, c := range bad {
		_, err := parseBenchArgs(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want one containing %q", c.args, err, c.want)
		}
	}
	if _, err := parseBenchArgs([]string{"extra"}); !errors.Is(err, errUsage) {
		t.Errorf("stray argument: err = %v, want errUsage", err)
	}
}

// Every input set is called in the warm-up, however few calls are asked
// for, so that none is checked (NaN, digest) without having been computed.
func TestWarmupCallsCoverEverySet(t *testing.T) {
	for _, c := range []struct{ warmup, sets, want int }{{1, 3, 3}, {5, 3, 5}, {1, 1, 1}, {2, 3, 3}, {4, 1, 4}} {
		if got := warmupCalls(c.warmup, c.sets); got != c.want {
			t.Errorf("warmupCalls(%d, %d) = %d, want %d", c.warmup, c.sets, got, c.want)
		}
	}
}

// TestBenchWithoutGPU: without a GPU the command stops with a clear error
// (wrapping ErrNoCUDA) before drawing any input.
func TestBenchWithoutGPU(t *testing.T) {
	if rt, err := gdn.Open(gdn.Options{}); !errors.Is(err, gdn.ErrNoCUDA) {
		if rt != nil {
			rt.Close()
		}
		t.Skip("this build can reach a GPU")
	}
	err := runBench([]string{"--cases", "tp8_2k"})
	if !errors.Is(err, gdn.ErrNoCUDA) || !strings.Contains(err.Error(), "no GPU") {
		t.Errorf("err = %v, want a no-GPU error wrapping ErrNoCUDA", err)
	}
}

func TestAnchorFor(t *testing.T) {
	cases := []struct {
		name               string
		flaCore, flashQLA  float64
		flashInfer, flaPub float64
	}{
		{"tp8_32k", 0.8002, 0.320, 1.655, 0.902},
		{"tp8_2k", 0.0593, 0.061, 0.109, 0.081},
		{"tp2_16kx2", 1.4867, 0.773, 0.778, 1.877},
		{"q35_4kx8", 1.5122, 0.619, 0.431, 1.914},
		{"q35_1kx8", 0.3944, 0.178, 0.119, 0.501},
		{"q397_32k", 2.6292, 1.521, 1.552, 3.331},
		{"sym32_8kx4", 0, 0.629, 0.442, 1.952},
		{"chain_equal", 0, 0, 0, 0},
		{"varlen_mix", 0, 0, 0, 0},
	}
	for _, c := range cases {
		k, _ := ref.CaseByName(c.name)
		a := anchorFor(k.Hq, k.Hv, k.Lens)
		if a.FLACoreMs != c.flaCore || a.FlashQLAMs != c.flashQLA || a.FlashInferMs != c.flashInfer || a.FLAFullPublishedMs != c.flaPub {
			t.Errorf("%s: anchor %+v, want FLA core %v, FlashQLA %v, FlashInfer %v, FLA %v",
				c.name, a, c.flaCore, c.flashQLA, c.flashInfer, c.flaPub)
		}
	}
}

// TestAnchorTables checks the copied numbers for transcription slips that
// a lookup would not notice: heads, token totals and sane times.
func TestAnchorTables(t *testing.T) {
	tokens := func(l []int) int {
		n := 0
		for _, x := range l {
			n += x
		}
		return n
	}
	if len(flaMeasured) != 30 || len(flashQLATable) != 9*19 {
		t.Errorf("%d FLA rows and %d FlashQLA rows, want 30 and 171", len(flaMeasured), len(flashQLATable))
	}
	for _, r := range flaMeasured {
		if r.Hv%r.Hq != 0 || r.CoreMs <= 0 || r.FullMs <= r.CoreMs {
			t.Errorf("FLA row %+v", r)
		}
	}
	for _, r := range flashQLATable {
		switch tokens(r.Lens) {
		case 2048, 4096, 8192, 16384, 32768:
		default:
			t.Errorf("FlashQLA row %+v: %d tokens", r, tokens(r.Lens))
		}
		if r.Hv%r.Hq != 0 || r.FlashQLAMs <= 0 || r.FlashInferMs <= 0 || r.FLAMs <= 0 {
			t.Errorf("FlashQLA row %+v", r)
		}
	}
}

func TestLensSummary(t *testing.T) {
	cases := []struct {
		lens        []int
		full, short string
	}{
		{[]int{32768}, "32768", "32768"},
		{[]int{16384, 16384}, "16384x2", "16384x2"},
		{[]int{4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096}, "4096x8", "4096x8"},
		{[]int{7000, 33, 1, 4096, 511, 2048, 64, 129}, "7000+33+1+4096+511+2048+64+129", "8 seqs, 13882"},
		{[]int{5, 5, 1}, "5x2+1", "5x2+1"},
	}
	for _, c := range cases {
		if got := lensSummary(c.lens); got != c.full {
			t.Errorf("lensSummary(%v) = %q, want %q", c.lens, got, c.full)
		}
		if got := lensShort(c.lens); got != c.short {
			t.Errorf("lensShort(%v) = %q, want %q", c.lens, got, c.short)
		}
	}
}

func TestGraphCallsAndMedian(t *testing.T) {
	if graphCalls(0, 0.05) != 20 || graphCalls(0, 0.5) != 5 || graphCalls(7, 0.05) != 7 {
		t.Error("graphCalls")
	}
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median odd = %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median even = %v", m)
	}
}

// fakeResults are measurements as a GPU run would give them.
func fakeResults() []benchResult {
	tp8, _ := ref.CaseByName("tp8_32k")
	mix, _ := ref.CaseByName("varlen_mix")
	plan := gdn.Plan{Kernel: "gdn_hopper_bf16_bv64"}
	return []benchResult{
		{Case: tp8, Dtype: gdn.BF16, ADtype: gdn.FP32, Plan: plan, MedianMs: 0.4001, MinMs: 0.39, Timing: "graph", Calls: 5, Sets: 1, Reps: 30, OutHash: 0xab, Device: "NVIDIA H100 80GB HBM3"},
		{Case: mix, Dtype: gdn.BF16, ADtype: gdn.BF16, Plan: plan, MedianMs: 0.2, MinMs: 0.19, Timing: "stream", Calls: 20, Sets: 3, Reps: 30, Device: "NVIDIA H100 80GB HBM3"},
	}
}

func TestPrintBenchTable(t *testing.T) {
	var b bytes.Buffer
	printBenchTable(&b, fakeResults())
	out := b.String()
	for _, want := range []string{"tp8_32k", "0.4001", "0.8002", "2.00x", "graph/5", "gdn_hopper_bf16_bv64", "8 seqs, 13882", "stream/20"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// TFLOP/s of tp8_32k: 36.5 GFLOP in 0.4001 ms.
	if !strings.Contains(out, "91.2") {
		t.Errorf("table lacks the TFLOP/s figure 91.2:\n%s", out)
	}
}

func TestWriteBenchCSV(t *testing.T) {
	var b bytes.Buffer
	if err := writeBenchCSV(&b, fakeResults()); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want a header and 2", len(rows))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	tp8, mix := rows[1], rows[2]
	checks := []struct{ row, col, want string }{
		{tp8[col["case"]], "case", "tp8_32k"},
		{tp8[col["fla_core_ms"]], "fla_core_ms", "0.8002"},
		{tp8[col["fla_full_ms"]], "fla_full_ms", "0.9061"},
		{tp8[col["flashqla_fwd_ms"]], "flashqla_fwd_ms", "0.32"},
		{tp8[col["flashinfer_fwd_ms"]], "flashinfer_fwd_ms", "1.655"},
		{tp8[col["fla_fwd_published_ms"]], "fla_fwd_published_ms", "0.902"},
		{tp8[col["vs_fla_core"]], "vs_fla_core", "2"},
		{mix[col["lens"]], "lens", "7000+33+1+4096+511+2048+64+129"},
		{mix[col["fla_core_ms"]], "fla_core_ms", ""},
		{mix[col["input_sets"]], "input_sets", "3"},
		{tp8[col["out_hash"]], "out_hash", "00000000000000ab"},
		{tp8[col["a_dtype"]], "a_dtype", "fp32"},
		{mix[col["a_dtype"]], "a_dtype", "bf16"},
		{tp8[col["device"]], "device", "NVIDIA H100 80GB HBM3"},
	}
	for _, c := range checks {
		if !strings.HasPrefix(c.row, c.want) || (c.want == "" && c.row != "") {
			t.Errorf("column %s = %q, want %q", c.col, c.row, c.want)
		}
	}
}

func TestRotationThreshold(t *testing.T) {
	// The short cases rotate input sets; the 32k-token cases do not.
	for name, rotate := range map[string]bool{"short_tail_state": true, "tp8_2k": true, "tp8_32k": false, "q397_32k": false} {
		c, _ := ref.CaseByName(name)
		if got := inputBytes(c.Shape(), 2) < rotateBelowBytes; got != rotate {
			t.Errorf("%s: %d input bytes, rotate = %v, want %v", name, inputBytes(c.Shape(), 2), got, rotate)
		}
	}
}

// outputDigest: equal bits give equal digests, call after call; one bit
// anywhere, a NaN's payload, -0 for +0, or the order of two values changes
// it; and nonFinite counts NaN and both infinities only.
func TestOutputDigest(t *testing.T) {
	x := make([]float32, 1000)
	for i := range x {
		x[i] = float32(i)*0.37 - 100
	}
	base := outputDigest(digestSeed, x)
	if outputDigest(digestSeed, slices.Clone(x)) != base {
		t.Fatal("the same values gave another digest")
	}
	flip := func(i int, change func(float32) float32) {
		y := slices.Clone(x)
		y[i] = change(y[i])
		if outputDigest(digestSeed, y) == base {
			t.Errorf("element %d changed to %v: same digest", i, y[i])
		}
	}
	flip(0, func(v float32) float32 { return math.Float32frombits(math.Float32bits(v) ^ 1) })
	flip(999, func(v float32) float32 { return math.Float32frombits(math.Float32bits(v) ^ 1<<31) })
	flip(500, func(float32) float32 { return float32(math.NaN()) })
	y := slices.Clone(x)
	y[3], y[4] = y[4], y[3]
	if outputDigest(digestSeed, y) == base {
		t.Error("two values swapped: same digest")
	}
	zero, negZero := []float32{0}, []float32{float32(math.Copysign(0, -1))}
	if outputDigest(digestSeed, zero) == outputDigest(digestSeed, negZero) {
		t.Error("+0 and -0: same digest")
	}
	// Chained over o then ht: not the same as ht then o.
	a, b := x[:10], x[10:20]
	if outputDigest(outputDigest(digestSeed, a), b) == outputDigest(outputDigest(digestSeed, b), a) {
		t.Error("the order of the arrays does not count")
	}
	nf := []float32{1, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, 0}
	if n := nonFinite(nf); n != 3 {
		t.Errorf("nonFinite = %d, want 3", n)
	}
}

func TestSMsFlag(t *testing.T) {
	o, err := parseBenchArgs([]string{"--sms", "16"})
	if err != nil || o.sms != 16 {
		t.Fatalf("--sms 16: %+v, %v", o.sms, err)
	}
	if o, _ := parseBenchArgs(nil); o.sms != 0 {
		t.Errorf("default --sms %d, want 0", o.sms)
	}
	if _, err := parseBenchArgs([]string{"--sms", "-8"}); err == nil || !strings.Contains(err.Error(), "--sms -8") {
		t.Errorf("bench --sms -8: err = %v", err)
	}
	var errBuf bytes.Buffer
	stderr = &errBuf
	defer func() { stderr = os.Stderr }()
	if err := runInfo([]string{"--sms", "-1"}); err == nil || !strings.Contains(err.Error(), "--sms -1") {
		t.Errorf("info --sms -1: err = %v", err)
	}
}

// --prep-heads reaches the PrepHeads knob with --full; a negative count, or
// one without --full, is refused by name.
func TestBenchPrepHeadsFlag(t *testing.T) {
	o, err := parseBenchArgs([]string{"--full", "--prep-heads", "4"})
	if err != nil || o.prepHeads != 4 {
		t.Fatalf("--full --prep-heads 4: %+v, %v", o.prepHeads, err)
	}
	if _, err := parseBenchArgs([]string{"--full", "--prep-heads", "-1"}); err == nil || !strings.Contains(err.Error(), "--prep-heads -1") {
		t.Errorf("--prep-heads -1: %v", err)
	}
	if _, err := parseBenchArgs([]string{"--prep-heads", "4"}); err == nil || !strings.Contains(err.Error(), "--full") {
		t.Errorf("--prep-heads without --full: %v", err)
	}
}

// --shapes times shapes outside the suite, after --cases, named by heads
// and lengths, with the anchors of a table row of the same shape.
func TestBenchShapes(t *testing.T) {
	o, err := parseBenchArgs([]string{"--cases", "tp8_2k", "--shapes", "Hq=16,Hv=32,lens=2048x4; q35_1kx8 ;Hq=2,Hv=8,T=1024,B=3;Hq=16,Hv=32,lens=1024x8"})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name string
		hq   int
		lens []int
	}{
		{"tp8_2k", 2, []int{2048}},
		{"16/32 2048x4", 16, []int{2048, 2048, 2048, 2048}},
		{"q35_1kx8", 16, slices.Repeat([]int{1024}, 8)},
		{"2/8 1024x3", 2, []int{1024, 1024, 1024}},
		{"16/32 1024x8", 16, slices.Repeat([]int{1024}, 8)},
	}
	if len(o.cases) != len(want) {
		t.Fatalf("%d cases, want %d: %+v", len(o.cases), len(want), o.cases)
	}
	for i, w := range want {
		if c := o.cases[i]; c.Name != w.name || c.Hq != w.hq || !slices.Equal(c.Lens, w.lens) {
			t.Errorf("case %d = %+v, want %+v", i, c, w)
		}
	}
	// The shape of a suite row takes its anchors; a shape no table has, none.
	same := benchResult{Case: o.cases[4]}
	if a := same.anchor(); a.FLAFullMs == 0 || a != (benchResult{Case: o.cases[2]}).anchor() {
		t.Errorf("shape 1024x8 anchor %+v, want q35_1kx8's", a)
	}
	if a := (benchResult{Case: o.cases[3]}).anchor(); a != (anchor{}) {
		t.Errorf("shape 2/8 1024x3 anchor %+v, want none", a)
	}
	if o, err = parseBenchArgs([]string{"--shapes", "Hq=4,Hv=4,T=64"}); err != nil || len(o.cases) != 1 {
		t.Errorf("--shapes alone: %d cases, err %v; want the shape only", len(o.cases), err)
	}

	var errBuf bytes.Buffer
	stderr = &errBuf
	defer func() { stderr = os.Stderr }()
	for _, c := range []struct{ shapes, want string }{
		{"Hq=16,Hv=32,lens=0x4", "--shapes: shape \"Hq=16,Hv=32,lens=0x4\": no tokens"},
		{"Hq=16,T=64", "Hq and Hv are required"},
		{"Hq=16,Hv=24,T=64", "not a multiple"},
		{"nope", "not key=value"},
	} {
		if _, err := parseBenchArgs([]string{"--shapes", c.shapes}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--shapes %q: err = %v, want one containing %q", c.shapes, err, c.want)
		}
	}
	if _, err := parseBenchArgs([]string{"--from", "run.csv", "--plot", "a.svg", "--shapes", "Hq=4,Hv=4,T=64"}); err == nil || !strings.Contains(err.Error(), "--shapes do not apply") {
		t.Errorf("--from with --shapes: err = %v", err)
	}
}

// NaN or Inf in a case's outputs fails the run, naming the case, unless
// the case's kernel is a lab experiment's build that leaves work out:
// then the run notes them and goes on.
func TestNonFiniteErr(t *testing.T) {
	results := []benchResult{
		{Case: ref.Case{Name: "clean"}, Plan: gdn.Plan{Kernel: "lab_kernel"}},
		{Case: ref.Case{Name: "poisoned"}, Plan: gdn.Plan{Kernel: "lab_kernel"}, NonFinite: 7},
		{Case: ref.Case{Name: "production"}, Plan: gdn.Plan{Kernel: "other_kernel"}, NonFinite: 3},
	}
	noLab := func(string) (string, bool) { return "", false }
	labOf := func(k string) (string, bool) { return "noloads", k == "lab_kernel" }
	var note strings.Builder
	err := nonFiniteErr(&note, results, noLab)
	if err == nil || !strings.Contains(err.Error(), "case poisoned: 7 NaN/Inf") ||
		!strings.Contains(err.Error(), "case production: 3 NaN/Inf") || strings.Contains(err.Error(), "clean") {
		t.Errorf("outside a lab: %v", err)
	}
	if note.Len() != 0 {
		t.Errorf("outside a lab, a note: %q", note.String())
	}
	// The lab's kernel: a note; a kernel it leaves alone: still an error.
	err = nonFiniteErr(&note, results, labOf)
	if err == nil || strings.Contains(err.Error(), "poisoned") || !strings.Contains(err.Error(), "case production: 3 NaN/Inf") {
		t.Errorf("a lab that leaves work out: %v", err)
	}
	if s := note.String(); !strings.Contains(s, "poisoned: 7 NaN/Inf") || !strings.Contains(s, "lab noloads") || strings.Contains(s, "production") {
		t.Errorf("a lab that leaves work out: note %q", s)
	}
	if err := nonFiniteErr(&note, results[:1], noLab); err != nil {
		t.Errorf("finite outputs: %v", err)
	}
}
