//go:build cuda

package gdn_test

import (
	"cmp"
	"fmt"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/kernsrc"
	"github.com/gdnjit/gdn/ref"
)

// splitCase is one problem of the split-plan tests.
type splitCase struct {
	name  string
	shape ref.Shape
	opts  ref.RecipeOptions
}

func splitCases() []splitCase {
	one := 1.0
	return []splitCase{
		{"B2_T300", ref.Shape{B: 2, T: 300, Hq: 1, Hv: 2}, ref.RecipeOptions{WithH0: true}},
		{"G2_T1000_noH0", ref.Shape{B: 1, T: 1000, Hq: 2, Hv: 4}, ref.RecipeOptions{}},
		{"varlen_empty_and_1", ref.Shape{B: 1, T: 700, Hq: 1, Hv: 2, CuSeqlens: []int{0, 0, 1, 200, 201, 600, 600, 700}},
			ref.RecipeOptions{WithH0: true}},
		{"strong_decay", ref.Shape{B: 1, T: 520, Hq: 1, Hv: 2}, ref.RecipeOptions{WithH0: true, StrongDecay: true}},
		{"beta1_fp16", ref.Shape{B: 1, T: 449, Hq: 1, Hv: 4}, ref.RecipeOptions{WithH0: true, BetaValue: &one, Dtype: gdn.FP16}},
		{"G3_T2048", ref.Shape{B: 1, T: 2048, Hq: 2, Hv: 6}, ref.RecipeOptions{WithH0: true}},
	}
}

// splitCaseArgs draws one case's recipe inputs (seed) and returns them as
// ForwardHost's arguments (g_cumsum and A from ref, ht asked for).
func splitCaseArgs(t *testing.T, c splitCase, seed uint64) (*gdn.HostCoreArgs, ref.Inputs) {
	t.Helper()
	s := c.shape
	in, err := ref.Recipe(s, seed, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	gcum, _ := ref.ChunkCumsum(s, in.G)
	A, _ := ref.SolveA(s, in.K, in.Beta, gcum)
	return &gdn.HostCoreArgs{B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: recipeDtype(c.opts),
		Q: f32(in.Q), K: f32(in.K), V: f32(in.V), G: f32(gcum), Beta: f32(in.Beta), A: f32(A),
		H0: f32(in.H0), FinalState: true}, in
}

// splitCasePlan is the plan r runs case c with (Runtime.PlanOf on its
// inputs, uploaded for the question and freed).
func splitCasePlan(t *testing.T, r *gdn.Runtime, c splitCase) gdn.Plan {
	t.Helper()
	h, _ := splitCaseArgs(t, c, 0)
	up, err := r.UploadCore(h)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Free()
	pl, err := r.PlanOf(up.Args)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// runSplitCase runs one case through ForwardHost (outputs poisoned first)
// and holds o and ht to the float64 recurrence; it returns the errors.
func runSplitCase(t *testing.T, r *gdn.Runtime, c splitCase, seed uint64) (o, ht ref.Errors) {
	t.Helper()
	_, o, ht = runSplitCaseResult(t, r, c, seed)
	return o, ht
}

// runSplitCaseResult is runSplitCase that also returns the outputs.
func runSplitCaseResult(t *testing.T, r *gdn.Runtime, c splitCase, seed uint64) (res *gdn.HostCoreResult, o, ht ref.Errors) {
	t.Helper()
	h, in := splitCaseArgs(t, c, seed)
	res, err := r.ForwardHost(h)
	if err != nil {
		t.Fatal(err)
	}
	wantO, wantHt, err := ref.Recurrent(in)
	if err != nil {
		t.Fatal(err)
	}
	o, ht = ref.Compare32(res.O, wantO), ref.Compare32(res.Ht, wantHt)
	if err := o.Within(ref.PassO); err != nil {
		t.Errorf("o: %v", err)
	}
	if err := ht.Within(ref.PassHt); err != nil {
		t.Errorf("ht: %v", err)
	}
	return res, o, ht
}

// Split plans forced with tiny segments (1, 2 and 3 chunks) so that short
// inputs cross many segment boundaries, on both tiles, against the float64
// recurrence: packed sequences with empty and one-token ones, no decay on a
// quarter of the heads (the recipe), strong decay, beta = 1, h0 on and off.
func TestSplitMatchesReference(t *testing.T) {
	for _, variant := range []string{"gdn_hopper_%s_bv64", "gdn_hopper_%s_bv128"} {
		for _, seg := range []int{1, 2, 3} {
			for _, c := range splitCases() {
				v := fmt.Sprintf(variant, recipeDtype(c.opts))
				t.Run(fmt.Sprintf("%s/seg%d/%s", v, seg, c.name), func(t *testing.T) {
					r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{Variant: v, SegmentChunks: seg}))
					o, ht := runSplitCase(t, r, c, uint64(seg*1000+len(c.name)))
					t.Logf("split o %v ht %v", o, ht)
				})
			}
		}
	}
}

