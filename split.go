package gdn

import (
	"fmt"
	"math"
	"slices"

	"github.com/gdnjit/gdn/kernsrc"
)

// Sequence parallelism: with few value heads a long sequence gives the GPU
// a handful of CTAs, each walking hundreds of chunks in order. A split plan
// cuts every sequence longer than SegmentChunks chunks into segments of that
// many chunks (the last one shorter) and runs three passes:
//
//  1. transfer (gdn_hopper.cu, HopperFlagTransfer): every segment but the
//     last of its sequence computes, in parallel, its end state from a zero
//     start B and its transfer matrix M (the same recurrence with v = 0 and
//     h0 = I), so that entering it with S leaves it with M S + B, exactly;
//  2. scan (gdn_scan.cu): each sequence walks its segments in order from its
//     h0, S <- M S + B in fp32, writing every segment's true start state;
//  3. output (gdn_hopper.cu on the segments as packed sequences): every
//     segment computes its o from its true start, and the last segment of
//     each sequence writes the sequence's ht.
//
// An early plan (splitPlan.early) runs every sequence's first segment, whose
// true start is h0, as an output pass of its own before the transfer pass
// and beside it: the few CTAs of that early pass take their SMs first and
// the transfer pass (a dependent launch) the rest. The early pass writes the
// first segment's o and its true end state, which the scan takes as its
// start; the first segment needs no B or M, and the output pass no longer
// covers it. Where the transfer pass runs in more than one wave this moves a
// segment's output walk off the chain of passes.
//
// The transfer pass costs about twice the work of the segments it covers (M
// is 128 x 128 whatever the tile), so splitting pays only when the unsplit
// grid leaves most SMs idle; splitPlanFor weighs both.

// splitPlan is the sequence-parallel part of a Plan.
type splitPlan struct {
	segChunks     int // chunks per segment; 0: not split
	transfer      int // P: segments of the transfer pass (all but the last of each sequence)
	consumers     int // the output pass's tile
	xferConsumers int // the transfer pass's tile (its states are 128 x 128 whatever the tile)
	// mFirst: the transfer pass's grid is more than one wave, so it starts
	// every segment's M CTA before any B CTA (kernsrc.HopperFlagMFirst).
	mFirst bool
	// scanColumns: the value columns of a scan CTA (scanColumns below).
	scanColumns int
	// early: every sequence's first segment runs its output pass before
	// and beside the transfer pass (see above); transfer then counts the
	// segments between each sequence's first and last.
	early bool
}

// Cost-model constants of the split plan, in microseconds, fitted by least
// squares (relative error) to 154 forced runs on the H200: seven few-head
// cases (tp8_32k, tp4_32k, tp8_8k, chain_equal, tp2_32k, tp2_16kx2, tp8_2k)
// x output tile 64/128 x transfer tile 64/128 x segments of 8-128 chunks or
// none; every run within 15% of the model (docs/PERF.md, v21, refitted
// after the scan's product moved to the tensor cores;
// device-run.sh's splitgrid step takes the runs, scripts/splitfit.py fits
// them, and TestSplitFitRecoversConstants keeps the script's model and this
// file's in step). They are: a chunk of the transfer pass (built without q,
// P and o) with a 64- and a 128-wide tile; a chunk of the output pass with
// each tile (a pass of at most a wave or two: cheaper than the full-GPU
// chunk times chooseConsumers uses, because fewer CTAs share DRAM); a chunk
// of an unsplit run whose grid is one wave (fitted with the rest, on the
// same cases run with segments -1); the fixed cost of each wave of CTAs
// beyond the first one (launch, pipeline fill, h0 in and states out, the
// wave's tail); one step of the scan (a 128 x 128 x 128 product in three
// TF32 tensor-core products, the next M loading meanwhile); and the fixed
// cost of the two extra launches.
const (
	transferChunkTime64  = 1.22
	transferChunkTime128 = 1.83
	outputChunkTime64    = 1.97
	outputChunkTime128   = 2.81
	oneWaveChunkTime64   = 2.24
	oneWaveChunkTime128  = 2.85
	waveTime             = 7.16
	scanStepTime         = 1.03
	splitLaunchTime      = 3.94
)

