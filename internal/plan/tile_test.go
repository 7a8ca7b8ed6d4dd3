package plan

import (
	"strings"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/kernsrc"
)

func TestTileWidth(t *testing.T) {
	mix := []int{0, 7000, 7033, 7034, 11130, 11641, 13689, 13753, 13882} // varlen_mix
	cases := []struct {
		name          string
		n, t, hv, sms int
		seqs          []int
		bv            int
		dt            dtype.Dtype
	}{
		{"tp8_32k", 1, 32768, 8, 132, nil, 64, dtype.BF16},         // 16 CTAs: the short chain of the 64-wide tile wins
		{"q397_32k", 1, 32768, 64, 132, nil, 64, dtype.FP16},       // 128 CTAs still fit one wave
		{"tp2_16kx2", 2, 16384, 32, 132, nil, 64, dtype.BF16},      // 128 CTAs
		{"q35_4kx8", 8, 4096, 32, 132, nil, 128, dtype.BF16},       // 4 waves of 64-wide CTAs against 2 of 128-wide ones
		{"q35_1kx8", 8, 1024, 32, 132, nil, 128, dtype.BF16},       // the same at a quarter of the length
		{"sym32_8kx4", 4, 8192, 32, 132, nil, 128, dtype.BF16},     // 2 waves against 1
		{"varlen_mix", 1, 13882, 32, 132, mix, 64, dtype.BF16},     // the 7000-token sequence bounds both: the shorter chain wins
		{"tp8_2k on 14 SMs", 1, 2048, 8, 14, nil, 128, dtype.BF16}, // a MIG slice: 8 CTAs in one wave beat 16 in two
		{"empty", 1, 0, 8, 132, []int{0, 0}, 64, dtype.BF16},
	}
	for _, c := range cases {
		p := problem.Problem{B: 1, N: c.n, T: c.t, Hq: 1, Hv: c.hv, Dtype: c.dt, Seqs: c.seqs}
		if c.seqs != nil {
			p.N = len(c.seqs) - 1
		}
		pl, err := Core(p, c.sms, Knobs{SegmentChunks: -1}) // the unsplit plan's tile (split plans: split_test.go)
		if err != nil {
			t.Fatal(err)
		}
		if pl.TileWidth != c.bv {
			t.Errorf("%s: tile %d, want %d", c.name, pl.TileWidth, c.bv)
		}
		if want := uint32(c.hv * 128 / c.bv); pl.Grid[0] != want || pl.Grid[1] != uint32(p.N) {
			t.Errorf("%s: grid %v, want [%d %d 1]", c.name, pl.Grid, want, p.N)
		}
		if !strings.Contains(pl.Variant.Name, c.dt.String()) {
			t.Errorf("variant %s for %v", pl.Variant.Name, c.dt)
		}
		nc := c.bv / 64
		if pl.SharedBytes != kernsrc.HopperSharedBytes(CoreDtype(p), nc) || pl.SharedBytes > 227<<10 {
			t.Errorf("shared bytes %d", pl.SharedBytes)
		}
		if pl.Block[0] != uint32(kernsrc.HopperThreads(CoreDtype(p), nc, false)) {
			t.Errorf("block %v", pl.Block)
		}
	}
}