// Early plans forced (the EarlyFirstSegment knob: each sequence's first
// segment runs its output pass beside the transfer pass, and the scan
// starts from that segment's end state) with tiny segments on both tiles
// and on the planner's (which may pair a 64-wide output pass with a
// 128-wide transfer pass), against the float64 recurrence; and forced off
// on the same inputs. Every case with a sequence cut in three or more
// segments and none in one runs early (the varlen case with empty and
// one-token sequences cannot; varlen_2_and_5 has a sequence of exactly two
// segments, whose scan has no step, beside one of five).
func TestSplitEarlyMatchesReference(t *testing.T) {
	early := 0
	cases := append(splitCases(), splitCase{"varlen_2_and_5", ref.Shape{B: 1, T: 420, Hq: 1, Hv: 2, CuSeqlens: []int{0, 100, 420}},
		ref.RecipeOptions{WithH0: true}})
	for _, variant := range []string{"gdn_hopper_%s_bv64", "gdn_hopper_%s_bv128", ""} {
		for _, seg := range []int{1, 2, 3} {
			for _, c := range cases {
				for _, mode := range []int{1, -1} {
					if variant == "" && mode < 0 {
						continue // the planner's tiles without early: TestSplitTransferTileApart
					}
					v := variant
					if v != "" {
						v = fmt.Sprintf(variant, recipeDtype(c.opts))
					}
					t.Run(fmt.Sprintf("%s/seg%d/early%d/%s", cmp.Or(v, "planner"), seg, mode, c.name), func(t *testing.T) {
						r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{Variant: v, SegmentChunks: seg, EarlyFirstSegment: mode}))
						pl := splitCasePlan(t, r, c)
						if pl.EarlyFirstSegment {
							early++
						}
						if mode < 0 && pl.EarlyFirstSegment {
							t.Fatalf("plan %v: early forced off", pl)
						}
						o, ht := runSplitCase(t, r, c, uint64(seg*5000+len(c.name)))
						t.Logf("split early o %v ht %v plan %v", o, ht, pl)
					})
				}
			}
		}
	}
	if early == 0 {
		t.Error("no run took an early plan")
	}
}

// The planner's own tiles with forced small segments: on some of these
// shapes it runs the transfer pass 128 wide and the output pass 64 wide
// (its states are whole 128 x 128 matrices either way), a pairing no forced
// variant produces. On the whole H200 at least one run must take it, and
// every run must match the float64 recurrence. Then both pairings forced,
// whatever the planner prefers (the Variant knob for the output pass,
// the TransferTile knob for the transfer pass).
func TestSplitTransferTileApart(t *testing.T) {
	apart, sms := 0, 0
	for _, seg := range []int{1, 2, 3} {
		for _, c := range splitCases() {
			t.Run(fmt.Sprintf("seg%d/%s", seg, c.name), func(t *testing.T) {
				r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: seg}))
				sms = r.Device().SMs
				pl := splitCasePlan(t, r, c)
				if pl.TransferTileWidth > 0 {
					apart++
				}
				o, ht := runSplitCase(t, r, c, uint64(seg*2000+len(c.name)))
				t.Logf("split o %v ht %v plan %v", o, ht, pl)
			})
		}
	}
	// On a whole H200 (132 SMs) the planner pairs the tiles on G2_T1000
	// (seg 1) and G3_T2048 (seg 3); other SM counts may never pair them.
	if apart == 0 && sms >= 128 {
		t.Errorf("no plan ran the transfer pass with a tile of its own on %d SMs", sms)
	} else if apart == 0 {
		t.Logf("no plan paired the tiles on %d SMs: the pairing went untested", sms)
	}
	for _, pair := range []struct {
		output string
		xfer   int
	}{{"gdn_hopper_%s_bv64", 128}, {"gdn_hopper_%s_bv128", 64}} {
		for _, c := range splitCases() {
			v := fmt.Sprintf(pair.output, recipeDtype(c.opts))
			t.Run(fmt.Sprintf("%s/xfer%d/%s", v, pair.xfer, c.name), func(t *testing.T) {
				r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{Variant: v, SegmentChunks: 2, TransferTile: pair.xfer}))
				o, ht := runSplitCase(t, r, c, uint64(3000+pair.xfer+len(c.name)))
				t.Logf("split o %v ht %v", o, ht)
			})
		}
	}
}

