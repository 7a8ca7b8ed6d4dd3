package plan

import (
	"math"
	"slices"

	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/kernsrc"
)

// WithSplit decides on a split plan for p given its unsplit plan pl (whose
// tile it keeps when the variant is forced) and returns the plan to run,
// with the split's details (zero when not split). k.SegmentChunks forces or
// forbids a split (planSplit's force); k.TransferTile > 0 (64 or 128) fixes
// the transfer pass's tile of a split plan, and k.ScanColumns > 0 (8, 16 or
// 32) its scan's CTA width: the planner still decides whether to split, and
// how, as it would have. k.EarlyFirstSegment is planSplit's early.
func WithSplit(p problem.Problem, pl Plan, sms int, k Knobs) (Plan, Split, error) {
	consumers := 0
	if k.Variant != "" {
		consumers = pl.TileWidth / 64
	}
	sp := planSplit(p, sms, k.SegmentChunks, consumers, k.EarlyFirstSegment)
	if sp.SegChunks == 0 {
		return pl, sp, nil
	}
	if k.TransferTile > 0 {
		sp.XferConsumers = k.TransferTile / 64
	}
	if k.ScanColumns > 0 {
		sp.ScanColumns = k.ScanColumns
	}
	split, err := planHopper(p, sp.Consumers)
	split.SegmentChunks, split.Segments, split.ScanColumns, split.EarlyFirstSegment = sp.SegChunks, sp.Transfer, sp.ScanColumns, sp.Early
	if sp.XferConsumers != sp.Consumers {
		split.TransferTileWidth = kernsrc.HopperTileWidth(sp.XferConsumers)
	}
	return split, sp, err
}

// planSplit decides whether and how to split p's sequences on sms
// multiprocessors. force > 0 cuts at that many chunks whenever a sequence
// is longer (tests, benchmarks), unless that makes more segments than the
// output pass's grid holds (then it does not split); force < 0 never
// splits. consumers > 0 fixes the tile of both passes (a forced variant:
// its transfer pass is that tile's too).
//
// early > 0 takes the best early plan (splitTime) where one applies and
// beats the unsplit estimate, else what early < 0 would; early < 0 weighs
// plain plans only (a call whose only winning split is early then runs
// unsplit); 0 lets the model choose between them. An early plan also
// weighs the segment lengths that cut the longest sequence into a given
// count of segments (earlyLengths), so that its output pass can fill a
// wave exactly.
func planSplit(p problem.Problem, sms, force, consumers, early int) Split {
	// QKNorm and Fused have no transfer pass (the full forward takes them
	// only where its core's plan does not split: coreTakesNorm,
	// coreTakesFused).
	if force < 0 || p.N == 0 || p.QKNorm || p.Fused {
		return Split{}
	}
	tilesFor := []int{1, 2}
	if consumers > 0 {
		tilesFor = []int{consumers}
	}
	best := Split{}
	bestTime := math.Inf(1)
	if force == 0 {
		for _, nc := range tilesFor {
			bestTime = min(bestTime, unsplitTime(p, sms, nc))
		}
	}
	lengths := segmentCandidates
	if force > 0 {
		lengths = []int{force}
	}
	search := func(e bool) {
		ls := lengths
		if e && force == 0 {
			ls = earlyLengths(p)
		}
		for _, nc := range tilesFor {
			for _, xc := range tilesFor {
				for _, l := range ls {
					if t, transfer, ok := splitTime(p, sms, nc, xc, l, e); ok && t < bestTime {
						best, bestTime = Split{SegChunks: l, Transfer: transfer, Consumers: nc, XferConsumers: xc, Early: e}, t
					}
				}
			}
		}
	}
	switch {
	case early > 0:
		// Early wherever it applies: the plain split only where it does not.
		if search(true); best.SegChunks == 0 {
			search(false)
		}
	case early < 0:
		search(false)
	default:
		// The best plain and the best early plan by the fitted model; of
		// the two, the one faster with only earlyWalkingShare of the M
		// CTAs walking whole segments.
		search(false)
		plain, plainTime := best, bestTime
		if search(true); best.Early && plain.SegChunks > 0 {
			walks := func(sp Split) float64 {
				t, _, _ := splitTimeWalks(p, sms, sp.Consumers, sp.XferConsumers, sp.SegChunks, sp.Early, earlyWalkingShare)
				return t
			}
			if walks(plain) <= walks(best) {
				best, bestTime = plain, plainTime
			}
		}
	}
	if best.SegChunks > 0 {
		sm := sms
		if best.Early {
			sm -= p.N * p.Hv * (2 / best.Consumers)
		}
		best.MFirst = transferCTAs(p, best.Transfer, best.XferConsumers) > sm
		best.ScanColumns = scanColumns(p, sms)
	}
	return best
}

// earlyLengths are the segment lengths an early plan weighs: those of
// segmentCandidates, and for each count k from 2 to 32 the length
// ceil(longest / k), which cuts the longest sequence into at most k
// segments (exactly k where it divides evenly enough, as 512 chunks into 9
// of 57), within the lengths the constants were fitted on (earlyShortest
// to 128).
func earlyLengths(p problem.Problem) []int {
	longest := 0
	seqChunks(p, func(l int) { longest = max(longest, l) })
	ls := slices.Clone(segmentCandidates)
	for k := 2; k <= 32; k++ {
		if l := ceilDiv(longest, k); l >= earlyShortest && l <= segmentCandidates[len(segmentCandidates)-1] && !slices.Contains(ls, l) {
			ls = append(ls, l)
		}
	}
	return ls
}
