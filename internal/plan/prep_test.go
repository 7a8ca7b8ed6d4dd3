package plan

import (
	"testing"

	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/kernsrc"
)

// prepHeads: blocks of four value heads only where four divide G and the
// grid keeps prepMinBlocksPerSM blocks an SM; a cap from Knobs.PrepHeads
// replaces the grid rule; every answer is a prep variant that exists.
func TestPrepHeads(t *testing.T) {
	for _, c := range []struct {
		hq, hv, chunks, sms, capHeads, want int
	}{
		{2, 8, 512, 132, 0, 4},   // tp8_32k: 1,024 blocks of four heads
		{2, 8, 128, 132, 0, 1},   // tp8_8k: 256 blocks of four would leave SMs short
		{16, 32, 512, 132, 0, 1}, // G = 2: no block of four heads
		{32, 32, 512, 132, 0, 1}, // G = 1
		{16, 64, 512, 132, 0, 4}, // q397_4kx8
		{1, 8, 64, 132, 0, 1},    // G = 8, a small grid
		{1, 8, 1024, 16, 0, 4},   // G = 8 on a 16-SM slice
		{1, 8, 1, 132, 4, 4},     // capped: the grid rule does not apply
		{1, 8, 1, 132, 3, 1},
		{1, 8, 1, 132, 100, 4},
		{2, 4, 1, 132, 4, 1},    // G = 2: four do not divide it
		{2, 6, 1000, 132, 4, 1}, // G = 3
	} {
		p := problem.Problem{Hq: c.hq, Hv: c.hv}
		got := PrepHeads(p, c.chunks, c.sms, c.capHeads)
		if got != c.want {
			t.Errorf("Hq %d Hv %d, %d chunks, %d SMs, cap %d: %d heads a block, want %d", c.hq, c.hv, c.chunks, c.sms, c.capHeads, got, c.want)
		}
		if (c.hv/c.hq)%got != 0 {
			t.Errorf("Hq %d Hv %d: %d heads a block do not divide G", c.hq, c.hv, got)
		}
		if _, err := kernsrc.PrepVariant(kernsrc.PrepChunkKernel, kernsrc.CoreBF16, got); err != nil {
			t.Errorf("Hq %d Hv %d: %v", c.hq, c.hv, err)
		}
	}
}