// The scan at each CTA width (the ScanColumns knob 8, 16, 32; the planner
// picks the width by its grid's waves, so that on one GPU some widths run
// only for other shapes): every split case, forced into segments of two
// chunks, against the float64 recurrence, and o and ht the same to the bit
// at every width (each state element's products and sums do not depend on
// the width).
func TestSplitScanColumns(t *testing.T) {
	for _, c := range splitCases() {
		t.Run(c.name, func(t *testing.T) {
			var firstO, firstHt []float32
			for _, cols := range []int{8, 16, 32} {
				r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 2, ScanColumns: cols}))
				res, o, ht := runSplitCaseResult(t, r, c, uint64(4000+len(c.name)))
				t.Logf("split scan-columns %d o %v ht %v", cols, o, ht)
				if firstO == nil {
					firstO, firstHt = res.O, res.Ht
					continue
				}
				sameBits(t, fmt.Sprintf("o at %d columns", cols), res.O, firstO)
				sameBits(t, fmt.Sprintf("ht at %d columns", cols), res.Ht, firstHt)
			}
		})
	}
}

// Segments long enough for the transfer pass's early exit (a transfer
// matrix whose state is exactly zero stops; checked every four chunks, so
// segments of 5 chunks or more): strong decay zeroes it within a segment,
// the recipe's decaying heads within about 30 chunks, its g = 0 heads
// never. Both transfer tiles (one aux group, BV 128; two, BV 64), exits at
// different chunks of a segment, against the float64 recurrence.
func TestSplitTransferEarlyExit(t *testing.T) {
	cases := []splitCase{
		{"strong_decay", ref.Shape{B: 1, T: 1500, Hq: 1, Hv: 2}, ref.RecipeOptions{WithH0: true, StrongDecay: true}},
		{"recipe_G2", ref.Shape{B: 1, T: 9000, Hq: 2, Hv: 4}, ref.RecipeOptions{WithH0: true}},
		{"strong_varlen", ref.Shape{B: 1, T: 2100, Hq: 1, Hv: 2, CuSeqlens: []int{0, 1, 700, 700, 2100}},
			ref.RecipeOptions{StrongDecay: true}},
	}
	for _, xfer := range []int{64, 128} {
		for _, seg := range []int{5, 8, 13, 40} {
			for _, c := range cases {
				t.Run(fmt.Sprintf("xfer%d/seg%d/%s", xfer, seg, c.name), func(t *testing.T) {
					r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: seg, TransferTile: xfer}))
					o, ht := runSplitCase(t, r, c, uint64(5000+xfer+seg))
					t.Logf("split early exit o %v ht %v", o, ht)
				})
			}
		}
	}
}

// The early exit leaves the values of walking to the end: the same calls on
// runtimes whose kernels are built without it (the test build
// kernsrc.HopperHooks.WalkToEnd) give equal o and ht (== on
// every value: only a zero's sign may differ), on inputs whose decaying
// heads' transfer matrices reach zero inside their segments.
func TestSplitTransferExitEqualsWalk(t *testing.T) {
	cases := []splitCase{
		{"strong_decay", ref.Shape{B: 1, T: 1500, Hq: 1, Hv: 2}, ref.RecipeOptions{WithH0: true, StrongDecay: true}},
		{"recipe_G2", ref.Shape{B: 1, T: 9000, Hq: 2, Hv: 4}, ref.RecipeOptions{WithH0: true}},
	}
	type key struct {
		xfer, seg int
		name      string
	}
	got := map[key][2]*gdn.HostCoreResult{}
	for walk := range 2 {
		for _, xfer := range []int{64, 128} {
			for _, seg := range []int{8, 40} {
				r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: seg, TransferTile: xfer}))
				if walk == 1 {
					gdn.UseTestBuild(r, kernsrc.HopperHooks{WalkToEnd: true})
				}
				for _, c := range cases {
					h, _ := splitCaseArgs(t, c, 77)
					res, err := r.ForwardHost(h)
					if err != nil {
						t.Fatal(err)
					}
					k := key{xfer, seg, c.name}
					pair := got[k]
					pair[walk] = res
					got[k] = pair
				}
			}
		}
	}
	for k, pair := range got {
		exit, walk := pair[0], pair[1]
		for name, a := range map[string][2][]float32{"o": {exit.O, walk.O}, "ht": {exit.Ht, walk.Ht}} {
			for i := range a[0] {
				if a[0][i] != a[1][i] {
					t.Errorf("xfer %d, segments of %d, %s: %s[%d] = %v with the exit, %v walking on", k.xfer, k.seg, k.name, name, i, a[0][i], a[1][i])
					break
				}
			}
		}
	}
}