func transferChunkTime(consumers int) float64 {
	if consumers == 2 {
		return transferChunkTime128
	}
	return transferChunkTime64
}

func oneWaveChunkTime(consumers int) float64 {
	if consumers == 2 {
		return oneWaveChunkTime128
	}
	return oneWaveChunkTime64
}

func outputChunkTime(consumers int) float64 {
	if consumers == 2 {
		return outputChunkTime128
	}
	return outputChunkTime64
}

// segmentCandidates are the segment lengths (chunks) the planner weighs:
// at most 128, the longest the constants were fitted on (splitgrid: 8-128).
// Beyond it the model was wrong where it was checked: on tp2_32k it put
// segments of 256 (one transfer segment) 3% ahead of segments of 128 with
// both tiles 128, which measured 5% faster (0.859 against 0.816 ms, v21).
var segmentCandidates = []int{4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128}

// seqChunks calls f with each sequence's length in chunks.
func seqChunks(p Problem, f func(chunks int)) {
	if p.Seqs == nil {
		l := (p.T + ChunkLen - 1) / ChunkLen
		for n := 0; n < p.N; n++ {
			f(l)
		}
		return
	}
	for i := 0; i+1 < len(p.Seqs); i++ {
		f((p.Seqs[i+1] - p.Seqs[i] + ChunkLen - 1) / ChunkLen)
	}
}

