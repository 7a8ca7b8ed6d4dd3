package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/problem"
)

// The tables of a split plan cover every token of every sequence exactly
// once, cut transfer segments at whole chunks of segChunks, list each
// sequence's last segment first (so grid row n writes ht[n]) and index the
// transfer segments per sequence in token order.
func TestSegmentTables(t *testing.T) {
	cases := []problem.Problem{
		{B: 1, T: 700, Hq: 1, Hv: 2, N: 7, Seqs: []int{0, 0, 1, 200, 201, 600, 600, 700}},
		{B: 3, T: 300, Hq: 1, Hv: 1, N: 3},
		{B: 1, T: 64, Hq: 1, Hv: 1, N: 1},
	}
	for _, p := range cases {
		for _, seg := range []int{1, 2, 3} {
			out, tr, first, _, err := SegmentTables(p, seg, false)
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
					if tb != pos || te-tb != seg*problem.ChunkLen {
						t.Fatalf("seg %d seq %d transfer %d: [%d,%d) at %d", seg, n, i, tb, te, pos)
					}
					if ob, oe := out[2*(p.N+int(i))], out[2*(p.N+int(i))+1]; int(ob) != tb || int(oe) != te {
						t.Fatalf("output row %d: [%d,%d), want [%d,%d)", p.N+int(i), ob, oe, tb, te)
					}
					pos = te
				}
				if lb, le := int(out[2*n]), int(out[2*n+1]); lb != pos || le != e || le-lb > seg*problem.ChunkLen || (le == lb && e != b) {
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
	tp8 := problem.Problem{B: 1, T: 32768, Hq: 2, Hv: 8, N: 1, Dtype: dtype.BF16}
	q35 := problem.Problem{B: 8, T: 4096, Hq: 16, Hv: 32, N: 8, Dtype: dtype.BF16}
	if sp := planSplit(tp8, 132, 0, 0, 0); sp.SegChunks == 0 || sp.Transfer == 0 {
		t.Errorf("tp8_32k on 132 SMs: %+v, want a split", sp)
	} else if unsplit, split := min(unsplitTime(tp8, 132, 1), unsplitTime(tp8, 132, 2)), mustSplitTime(t, tp8, 132, sp); split >= unsplit {
		t.Errorf("tp8_32k: split %.0f us not under unsplit %.0f us", split, unsplit)
	}
	if sp := planSplit(q35, 132, 0, 0, 0); sp.SegChunks != 0 {
		t.Errorf("q35_4kx8: %+v, want no split (256 heads x tiles fill the GPU)", sp)
	}
	for _, sms := range []int{8, 14, 16, 32, 72, 132} {
		sp := planSplit(tp8, sms, 0, 0, 0)
		t.Logf("tp8_32k on %d SMs: %+v", sms, sp)
		if sms <= 16 && sp.SegChunks != 0 {
			t.Errorf("tp8_32k on %d SMs: %+v: 16 tiles already fill the slice, a split only adds work", sms, sp)
		}
	}
	if sp := planSplit(tp8, 132, -1, 0, 0); sp.SegChunks != 0 {
		t.Errorf("forced off: %+v", sp)
	}
	if sp := planSplit(q35, 132, 8, 0, 0); sp.SegChunks != 8 || sp.Transfer != 8*7 {
		t.Errorf("forced 8 chunks on 8 x 64 chunks: %+v, want 56 transfer segments", sp)
	}
	if sp := planSplit(q35, 132, 64, 0, 0); sp.SegChunks != 0 {
		t.Errorf("forced 64 chunks on 64-chunk sequences: %+v, nothing to cut", sp)
	}
	if sp := planSplit(tp8, 132, 0, 2, 0); sp.Consumers != 2 || sp.XferConsumers != 2 {
		t.Errorf("forced tile 128: %+v, want both passes at 128", sp)
	}
	if sp := planSplit(tp8, 132, 0, 1, 0); sp.Consumers != 1 || sp.XferConsumers != 1 {
		t.Errorf("forced tile 64: %+v, want both passes at 64", sp)
	}
	seqs := []int{0, 32768}
	for i := 0; i < 31; i++ {
		seqs = append(seqs, seqs[len(seqs)-1]+500)
	}
	mix := problem.Problem{B: 1, T: seqs[len(seqs)-1], Hq: 2, Hv: 8, N: len(seqs) - 1, Seqs: seqs, Dtype: dtype.BF16}
	sp := planSplit(mix, 132, 0, 0, 0)
	if sp.SegChunks == 0 || sp.Transfer != (512+sp.SegChunks-1)/sp.SegChunks-1 {
		t.Errorf("one long and 31 short: %+v, want only the long one cut", sp)
	}
}

// The transfer pass starts its M CTAs first exactly when its grid is more
// than one wave of the SMs planned for: the same forced split on a big and
// a small GPU.
func TestPlanSplitMFirst(t *testing.T) {
	tp2 := problem.Problem{B: 1, T: 32768, Hq: 4, Hv: 32, N: 1, Dtype: dtype.BF16}
	for _, tc := range []struct {
		sms, force int
	}{{132, 128}, {132, 8}, {1000, 128}, {16, 128}} {
		sp := planSplit(tp2, tc.sms, tc.force, 2, 0)
		if sp.SegChunks == 0 {
			t.Fatalf("%d SMs, forced %d chunks: not split", tc.sms, tc.force)
		}
		ctas := 2 * sp.Transfer * tp2.Hv
		if want := ctas > tc.sms; sp.MFirst != want {
			t.Errorf("%d SMs, %d transfer CTAs: mFirst %v, want %v", tc.sms, ctas, sp.MFirst, want)
		}
	}
	if sp := planSplit(tp2, 132, -1, 0, 0); sp.MFirst {
		t.Errorf("unsplit plan with mFirst: %+v", sp)
	}
}

func mustSplitTime(t *testing.T, p problem.Problem, sms int, sp Split) float64 {
	tm, _, ok := splitTime(p, sms, sp.Consumers, sp.XferConsumers, sp.SegChunks, sp.Early)
	if !ok {
		t.Fatalf("splitTime of %+v", sp)
	}
	return tm
}

// The output pass runs one grid row (grid.y, at most 65535) per segment, so
// no split plan may cut more segments than that, forced or not: such a plan
// would fail at launch although the unsplit call is valid.
func TestPlanSplitGridRows(t *testing.T) {
	long := problem.Problem{B: 1, T: 65536 * problem.ChunkLen, Hq: 1, Hv: 1, N: 1, Dtype: dtype.BF16}
	for _, force := range []int{1, 2} {
		sp := planSplit(long, 132, force, 0, 0)
		if sp.SegChunks == 0 {
			continue // not split: fine
		}
		if segs := sp.Transfer + long.N; segs > problem.MaxSeqs {
			t.Errorf("forced %d chunks: %d segments, over the %d grid rows", force, segs, problem.MaxSeqs)
		}
	}
	// Many sequences, each cut once, pass the limit as well.
	many := problem.Problem{B: 40000, T: 2 * problem.ChunkLen, Hq: 1, Hv: 1, N: 40000, Dtype: dtype.BF16}
	if sp := planSplit(many, 132, 1, 0, 0); sp.SegChunks != 0 && sp.Transfer+many.N > problem.MaxSeqs {
		t.Errorf("40000 sequences of 2 chunks, forced 1: %d segments", sp.Transfer+many.N)
	}
	// At the limit it still splits.
	at := problem.Problem{B: 1, T: problem.MaxSeqs * problem.ChunkLen, Hq: 1, Hv: 1, N: 1, Dtype: dtype.BF16}
	if sp := planSplit(at, 132, 1, 0, 0); sp.SegChunks != 1 || sp.Transfer+1 != problem.MaxSeqs {
		t.Errorf("%d chunks forced 1: %+v, want %d segments", problem.MaxSeqs, sp, problem.MaxSeqs)
	}
}

// A forced variant's tile is kept when the planner splits (and the
// prepared call of a Runtime gets exactly that plan:
// TestCallCacheForcedVariantSplits).
func TestCoreForcedVariant(t *testing.T) {
	p := problem.Problem{B: 1, T: 32768, Hq: 2, Hv: 8, N: 1, Dtype: dtype.BF16}
	for _, v := range []string{"gdn_hopper_bf16_bv64", "gdn_hopper_bf16_bv128"} {
		pl, err := Core(p, 132, Knobs{Variant: v})
		if err != nil {
			t.Fatal(err)
		}
		if pl.Variant.Name != v || pl.SegmentChunks == 0 {
			t.Errorf("forced %s: plan %v, want that variant, split", v, pl)
		}
	}
}

// Knobs.TransferTile fixes the transfer pass's tile of a split plan and
// nothing else: the same segments, the same output tile, and no split where
// the planner would not split.
func TestWithSplitTransferTile(t *testing.T) {
	tp8 := problem.Problem{B: 1, T: 8192, Hq: 2, Hv: 8, N: 1, Dtype: dtype.BF16}
	pl, err := planHopper(tp8, chooseConsumers(tp8, 132))
	if err != nil {
		t.Fatal(err)
	}
	_, free, err := WithSplit(tp8, pl, 132, Knobs{})
	if err != nil || free.SegChunks == 0 {
		t.Fatalf("tp8_8k: %+v, %v; want a split", free, err)
	}
	for _, tile := range []int{64, 128} {
		got, sp, err := WithSplit(tp8, pl, 132, Knobs{TransferTile: tile})
		if err != nil {
			t.Fatal(err)
		}
		want := free
		want.XferConsumers = tile / 64
		if sp != want {
			t.Errorf("transfer tile %d: %+v, want %+v", tile, sp, want)
		}
		// The plan names the transfer tile only when it differs from the output pass's.
		if wantW := tile; (got.TransferTileWidth != 0 && got.TransferTileWidth != wantW) || (got.TransferTileWidth == 0 && got.TileWidth != wantW) {
			t.Errorf("transfer tile %d: plan %v", tile, got)
		}
	}
	q35 := problem.Problem{B: 8, T: 4096, Hq: 16, Hv: 32, N: 8, Dtype: dtype.BF16}
	pq, err := planHopper(q35, chooseConsumers(q35, 132))
	if err != nil {
		t.Fatal(err)
	}
	if _, sp, err := WithSplit(q35, pq, 132, Knobs{TransferTile: 128}); err != nil || sp.SegChunks != 0 {
		t.Errorf("q35_4kx8 with transfer tile 128: %+v, %v; want no split", sp, err)
	}
}

// The scan's CTA width: the fewest waves x step cost on the H200's 132
// SMs (8 columns where one wave holds the narrow grid, 16 for 16 heads, 32
// for 32), and on slices; Knobs.ScanColumns overrides it and nothing
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
		p := problem.Problem{B: 1, T: 32768, Hq: 1, Hv: c.hv, N: c.n, Dtype: dtype.BF16}
		if got := scanColumns(p, c.sms); got != c.want {
			t.Errorf("Hv %d N %d on %d SMs: %d columns, want %d", c.hv, c.n, c.sms, got, c.want)
		}
	}
	tp4 := problem.Problem{B: 1, T: 32768, Hq: 1, Hv: 16, N: 1, Dtype: dtype.BF16}
	pl, err := planHopper(tp4, chooseConsumers(tp4, 132))
	if err != nil {
		t.Fatal(err)
	}
	got, free, err := WithSplit(tp4, pl, 132, Knobs{})
	if err != nil || free.SegChunks == 0 || free.ScanColumns != 16 || got.ScanColumns != 16 {
		t.Fatalf("tp4_32k: plan %v, split %+v, %v; want a split with 16-column scan CTAs", got, free, err)
	}
	if !strings.Contains(got.String(), "scan-columns=16") {
		t.Errorf("plan %q does not name its scan width", got)
	}
	for _, cols := range []int{8, 32} {
		got, sp, err := WithSplit(tp4, pl, 132, Knobs{ScanColumns: cols})
		if err != nil {
			t.Fatal(err)
		}
		want := free
		want.ScanColumns = cols
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
	tp4 := problem.Problem{B: 1, T: 32768, Hq: 4, Hv: 16, N: 1, Dtype: dtype.BF16}
	tp2 := problem.Problem{B: 1, T: 32768, Hq: 8, Hv: 32, N: 1, Dtype: dtype.BF16}
	sp := planSplit(tp4, 132, 0, 0, 0)
	if !sp.Early || sp.SegChunks == 0 {
		t.Fatalf("tp4_32k: %+v, want an early plan", sp)
	}
	if segs := ceilDiv(512, sp.SegChunks); (segs-1)*tp4.Hv*(2/sp.Consumers) > 132 || sp.Transfer != segs-2 {
		t.Errorf("tp4_32k: %+v: %d segments, output pass of %d CTAs", sp, segs, (segs-1)*tp4.Hv*(2/sp.Consumers))
	}
	// The transfer pass runs on the SMs the early pass leaves: mFirst when
	// its grid is more than those.
	if want := transferCTAs(tp4, sp.Transfer, sp.XferConsumers) > 132-tp4.Hv*(2/sp.Consumers); sp.MFirst != want {
		t.Errorf("tp4_32k: mFirst %v, want %v", sp.MFirst, want)
	}
	if sp := planSplit(tp2, 132, 0, 0, 0); sp.Early || sp.SegChunks == 0 {
		t.Errorf("tp2_32k: %+v, want a plain split", sp)
	}
	if sp := planSplit(tp2, 132, 0, 0, 1); !sp.Early {
		t.Errorf("tp2_32k, early forced: %+v", sp)
	}
	if sp := planSplit(tp4, 132, 0, 0, -1); sp.Early || sp.SegChunks == 0 {
		t.Errorf("tp4_32k, early off: %+v, want a plain split", sp)
	}
	// One long sequence and short ones: the short ones are one segment.
	mix := problem.Problem{B: 1, T: 33000, Hq: 2, Hv: 8, N: 3, Seqs: []int{0, 32768, 32900, 33000}, Dtype: dtype.BF16}
	if sp := planSplit(mix, 132, 0, 0, 0); sp.Early {
		t.Errorf("long and short sequences: %+v, early", sp)
	}
	if sp := planSplit(mix, 132, 0, 0, 1); sp.Early || sp.SegChunks == 0 {
		t.Errorf("long and short sequences, early forced: %+v, want the plain split", sp)
	}
	// Forced segments: early where every sequence has two and one has three.
	if sp := planSplit(problem.Problem{B: 2, T: 300, Hq: 1, Hv: 2, N: 2, Dtype: dtype.BF16}, 132, 2, 0, 1); !sp.Early || sp.SegChunks != 2 || sp.Transfer != 2 {
		t.Errorf("2 x 5 chunks in segments of 2, early forced: %+v, want 2 transfer segments", sp)
	}
	if sp := planSplit(problem.Problem{B: 2, T: 200, Hq: 1, Hv: 2, N: 2, Dtype: dtype.BF16}, 132, 2, 0, 1); sp.Early {
		t.Errorf("2 x 4 chunks in segments of 2 (no transfer segment left), early forced: %+v", sp)
	}
}

// The early pass covers each sequence's first segment, and the other lists
// the rest exactly as a plain plan of the tokens after it would; a sequence
// no longer than one segment is an error (the planner never plans it).
func TestSegmentTablesEarly(t *testing.T) {
	p := problem.Problem{B: 1, T: 700, Hq: 1, Hv: 2, N: 3, Seqs: []int{0, 300, 429, 700}}
	out, tr, first, firsts, err := SegmentTables(p, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	wantFirsts := []int32{0, 64, 300, 364, 429, 493}
	if !slices.Equal(firsts, wantFirsts) {
		t.Fatalf("firsts %v, want %v", firsts, wantFirsts)
	}
	// Sequence 0: 64..300 -> transfer [64,128) [128,192) [192,256), last [256,300).
	wantTr := []int32{64, 128, 128, 192, 192, 256, 364, 428, 493, 557, 557, 621, 621, 685}
	if !slices.Equal(tr, wantTr) || !slices.Equal(first, []int32{0, 3, 4, 7}) {
		t.Fatalf("transfer %v first %v", tr, first)
	}
	if !slices.Equal(out[:6], []int32{256, 300, 428, 429, 685, 700}) || !slices.Equal(out[6:], tr) {
		t.Fatalf("output %v", out)
	}
	if _, _, _, _, err := SegmentTables(problem.Problem{B: 1, T: 64, Hq: 1, Hv: 1, N: 1}, 1, true); err == nil {
		t.Error("a one-segment sequence in an early plan: no error")
	}
}