// One long sequence with g = 0 on one head (the transfer matrices carry all
// history) and decay on the other, 64k tokens, planned by the planner
// itself (few heads: it splits), and forced to long segments.
func TestSplitLongSequence(t *testing.T) {
	for _, seg := range []int{0, 96} {
		t.Run(fmt.Sprintf("seg%d", seg), func(t *testing.T) {
			r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: seg}))
			s := ref.Shape{B: 1, T: 65536, Hq: 1, Hv: 2}
			c := splitCase{"64k", s, ref.RecipeOptions{WithH0: true}}
			pl := splitCasePlan(t, r, c)
			if pl.SegmentChunks == 0 {
				t.Fatalf("plan %v: a 64k-token sequence on 2 heads should split", pl)
			}
			o, ht := runSplitCase(t, r, c, 64)
			t.Logf("split64k plan %v o %v ht %v", pl, o, ht)
		})
	}
}

// Repeated split calls on one stream go through the graph cache (three
// launches in one graph); each replay must give the right answer.
func TestSplitGraphReplay(t *testing.T) {
	r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 2}))
	d := newDeviceCase(t, r, ref.Shape{B: 1, T: 1333, Hq: 2, Hv: 4}, 9)
	defer d.free()
	stream, err := tuning.Context(r).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Destroy()
	repeatOnStream(t, r, d, stream, 4)
}

// The same with an early plan (four launches, the transfer pass a
// dependent launch of the early pass): replayed from the call cache's
// graph, and captured into the caller's own graph (four kernel nodes a
// call) and launched from there.
func TestSplitEarlyGraphReplay(t *testing.T) {
	r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 2, EarlyFirstSegment: 1}))
	d := newDeviceCase(t, r, ref.Shape{B: 1, T: 1333, Hq: 2, Hv: 4}, 9)
	defer d.free()
	if pl, err := r.PlanOf(d.args); err != nil || !pl.EarlyFirstSegment {
		t.Fatalf("plan %v (%v), want an early split", pl, err)
	}
	stream, err := tuning.Context(r).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Destroy()
	repeatOnStream(t, r, d, stream, 4)
	captureAndReplay(t, r, d, stream, 2, 4) // early, transfer, scan, output per call
}

// The scan starts from the early pass's end states only once that pass has
// completed. In a test build (kernsrc.HopperHooks.DelayEarlyPass) the early
// pass's CTAs spin about a millisecond first, so the transfer pass (which
// does not wait for the early pass at its start) ends long before the
// early pass: the outputs must still match the float64 recurrence, call after call with new
// inputs (head 0 has g = 0: a stale start state would show). (A build
// without the transfer pass's wait for the early pass gave the same bits on
// the H200, driver 580: the scan's own wait covered the early pass too.
// The wait stays: the PTX ISA promises only the prerequisite grid's
// completion. docs/PERF.md, v34.)
func TestSplitEarlyWaitsForEarlyPass(t *testing.T) {
	c := splitCase{"G2_T2048", ref.Shape{B: 1, T: 2048, Hq: 1, Hv: 2}, ref.RecipeOptions{WithH0: true}}
	r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 4, EarlyFirstSegment: 1}))
	gdn.UseTestBuild(r, kernsrc.HopperHooks{DelayEarlyPass: true})
	if pl := splitCasePlan(t, r, c); !pl.EarlyFirstSegment {
		t.Fatalf("plan %v, want an early split", pl)
	}
	for seed := uint64(1); seed <= 3; seed++ {
		_, o, ht := runSplitCaseResult(t, r, c, seed) // against the reference's pass lines
		t.Logf("split early delayed seed %d o %v ht %v", seed, o, ht)
	}
}

func splitRuntime(t *testing.T, o gdn.Options) *gdn.Runtime {
	t.Helper()
	r, err := gdn.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// A split call first seen inside the caller's own stream capture: its
// scratch is allocated and its tables uploaded while the caller captures
// (relaxed capture mode, a private stream), and the caller's graph gets the
// three launches and replays correctly.
func TestSplitInsideCallerGraph(t *testing.T) {
	r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 2}))
	d := newDeviceCase(t, r, ref.Shape{B: 1, T: 777, Hq: 2, Hv: 4}, 12)
	defer d.free()
	stream, err := tuning.Context(r).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Destroy()
	captureAndReplay(t, r, d, stream, 2, 3) // transfer, scan, output per call
}