func chunkTime(consumers int) float64 {
	if consumers == 2 {
		return chunkTime128
	}
	return chunkTime64
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// unsplitTime is the cost model of chooseConsumers, chunkTime x max(L,
// waves x W/N), with one difference: a grid of at most one wave runs its
// chunks at the light-load times (oneWaveChunkTime), as the split passes
// it is weighed against do.
func unsplitTime(p Problem, sms, consumers int) float64 {
	longest, total := chainChunks(p)
	if longest == 0 || p.N == 0 {
		return 0
	}
	waves := ceilDiv(p.N*p.Hv*(2/consumers), max(sms, 1))
	ct := chunkTime(consumers)
	if waves == 1 {
		ct = oneWaveChunkTime(consumers)
	}
	return ct * max(float64(longest), float64(waves)*float64(total)/float64(p.N))
}

// splitTime estimates a split plan with segments of ls chunks, the output
// pass in tiles of `consumers` and the transfer pass in tiles of
// xferConsumers: the transfer pass (2 x the tiles of every transfer
// segment, each ls chunks long, in w1 waves), the scan (its longest chain
// of segments), the output pass (every segment as a packed sequence, w3
// waves), and the fixed cost of the waves beyond the one an unsplit run
// pays. The two passes' tiles are independent (the transfer pass writes
// whole 128 x 128 states either way): a 128-wide transfer pass can run in
// one wave where the 64-wide one needs two. ok is false when no sequence is
// longer than ls, or when the segments would not fit the output pass's
// grid rows (grid.y, maxSeqs: one row per segment).
//
// With early, every sequence's first segment runs as an output pass of
// one wave beside the transfer pass, whose CTAs take the SMs left (the
// longer of the two counts), and the scan and the output pass skip it. It
// needs every sequence cut into at least two segments, at least one
// transfer segment in all and the early CTAs in fewer than sms.
func splitTime(p Problem, sms, consumers, xferConsumers, ls int, early bool) (t float64, transfer int, ok bool) {
	return splitTimeWalks(p, sms, consumers, xferConsumers, ls, early, 1)
}

// splitTimeWalks is splitTime with only mWalk of the transfer pass's M
// CTAs counted in its waves: the share that walks its whole segment, the
// others stopping early (gdn_hopper.cu's early exit, once M is zero).
// splitTime counts them all, as the constants were fitted.
func splitTimeWalks(p Problem, sms, consumers, xferConsumers, ls int, early bool, mWalk float64) (t float64, transfer int, ok bool) {
	tiles := 2 / consumers
	segs, longestSeg, maxChain, total, shortest := 0, 0, 0, 0, math.MaxInt
	seqChunks(p, func(l int) {
		k := max(1, ceilDiv(l, ls))
		segs += k
		maxChain = max(maxChain, k)
		longestSeg = max(longestSeg, min(l, ls))
		total += l
		shortest = min(shortest, k)
	})
	transfer = segs - p.N
	if transfer == 0 || segs > maxSeqs {
		return 0, 0, false
	}
	sms = max(sms, 1)
	ct := outputChunkTime(consumers)
	if !early {
		w1 := ceilDiv(walkingCTAs(p, transfer, xferConsumers, mWalk), sms)
		w3 := ceilDiv(segs*p.Hv*tiles, sms)
		t1 := transferChunkTime(xferConsumers) * float64(ls) * float64(w1)
		t3 := ct * max(float64(longestSeg), float64(w3)*float64(total)/float64(segs))
		return splitLaunchTime + t1 + scanStepTime*float64(maxChain) + t3 + waveTime*float64(w1+w3-1), transfer, true
	}
	earlyCTAs := p.N * p.Hv * tiles
	transfer -= p.N
	if shortest < 2 || transfer == 0 || earlyCTAs >= sms {
		return 0, 0, false
	}
	w1 := ceilDiv(walkingCTAs(p, transfer, xferConsumers, mWalk), sms-earlyCTAs)
	w3 := ceilDiv((segs-p.N)*p.Hv*tiles, sms)
	t1 := max(ct*float64(ls), transferChunkTime(xferConsumers)*float64(ls)*float64(w1))
	t3 := ct * max(float64(longestSeg), float64(w3)*float64(total-p.N*ls)/float64(segs-p.N))
	return earlyLaunchTime + t1 + scanStepTime*float64(maxChain-1) + t3 + waveTime*float64(w1+w3-1), transfer, true
}

// walkingCTAs is transferCTAs with only mWalk of the M CTAs counted.
func walkingCTAs(p Problem, transfer, xferConsumers int, mWalk float64) int {
	half := transferCTAs(p, transfer, xferConsumers) / 2
	return half + int(math.Ceil(float64(half)*mWalk))
}

// earlyWalkingShare is the share of M CTAs taken to walk their whole
// segment when an early plan is weighed against the plain one
// (planSplit): the share of heads without decay in the benchmark's inputs
// (docs/BENCH.md: a quarter of the heads have g = 0); a decaying head's M
// is exactly zero after about 36 chunks and its CTA leaves. Counting every
// M CTA, as the fitted model does, the early plan of tp2_32k (segments of
// 103 chunks, the transfer pass on 100 SMs) looked 19% faster than the
// plain one (128 chunks); measured, it was 5% slower: the plain plan's
// transfer pass runs in one wave once the decaying heads' M CTAs leave,
// the early one's in two (docs/PERF.md, v34).
const earlyWalkingShare = 0.25

// earlyLaunchTime is splitLaunchTime with the early pass's launch: not
// fitted (no early run was in splitgrid's set), splitLaunchTime's share of
// one of its two launches added.
const earlyLaunchTime = splitLaunchTime * 1.5

// earlyShortest is the shortest segment earlyLengths adds: splitgrid's
// shortest (docs/PERF.md v18).
const earlyShortest = 8

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
func planSplit(p Problem, sms, force, consumers, early int) splitPlan {
	// QKNorm and Fused have no transfer pass (the full forward takes them
	// only where its core's plan does not split: coreTakesNorm,
	// coreTakesFused).
	if force < 0 || p.N == 0 || p.QKNorm || p.Fused {
		return splitPlan{}
	}
	tilesFor := []int{1, 2}
	if consumers > 0 {
		tilesFor = []int{consumers}
	}
	best := splitPlan{}
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
						best, bestTime = splitPlan{segChunks: l, transfer: transfer, consumers: nc, xferConsumers: xc, early: e}, t
					}
				}
			}
		}
	}
	switch {
	case early > 0:
		// Early wherever it applies: the plain split only where it does not.
		if search(true); best.segChunks == 0 {
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
		if search(true); best.early && plain.segChunks > 0 {
			walks := func(sp splitPlan) float64 {
				t, _, _ := splitTimeWalks(p, sms, sp.consumers, sp.xferConsumers, sp.segChunks, sp.early, earlyWalkingShare)
				return t
			}
			if walks(plain) <= walks(best) {
				best, bestTime = plain, plainTime
			}
		}
	}
	if best.segChunks > 0 {
		sm := sms
		if best.early {
			sm -= p.N * p.Hv * (2 / best.consumers)
		}
		best.mFirst = transferCTAs(p, best.transfer, best.xferConsumers) > sm
		best.scanColumns = scanColumns(p, sms)
	}
	return best
}

