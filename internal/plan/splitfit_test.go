package plan

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/gdnjit/gdn/internal/problem"
)

// scripts/splitfit.py, which refits the split cost model from
// device-run.sh's splitgrid runs, recovers split.go's constants from runs
// timed by split.go's own model: its features are the planner's formula.
// The runs are the grid's (seven few-head cases, both tiles of each pass,
// segments of 8 to 128 chunks, and unsplit where the grid is one wave), as
// gdn bench writes them to CSV.
func TestSplitFitRecoversConstants(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	const sms = 132
	cases := []struct {
		name, lens string
		p          problem.Problem
	}{
		{"tp8_32k", "32768", problem.Problem{B: 1, T: 32768, Hq: 2, Hv: 8, N: 1}},
		{"tp4_32k", "32768", problem.Problem{B: 1, T: 32768, Hq: 4, Hv: 16, N: 1}},
		{"tp8_8k", "8192", problem.Problem{B: 1, T: 8192, Hq: 2, Hv: 8, N: 1}},
		{"chain_equal", "16384", problem.Problem{B: 1, T: 16384, Hq: 4, Hv: 4, N: 1}},
		{"tp2_32k", "32768", problem.Problem{B: 1, T: 32768, Hq: 8, Hv: 32, N: 1}},
		{"tp2_16kx2", "16384x2", problem.Problem{B: 2, T: 16384, Hq: 8, Hv: 32, N: 2}},
		{"tp8_2k", "2048", problem.Problem{B: 1, T: 2048, Hq: 2, Hv: 8, N: 1}},
	}
	dir := t.TempDir()
	runs := 0
	write := func(name string, rows []string) {
		body := "case,hq,hv,lens,median_ms,variant,plan\n"
		for _, r := range rows {
			body += r + "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		runs += len(rows)
	}
	for _, nc := range []int{1, 2} {
		variant := fmt.Sprintf("gdn_hopper_bf16_bv%d", 64*nc)
		var rows []string
		for _, c := range cases {
			if ceilDiv(c.p.N*c.p.Hv*(2/nc), sms) > 1 {
				continue // several waves: plan.go's full-GPU chunk times, not fitted
			}
			rows = append(rows, fmt.Sprintf("%s,%d,%d,%s,%.7f,%s,%s grid=[1 1 1]", c.name, c.p.Hq, c.p.Hv, c.lens, unsplitTime(c.p, sms, nc)/1000, variant, variant))
		}
		write(variant+"-unsplit.csv", rows)
		for _, xc := range []int{1, 2} {
			for _, ls := range []int{8, 16, 32, 64, 128} {
				rows = nil
				for _, c := range cases {
					tm, transfer, ok := splitTime(c.p, sms, nc, xc, ls, false)
					if !ok {
						continue
					}
					plan := fmt.Sprintf("%s grid=[1 1 1] split=%dx%d", variant, transfer, ls)
					if xc != nc {
						plan += fmt.Sprintf(" transfer-tile=%d", 64*xc)
					}
					rows = append(rows, fmt.Sprintf("%s,%d,%d,%s,%.7f,%s,%s", c.name, c.p.Hq, c.p.Hv, c.lens, tm/1000, variant, plan))
				}
				write(fmt.Sprintf("%s-x%d-s%d.csv", variant, 64*xc, ls), rows)
			}
		}
	}
	out, err := exec.Command(py, filepath.Join("..", "..", "scripts", "splitfit.py"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("splitfit.py: %v\n%s", err, out)
	}
	got := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(\w+)\s+= ([0-9.]+)$`).FindAllStringSubmatch(string(out), -1) {
		got[m[1]], _ = strconv.ParseFloat(m[2], 64)
	}
	for name, v := range map[string]float64{
		"transferChunkTime64": transferChunkTime64, "transferChunkTime128": transferChunkTime128,
		"outputChunkTime64": outputChunkTime64, "outputChunkTime128": outputChunkTime128,
		"oneWaveChunkTime64": oneWaveChunkTime64, "oneWaveChunkTime128": oneWaveChunkTime128,
		"waveTime": waveTime, "scanStepTime": scanStepTime, "splitLaunchTime": splitLaunchTime,
	} {
		if g, ok := got[name]; !ok || math.Abs(g-v) > 0.006 {
			t.Errorf("%s: fitted %v (printed: %v), split.go has %v", name, g, ok, v)
		}
	}
	if want := fmt.Sprintf("%d runs on %d SMs", runs, sms); !regexp.MustCompile(regexp.QuoteMeta(want)).Match(out) {
		t.Errorf("output lacks %q", want)
	}
	if t.Failed() {
		t.Logf("splitfit.py output:\n%s", out)
	}
}
