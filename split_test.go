package gdn

import (
	"strings"
	"testing"
)

// The tables of a split plan cover every token of every sequence exactly
// once, cut transfer segments at whole chunks of segChunks, list each
// sequence's last segment first (so grid row n writes ht[n]) and index the
// transfer segments per sequence in token order.
func TestSegmentTables(t *testing.T) {
	cases := []Problem{
		{B: 1, T: 700, Hq: 1, Hv: 2, N: 7, Seqs: []int{0, 0, 1, 200, 201, 600, 600, 700}},
		{B: 3, T: 300, Hq: 1, Hv: 1, N: 3},
		{B: 1, T: 64, Hq: 1, Hv: 1, N: 1},
	}
	for _, p := range cases {
		for _, seg := range []int{1, 2, 3} {
			out, tr, first, _, err := segmentTables(p, seg, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(first) != p.N+1 || int(first[p.N])*2 != len(tr) || len(out) != 2*p.N+len(tr) {
				t.Fatalf("sizes: out %d transfer %d first %v", len(out), len(tr), first)
			}
			for n := 0; n < p.N; n++ {
				b, e := n*p.T, (n+1)*p.T
				if p.Seqs != nil {
					b, e = p.Seqs[n], p.Seqs[n+1]
				}
				pos := b
				for i := first[n]; i < first[n+1]; i++ {
					tb, te := int(tr[2*i]), int(tr[2*i+1])
					if tb != pos || te-tb != seg*ChunkLen {
						t.Fatalf("seg %d seq %d transfer %d: [%d,%d) at %d", seg, n, i, tb, te, pos)
					}
					if ob, oe := out[2*(p.N+int(i))], out[2*(p.N+int(i))+1]; int(ob) != tb || int(oe) != te {
						t.Fatalf("output row %d: [%d,%d), want [%d,%d)", p.N+int(i), ob, oe, tb, te)
					}
					pos = te
				}
				if lb, le := int(out[2*n]), int(out[2*n+1]); lb != pos || le != e || le-lb > seg*ChunkLen || (le == lb && e != b) {
					t.Fatalf("seg %d seq %d last segment [%d,%d), want [%d,%d)", seg, n, lb, le, pos, e)
				}
			}
		}
	}
}

// The planner splits few long heads on a big GPU and leaves many heads
// alone; the SM count matters; forcing works both ways; in a batch of one
// long and many short sequences only the long one is cut.
func TestPlanSplitDecisions(t *testing.T) {
	tp8 := Problem{B: 1, T: 32768, Hq: 2, Hv: 8, N: 1, Dtype: BF16}
	q35 := Problem{B: 8, T: 4096, Hq: 16, Hv: 32, N: 8, Dtype: BF16}
	if sp := planSplit(tp8, 132, 0, 0, 0); sp.segChunks == 0 || sp.transfer == 0 {
		t.Errorf("tp8_32k on 132 SMs: %+v, want a split", sp)
	} else if unsplit, split := min(unsplitTime(tp8, 132, 1), unsplitTime(tp8, 132, 2)), mustSplitTime(t, tp8, 132, sp); split >= unsplit {
		t.Errorf("tp8_32k: split %.0f us not under unsplit %.0f us", split, unsplit)
	}
	if sp := planSplit(q35, 132, 0, 0, 0); sp.segChunks != 0 {
		t.Errorf("q35_4kx8: %+v, want no split (256 heads x tiles fill the GPU)", sp)
	}
	for _, sms := range []int{8, 14, 16, 32, 72, 132} {
		sp := planSplit(tp8, sms, 0, 0, 0)
		t.Logf("tp8_32k on %d SMs: %+v", sms, sp)
		if sms <= 16 && sp.segChunks != 0 {
			t.Errorf("tp8_32k on %d SMs: %+v: 16 tiles already fill the slice, a split only adds work", sms, sp)
		}
	}
	if sp := planSplit(tp8, 132, -1, 0, 0); sp.segChunks != 0 {
		t.Errorf("forced off: %+v", sp)
	}
	if sp := planSplit(q35, 132, 8, 0, 0); sp.segChunks != 8 || sp.transfer != 8*7 {
		t.Errorf("forced 8 chunks on 8 x 64 chunks: %+v, want 56 transfer segments", sp)
	}
	if sp := planSplit(q35, 132, 64, 0, 0); sp.segChunks != 0 {
		t.Errorf("forced 64 chunks on 64-chunk sequences: %+v, nothing to cut", sp)
	}
	if sp := planSplit(tp8, 132, 0, 2, 0); sp.consumers != 2 || sp.xferConsumers != 2 {
		t.Errorf("forced tile 128: %+v, want both passes at 128", sp)
	}
	if sp := planSplit(tp8, 132, 0, 1, 0); sp.consumers != 1 || sp.xferConsumers != 1 {
		t.Errorf("forced tile 64: %+v, want both passes at 64", sp)
	}
	seqs := []int{0, 32768}
	for i := 0; i < 31; i++ {
		seqs = append(seqs, seqs[len(seqs)-1]+500)
	}
	mix := Problem{B: 1, T: seqs[len(seqs)-1], Hq: 2, Hv: 8, N: len(seqs) - 1, Seqs: seqs, Dtype: BF16}
	sp := planSplit(mix, 132, 0, 0, 0)
	if sp.segChunks == 0 || sp.transfer != (512+sp.segChunks-1)/sp.segChunks-1 {
		t.Errorf("one long and 31 short: %+v, want only the long one cut", sp)
	}
}

// The transfer pass starts its M CTAs first exactly when its grid is more
// than one wave of the SMs planned for: the same forced split on a big and
// a small GPU.
func TestPlanSplitMFirst(t *testing.T) {
	tp2 := Problem{B: 1, T: 32768, Hq: 4, Hv: 32, N: 1, Dtype: BF16}
	for _, tc := range []struct {
		sms, force int
	}{{132, 128}, {132, 8}, {1000, 128}, {16, 128}} {
		sp := planSplit(tp2, tc.sms, tc.force, 2, 0)
		if sp.segChunks == 0 {
			t.Fatalf("%d SMs, forced %d chunks: not split", tc.sms, tc.force)
		}
		ctas := 2 * sp.transfer * tp2.Hv
		if want := ctas > tc.sms; sp.mFirst != want {
			t.Errorf("%d SMs, %d transfer CTAs: mFirst %v, want %v", tc.sms, ctas, sp.mFirst, want)
		}
	}
	if sp := planSplit(tp2, 132, -1, 0, 0); sp.mFirst {
		t.Errorf("unsplit plan with mFirst: %+v", sp)
	}
}

func mustSplitTime(t *testing.T, p Problem, sms int, sp splitPlan) float64 {
	tm, _, ok := splitTime(p, sms, sp.consumers, sp.xferConsumers, sp.segChunks, sp.early)
	if !ok {
		t.Fatalf("splitTime of %+v", sp)
	}
	return tm
}

// Packed sequences rewritten in place with other boundaries but the same
// chains must not share a prepared call: the split tables hold positions.
func TestHopperCallKeyHoldsBoundaries(t *testing.T) {
	a, b := hashSeqs([]int{0, 100, 300}), hashSeqs([]int{0, 200, 300})
	if a == b || hashSeqs(nil) == a {
		t.Fatalf("hashes %x %x", a, b)
	}
}

// The output pass runs one grid row (grid.y, at most 65535) per segment, so
// no split plan may cut more segments than that, forced or not: such a plan
// would fail at launch although the unsplit call is valid.
func TestPlanSplitGridRows(t *testing.T) {
	long := Problem{B: 1, T: 65536 * ChunkLen, Hq: 1, Hv: 1, N: 1, Dtype: BF16}
	for _, force := range []int{1, 2} {
		sp := planSplit(long, 132, force, 0, 0)
		if sp.segChunks == 0 {
			continue // not split: fine
		}
		if segs := sp.transfer + long.N; segs > maxSeqs {
			t.Errorf("forced %d chunks: %d segments, over the %d grid rows", force, segs, maxSeqs)
		}
	}
	// Many sequences, each cut once, pass the limit as well.
	many := Problem{B: 40000, T: 2 * ChunkLen, Hq: 1, Hv: 1, N: 40000, Dtype: BF16}
	if sp := planSplit(many, 132, 1, 0, 0); sp.segChunks != 0 && sp.transfer+many.N > maxSeqs {
		t.Errorf("40000 sequences of 2 chunks, forced 1: %d segments", sp.transfer+many.N)
	}
	// At the limit it still splits.
	at := Problem{B: 1, T: maxSeqs * ChunkLen, Hq: 1, Hv: 1, N: 1, Dtype: BF16}
	if sp := planSplit(at, 132, 1, 0, 0); sp.segChunks != 1 || sp.transfer+1 != maxSeqs {
		t.Errorf("%d chunks forced 1: %+v, want %d segments", maxSeqs, sp, maxSeqs)
	}
}

// PlanFor is what a Runtime with those options runs: a forced variant's
// tile is kept when the planner splits, and the prepared call of a Runtime
// gets exactly that plan.
func TestPlanForForcedVariant(t *testing.T) {
	p := Problem{B: 1, T: 32768, Hq: 2, Hv: 8, N: 1, Dtype: BF16}
	for _, v := range []string{"gdn_hopper_bf16_bv64", "gdn_hopper_bf16_bv128"} {
		pl, err := PlanFor(p, 132, v, 0)
		if err != nil {
			t.Fatal(err)
		}
		if pl.Variant.Name != v || pl.SegmentChunks == 0 {
			t.Errorf("forced %s: plan %v, want that variant, split", v, pl)
		}
	}
	c, _ := splitHostPath(0)
	c.plans = newPlanCache(132, "gdn_hopper_bf16_bv128")
	a := goodArgs(1, 32768, 2, 8)
	e, err := c.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release(e)
	want, _ := PlanFor(p, 132, "gdn_hopper_bf16_bv128", 0)
	if e.plan.String() != want.String() {
		t.Errorf("prepared call's plan %v, PlanFor's %v", e.plan, want)
	}
}

// Options.TransferTile fixes the transfer pass's tile of a split plan and
// nothing else: the same segments, the same output tile, and no split where
// the planner would not split.
func TestWithSplitTransferTile(t *testing.T) {
	tp8 := Problem{B: 1, T: 8192, Hq: 2, Hv: 8, N: 1, Dtype: BF16}
	pl, err := planHopper(tp8, chooseConsumers(tp8, 132))
	if err != nil {
		t.Fatal(err)
	}
	_, free, err := withSplit(tp8, pl, 132, 0, 0, 0, 0, false)
	if err != nil || free.segChunks == 0 {
		t.Fatalf("tp8_8k: %+v, %v; want a split", free, err)
	}
	for _, tile := range []int{64, 128} {
		got, sp, err := withSplit(tp8, pl, 132, 0, tile, 0, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		want := free
		want.xferConsumers = tile / 64
		if sp != want {
			t.Errorf("transfer tile %d: %+v, want %+v", tile, sp, want)
		}
		// The plan names the transfer tile only when it differs from the output pass's.
		if wantW := tile; (got.TransferTileWidth != 0 && got.TransferTileWidth != wantW) || (got.TransferTileWidth == 0 && got.TileWidth != wantW) {
			t.Errorf("transfer tile %d: plan %v", tile, got)
		}
	}
	q35 := Problem{B: 8, T: 4096, Hq: 16, Hv: 32, N: 8, Dtype: BF16}
	pq, err := planHopper(q35, chooseConsumers(q35, 132))
	if err != nil {
		t.Fatal(err)
	}
	if _, sp, err := withSplit(q35, pq, 132, 0, 128, 0, 0, false); err != nil || sp.segChunks != 0 {
		t.Errorf("q35_4kx8 with transfer tile 128: %+v, %v; want no split", sp, err)
	}
}

// The scan's CTA width: the fewest waves x step cost on the H200's 132
// SMs (8 columns where one wave holds the narrow grid, 16 for 16 heads, 32
// for 32), and on slices; Options.ScanColumns overrides it and nothing
// else; and the plan names the width it runs.
func TestScanColumns(t *testing.T) {
	for _, c := range []struct {
		hv, n, sms, want int
	}{
		{8, 1, 132, 8},   // tp8_32k: 128 CTAs of 8, one wave
		{4, 1, 132, 8},   // chain_equal
		{16, 1, 132, 16}, // tp4_32k: 256 CTAs of 8 are two waves, 128 of 16 one
		{32, 1, 132, 32}, // tp2_32k: four waves of 8, two of 16, one of 32
		{32, 2, 132, 32},
		{8, 1, 16, 32}, // a 16-SM slice: 128 CTAs of 8 are 8 waves, 32 of 32 two
		{8, 1, 64, 16}, // 2 waves of 8 (2) against 1 of 16 (1.4)
		{1, 1, 132, 8},
	} {
		p := Problem{B: 1, T: 32768, Hq: 1, Hv: c.hv, N: c.n, Dtype: BF16}
		if got := scanColumns(p, c.sms); got != c.want {
			t.Errorf("Hv %d N %d on %d SMs: %d columns, want %d", c.hv, c.n, c.sms, got, c.want)
		}
	}
	tp4 := Problem{B: 1, T: 32768, Hq: 1, Hv: 16, N: 1, Dtype: BF16}
	pl, err := planHopper(tp4, chooseConsumers(tp4, 132))
	if err != nil {
		t.Fatal(err)
	}
	got, free, err := withSplit(tp4, pl, 132, 0, 0, 0, 0, false)
	if err != nil || free.segChunks == 0 || free.scanColumns != 16 || got.ScanColumns != 16 {
		t.Fatalf("tp4_32k: plan %v, split %+v, %v; want a split with 16-column scan CTAs", got, free, err)
	}
	if !strings.Contains(got.String(), "scan-columns=16") {
		t.Errorf("plan %q does not name its scan width", got)
	}
	for _, cols := range []int{8, 32} {
		got, sp, err := withSplit(tp4, pl, 132, 0, 0, cols, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		want := free
		want.scanColumns = cols
		if sp != want || got.ScanColumns != cols {
			t.Errorf("scan columns %d: %+v (plan %v), want %+v", cols, sp, got, want)
		}
	}
}

// Early plans: the planner takes one for tp4_32k on the whole H200 (its
// plain transfer pass is two waves: the early pass moves a segment's
// output walk off the chain) and not for tp2_32k (its plain transfer pass
// is one wave once the decaying heads' M CTAs leave; the early one's would
// be two, earlyWalkingShare); forcing works both ways; a batch with a
// sequence no longer than one segment is never early, and forcing early
// there falls back to the plain split; the early plan's segment count is
// exact (its output pass one wave of 128 CTAs on tp4_32k).
func TestPlanSplitEarly(t *testing.T) {
	tp4 := Problem{B: 1, T: 32768, Hq: 4, Hv: 16, N: 1, Dtype: BF16}
	tp2 := Problem{B: 1, T: 32768, Hq: 8, Hv: 32, N: 1, Dtype: BF16}
	sp := planSplit(tp4, 132, 0, 0, 0)
	if !sp.early || sp.segChunks == 0 {
		t.Fatalf("tp4_32k: %+v, want an early plan", sp)
	}
	if segs := ceilDiv(512, sp.segChunks); (segs-1)*tp4.Hv*(2/sp.consumers) > 132 || sp.transfer != segs-2 {
		t.Errorf("tp4_32k: %+v: %d segments, output pass of %d CTAs", sp, segs, (segs-1)*tp4.Hv*(2/sp.consumers))
	}
	// The transfer pass runs on the SMs the early pass leaves: mFirst when
	// its grid is more than those.
	if want := transferCTAs(tp4, sp.transfer, sp.xferConsumers) > 132-tp4.Hv*(2/sp.consumers); sp.mFirst != want {
		t.Errorf("tp4_32k: mFirst %v, want %v", sp.mFirst, want)
	}
	if sp := planSplit(tp2, 132, 0, 0, 0); sp.early || sp.segChunks == 0 {
		t.Errorf("tp2_32k: %+v, want a plain split", sp)
	}
	if sp := planSplit(tp2, 132, 0, 0, 1); !sp.early {
		t.Errorf("tp2_32k, early forced: %+v", sp)
	}
	if sp := planSplit(tp4, 132, 0, 0, -1); sp.early || sp.segChunks == 0 {
		t.Errorf("tp4_32k, early off: %+v, want a plain split", sp)
	}
	// One long sequence and short ones: the short ones are one segment.
	mix := Problem{B: 1, T: 33000, Hq: 2, Hv: 8, N: 3, Seqs: []int{0, 32768, 32900, 33000}, Dtype: BF16}
	if sp := planSplit(mix, 132, 0, 0, 0); sp.early {
		t.Errorf("long and short sequences: %+v, early", sp)
	}
	if sp := planSplit(mix, 132, 0, 0, 1); sp.early || sp.segChunks == 0 {
		t.Errorf("long and short sequences, early forced: %+v, want the plain split", sp)
	}
	// Forced segments: early where every sequence has two and one has three.
	if sp := planSplit(Problem{B: 2, T: 300, Hq: 1, Hv: 2, N: 2, Dtype: BF16}, 132, 2, 0, 1); !sp.early || sp.segChunks != 2 || sp.transfer != 2 {
		t.Errorf("2 x 5 chunks in segments of 2, early forced: %+v, want 2 transfer segments", sp)
	}
	if sp := planSplit(Problem{B: 2, T: 200, Hq: 1, Hv: 2, N: 2, Dtype: BF16}, 132, 2, 0, 1); sp.early {
		t.Errorf("2 x 4 chunks in segments of 2 (no transfer segment left), early forced: %+v", sp)
	}
}
