package plan

import (
	"math"

	"github.com/gdnjit/gdn/internal/problem"
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
// An early plan (Split.Early) runs every sequence's first segment, whose
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
// grid leaves most SMs idle; WithSplit weighs both.

// Split is the sequence-parallel part of a Plan.
type Split struct {
	SegChunks     int // chunks per segment; 0: not split
	Transfer      int // P: segments of the transfer pass (all but the last of each sequence)
	Consumers     int // the output pass's tile
	XferConsumers int // the transfer pass's tile (its states are 128 x 128 whatever the tile)
	// MFirst: the transfer pass's grid is more than one wave, so it starts
	// every segment's M CTA before any B CTA (kernsrc.HopperFlagMFirst).
	MFirst bool
	// ScanColumns: the value columns of a scan CTA (scanColumns).
	ScanColumns int
	// Early: every sequence's first segment runs its output pass before
	// and beside the transfer pass (see above); Transfer then counts the
	// segments between each sequence's first and last.
	Early bool
}

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

// unsplitTime is the cost model of chooseConsumers, chunkTime x max(L,
// waves x W/N), with one difference: a grid of at most one wave runs its
// chunks at the light-load times (oneWaveChunkTime), as the split passes
// it is weighed against do.
func unsplitTime(p problem.Problem, sms, consumers int) float64 {
	longest, total := ChainChunks(p)
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
// grid rows (grid.y, problem.MaxSeqs: one row per segment).
//
// With early, every sequence's first segment runs as an output pass of
// one wave beside the transfer pass, whose CTAs take the SMs left (the
// longer of the two counts), and the scan and the output pass skip it. It
// needs every sequence cut into at least two segments, at least one
// transfer segment in all and the early CTAs in fewer than sms.
func splitTime(p problem.Problem, sms, consumers, xferConsumers, ls int, early bool) (t float64, transfer int, ok bool) {
	return splitTimeWalks(p, sms, consumers, xferConsumers, ls, early, 1)
}

// splitTimeWalks is splitTime with only mWalk of the transfer pass's M
// CTAs counted in its waves: the share that walks its whole segment, the
// others stopping early (gdn_hopper.cu's early exit, once M is zero).
// splitTime counts them all, as the constants were fitted.
func splitTimeWalks(p problem.Problem, sms, consumers, xferConsumers, ls int, early bool, mWalk float64) (t float64, transfer int, ok bool) {
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
	if transfer == 0 || segs > problem.MaxSeqs {
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
func walkingCTAs(p problem.Problem, transfer, xferConsumers int, mWalk float64) int {
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

// transferCTAs is the transfer pass's grid: a B and an M CTA for each of
// the transfer segments, value heads and tiles (xferConsumers 64-wide
// consumer groups a tile).
func transferCTAs(p problem.Problem, transfer, xferConsumers int) int {
	return 2 * transfer * p.Hv * (2 / xferConsumers)
}
