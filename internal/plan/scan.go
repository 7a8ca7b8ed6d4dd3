package plan

import (
	"math"

	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/kernsrc"
)

// scanStepCost is a scan step's time with CTAs of c value columns against
// one of 8 (gdn_scan.cu): measured with ncu on the H200 (docs/PERF.md v30),
// tp8_32k's scan, one wave at every width, took 24.0, 33.4 and 58.4 us at 8,
// 16 and 32 columns.
func scanStepCost(c int) float64 {
	switch c {
	case 16:
		return 1.4
	case 32:
		return 2.4
	}
	return 1
}

// scanColumns picks the scan's CTA width for p on sms multiprocessors: the
// least waves x scanStepCost of its grid (128 / c, Hv, N), one CTA an SM
// (its shared memory), the narrowest on a tie. On the H200's 132 SMs that
// is 8 columns up to 8 heads (Hv x N; tp8_32k: one wave of 128 CTAs), 16 for
// tp4_32k (two waves of 8 columns against one of 16: 23.6 -> 17.5 us) and
// 32 for tp2_32k (four against one: 23.3 -> 15.6 us).
func scanColumns(p problem.Problem, sms int) int {
	best, bestCost := 0, math.Inf(1)
	for _, c := range kernsrc.ScanColumnChoices() {
		waves := ceilDiv(problem.HeadDim/c*p.Hv*max(p.N, 1), max(sms, 1))
		if cost := float64(waves) * scanStepCost(c); cost < bestCost {
			best, bestCost = c, cost
		}
	}
	return best
}