// earlyLengths are the segment lengths an early plan weighs: those of
// segmentCandidates, and for each count k from 2 to 32 the length
// ceil(longest / k), which cuts the longest sequence into at most k
// segments (exactly k where it divides evenly enough, as 512 chunks into 9
// of 57), within the lengths the constants were fitted on (earlyShortest
// to 128).
func earlyLengths(p Problem) []int {
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
func scanColumns(p Problem, sms int) int {
	best, bestCost := 0, math.Inf(1)
	for _, c := range kernsrc.ScanColumnChoices() {
		waves := ceilDiv(HeadDim/c*p.Hv*max(p.N, 1), max(sms, 1))
		if cost := float64(waves) * scanStepCost(c); cost < bestCost {
			best, bestCost = c, cost
		}
	}
	return best
}

// transferCTAs is the transfer pass's grid: a B and an M CTA for each of
// the transfer segments, value heads and tiles (xferConsumers 64-wide
// consumer groups a tile).
func transferCTAs(p Problem, transfer, xferConsumers int) int {
	return 2 * transfer * p.Hv * (2 / xferConsumers)
}

// segmentTables lays out the segments of a split plan for the device:
//
//   - output pairs, (N + P) x (begin, end) int32 tokens: first the last
//     segment of each sequence (grid row n < N writes ht[n]), then the
//     transfer segments in sequence and token order;
//   - transfer pairs, P x (begin, end): the same transfer segments;
//   - first, N + 1 int32: sequence n's transfer segments are first[n] ..
//     first[n+1] - 1;
//   - with early, firsts, N x (begin, end): each sequence's first segment,
//     which is then in neither of the other lists (the early pass's rows;
//     every sequence must be longer than one segment).
//
// Tokens are flat indices into the B*T tokens (a batch without cu_seqlens
// is N packed sequences of T tokens).
func segmentTables(p Problem, segChunks int, early bool) (output, transfer, first, firsts []int32, err error) {
	if tok := p.Tokens(); tok > math.MaxInt32 {
		return nil, nil, nil, nil, fmt.Errorf("gdn: %d tokens: a split plan indexes tokens in 32 bits", tok)
	}
	seg := segChunks * ChunkLen
	var last []int32
	first = make([]int32, 0, p.N+1)
	for n := 0; n < p.N; n++ {
		b, e := p.seqBounds(n)
		if early {
			if e-b <= seg {
				return nil, nil, nil, nil, fmt.Errorf("gdn: an early split plan with sequence %d of %d tokens in segments of %d", n, e-b, seg)
			}
			firsts = append(firsts, int32(b), int32(b+seg))
			b += seg
		}
		first = append(first, int32(len(transfer)/2))
		for ; e-b > seg; b += seg {
			transfer = append(transfer, int32(b), int32(b+seg))
		}
		last = append(last, int32(b), int32(e))
	}
	first = append(first, int32(len(transfer)/2))
	return append(last, transfer...), transfer, first, firsts, nil
}
