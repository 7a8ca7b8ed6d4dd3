package plan

import (
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/kernsrc"
)

// prepMinBlocksPerSM is the fewest prep blocks per SM that PrepHeads
// accepts for blocks of several heads. Measured (docs/PERF.md v16): four
// heads a block paid on tp8_32k's 1,024 blocks (7.8 an SM: 1.03x) and lost
// on tp8_8k's 256 (1.9 an SM: 0.93x), where too few blocks are left to
// hide each one's chain of dependent steps.
const prepMinBlocksPerSM = 4

// PrepHeads returns how many value heads each block of the full forward's
// preparation kernel takes (one of kernsrc.PrepHeads) for p, cut into
// chunks chunks, on sms SMs: the most that divide G = Hv / Hq while the
// grid keeps at least prepMinBlocksPerSM blocks an SM. capHeads > 0
// (Knobs.PrepHeads) replaces the grid rule by a cap.
func PrepHeads(p problem.Problem, chunks, sms, capHeads int) int {
	g := p.Hv / p.Hq
	for _, h := range kernsrc.PrepHeads() {
		if g%h != 0 {
			continue
		}
		if capHeads > 0 && h <= capHeads || capHeads == 0 && (h == 1 || chunks*p.Hv/h >= prepMinBlocksPerSM*sms) {
			return h
		}
	}
	return 1
}
