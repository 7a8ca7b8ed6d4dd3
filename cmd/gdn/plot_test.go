package main

import (
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sampleRows are the v6 figures of docs/PERF.md with the anchors, as
// `gdn bench --csv` wrote them.
func sampleRows(t *testing.T) []benchRow {
	t.Helper()
	rows, err := readBenchCSVFile(filepath.Join("testdata", "bench_v6.csv"))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestWriteBenchPlotSVG(t *testing.T) {
	rows := sampleRows(t)
	path := filepath.Join(t.TempDir(), "bench.svg")
	if err := writeBenchPlot(path, rows); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	if !strings.HasPrefix(strings.TrimSpace(svg), "<?xml") || !strings.Contains(svg, "<svg") {
		t.Fatalf("not an SVG: %.80q", svg)
	}
	// Every case and every series is labelled.
	for _, r := range rows {
		if !strings.Contains(svg, r.Case) {
			t.Errorf("case %s has no label", r.Case)
		}
	}
	for _, s := range plotSeriesAll {
		if name, _, _ := strings.Cut(s.label, " ("); !strings.Contains(svg, name+" (") {
			t.Errorf("legend lacks %q", s.label)
		}
	}
	if !strings.Contains(svg, "roofline floor") || !strings.Contains(svg, "8 seqs, 13882") {
		t.Error("legend lacks the floor, or varlen_mix's lengths are not shortened")
	}
}

func TestWriteBenchPlotPNG(t *testing.T) {
	rows := sampleRows(t)[:3]
	path := filepath.Join(t.TempDir(), "bench.PNG")
	if err := writeBenchPlot(path, rows); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// 9 x 6 inches at gonum's default 96 dots per inch.
	if got := img.Bounds(); got != image.Rect(0, 0, 864, 576) {
		t.Errorf("image %v, want 864 x 576", got)
	}
}

func TestWriteBenchPlotErrors(t *testing.T) {
	dir := t.TempDir()
	if err := writeBenchPlot(filepath.Join(dir, "x.pdf"), sampleRows(t)); err == nil || !strings.Contains(err.Error(), ".svg or .png") {
		t.Errorf("pdf: %v", err)
	}
	if err := writeBenchPlot(filepath.Join(dir, "x.svg"), nil); err == nil || !strings.Contains(err.Error(), "no cases") {
		t.Errorf("no rows: %v", err)
	}
	if err := writeBenchPlot(filepath.Join(dir, "missing", "x.svg"), sampleRows(t)); err == nil {
		t.Error("a folder that does not exist: no error")
	}
	// A case without any anchor, at the smallest time, still plots.
	rows := []benchRow{{Case: "tiny", Lens: "1", Hq: 1, Hv: 1, MedianMs: 0.001, FloorMs: 0.0001}}
	if err := writeBenchPlot(filepath.Join(dir, "tiny.png"), rows); err != nil {
		t.Errorf("one case without anchors: %v", err)
	}
}

func TestShortLensText(t *testing.T) {
	for in, want := range map[string]string{
		"32768":                          "32768",
		"4096x8":                         "4096x8",
		"7000+33+1+4096+511+2048+64+129": "8 seqs, 13882",
		"4096x8+1024x8+16384":            "17 seqs, 57344",
	} {
		if got := shortLensText(in); got != want {
			t.Errorf("shortLensText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLogTicks125(t *testing.T) {
	var labels []string
	for _, tk := range (logTicks125{}).Ticks(0.003, 0.25) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if got := strings.Join(labels, " "); got != "0.005 0.01 0.02 0.05 0.1 0.2" {
		t.Errorf("labels %q", got)
	}
}

// The chart says which GPU gdn's bars come from (the anchors' are the
// H200's), and says so when the results do not name it.
func TestPlotCards(t *testing.T) {
	rows := []benchRow{{Case: "a", Device: "NVIDIA H100 80GB HBM3"}, {Case: "b", Device: "NVIDIA H100 80GB HBM3"}}
	if got, want := plotCards(rows), "gdn on NVIDIA H100 80GB HBM3; FLA, FlashQLA and FlashInfer on the H200"; got != want {
		t.Errorf("plotCards = %q, want %q", got, want)
	}
	rows[1].Device = "NVIDIA H200"
	if got := plotCards(rows); !strings.HasPrefix(got, "gdn on several GPUs;") {
		t.Errorf("two GPUs: %q", got)
	}
	if got := plotCards(sampleRows(t)); !strings.HasPrefix(got, "gdn on a GPU the results do not name;") {
		t.Errorf("a CSV without the device column: %q", got)
	}
	svg := filepath.Join(t.TempDir(), "b.svg")
	rows[1].Device = rows[0].Device
	for i := range rows {
		rows[i].Lens, rows[i].Hq, rows[i].Hv, rows[i].MedianMs, rows[i].FloorMs, rows[i].Forward = "64", 1, 1, 0.1, 0.01, "full"
	}
	if err := writeBenchPlot(svg, rows); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(svg); err != nil || !strings.Contains(string(b), "gdn on NVIDIA H100 80GB HBM3") {
		t.Errorf("the SVG's title does not name the GPU (err %v)", err)
	}
}
