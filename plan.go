package gdn

import (
	"fmt"
	"math"

	"github.com/gdnjit/gdn/kernsrc"
)

// Plan is how one problem runs: which kernel variant, its launch geometry.
// It is a value, computed from the problem and the device alone.
type Plan struct {
	Variant     kernsrc.Variant
	TileWidth   int // value columns per CTA (BV)
	Grid        [3]uint32
	Block       [3]uint32
	SharedBytes int

	// SegmentChunks > 0 makes the plan sequence-parallel (split.go):
	// sequences longer than that many chunks run as segments of it, with
	// Segments of them in the transfer pass. Grid is then the unsplit one.
	SegmentChunks int
	Segments      int
	// TransferTileWidth is the transfer pass's tile when it differs from
	// TileWidth (0 otherwise).
	TransferTileWidth int
	// ScanColumns is the value columns of one CTA of a split plan's scan
	// (one of kernsrc.ScanColumnChoices; 0 when not split).
	ScanColumns int
	// EarlyFirstSegment: every sequence's first segment runs its output
	// pass beside the transfer pass, which then covers Segments segments
	// between each sequence's first and last (split.go).
	EarlyFirstSegment bool
}

func (pl Plan) String() string {
	s := fmt.Sprintf("%s grid=%v block=%v smem=%d", pl.Variant.Name, pl.Grid, pl.Block, pl.SharedBytes)
	if pl.SegmentChunks > 0 {
		s += fmt.Sprintf(" split=%dx%d", pl.Segments, pl.SegmentChunks)
		if pl.TransferTileWidth > 0 {
			s += fmt.Sprintf(" transfer-tile=%d", pl.TransferTileWidth)
		}
		s += fmt.Sprintf(" scan-columns=%d", pl.ScanColumns)
		if pl.EarlyFirstSegment {
			s += " early-first"
		}
	}
	return s
}

// PlanCore chooses the kernel variant and launch geometry of a core forward
// on a device with sms multiprocessors (a MIG slice has few). p comes from
// ValidateCore.
//
// The kernel (gdn_hopper.cu) runs one CTA (it takes most of the shared
// memory, so one per multiprocessor) per (sequence, value head, value tile)
// along the sequence's chunks. The tile is 64 or 128 value columns, picked
// by the cost model of chooseConsumers.
func PlanCore(p Problem, sms int) (Plan, error) {
	return PlanCoreSplit(p, sms, 0)
}

// PlanCoreSplit is PlanCore with Options.SegmentChunks: 0 lets the planner
// decide whether to split long sequences across SMs (split.go), > 0 splits
// every sequence longer than that many chunks, < 0 never splits.
func PlanCoreSplit(p Problem, sms, segmentChunks int) (Plan, error) {
	return PlanFor(p, sms, "", segmentChunks)
}

// PlanFor returns the plan a Runtime opened with Options{Variant: variant,
// SegmentChunks: segmentChunks} on sms multiprocessors runs p with: the
// forced variant's tile or the planner's, then the split decision (with a
// forced variant, splits keep its tile). Runtime.PlanOf answers the same for
// prepared arguments.
func PlanFor(p Problem, sms int, variant string, segmentChunks int) (Plan, error) {
	var pl Plan
	var err error
	if variant != "" {
		pl, err = PlanCoreVariant(p, variant)
	} else {
		nc := chooseConsumers(p, sms)
		if p.QKNorm || p.Fused {
			nc = 2 // its only tile (the full forward's normInCore checks the copies' plan has it)
		}
		pl, err = planHopper(p, nc)
	}
	if err != nil {
		return Plan{}, err
	}
	pl, _, err = withSplit(p, pl, sms, segmentChunks, 0, 0, 0, variant != "")
	return pl, err
}

// withSplit decides on a split plan for p given its unsplit plan pl (whose
// tile it keeps when forced) and returns the plan to run, with the split's
// details (zero when not split). transferTile > 0 (Options.TransferTile:
// 64 or 128) fixes the transfer pass's tile of a split plan, and
// scanColumns > 0 (Options.ScanColumns: 8, 16 or 32) its scan's CTA width;
// the planner still decides whether to split, and how, as it would have.
// early is Options.EarlyFirstSegment (planSplit's early).
func withSplit(p Problem, pl Plan, sms, segmentChunks, transferTile, scanColumns, early int, forced bool) (Plan, splitPlan, error) {
	consumers := 0
	if forced {
		consumers = pl.TileWidth / 64
	}
	sp := planSplit(p, sms, segmentChunks, consumers, early)
	if sp.segChunks == 0 {
		return pl, sp, nil
	}
	if transferTile > 0 {
		sp.xferConsumers = transferTile / 64
	}
	if scanColumns > 0 {
		sp.scanColumns = scanColumns
	}
	split, err := planHopper(p, sp.consumers)
	split.SegmentChunks, split.Segments, split.ScanColumns, split.EarlyFirstSegment = sp.segChunks, sp.transfer, sp.scanColumns, sp.early
	if sp.xferConsumers != sp.consumers {
		split.TransferTileWidth = kernsrc.HopperTileWidth(sp.xferConsumers)
	}
	return split, sp, err
}

// Time one CTA spends per chunk with a 64- and a 128-wide value tile, on
// the H200 with the GPU full (kernel v9, docs/PERF.md): the 128-wide tile
// does twice the work per chunk in a little under twice the time (two
// consumer warpgroups share one aux warpgroup's gates, A2 and P), the
// 64-wide one has half the latency along a chain.
const (
	chunkTime64  = 2.2 // microseconds
	chunkTime128 = 4.2
)

// chooseConsumers is the planner's cost model: it returns the consumer
// warpgroups (1: 64-wide tiles, 2: 128-wide) that minimise the estimated
// time chunkTime x max(L, waves x W/N), where L is the longest sequence in
// chunks (no CTA can finish sooner), W/N the mean chunks of a CTA, and
// waves = ceil(CTAs / sms) how many rounds of CTAs the multiprocessors run
// (for equal lengths, waves x L). Checked against the measured times of the
// benchmark suite (docs/PERF.md): it picks the faster tile on every case.
func chooseConsumers(p Problem, sms int) int {
	longest, total := chainChunks(p)
	if longest == 0 || p.N == 0 {
		return 1
	}
	sms = max(sms, 1)
	best, bestTime := 1, math.Inf(1)
	for _, nc := range []int{1, 2} {
		ctas := p.N * p.Hv * (2 / nc)
		waves := (ctas + sms - 1) / sms
		chain := max(float64(longest), float64(waves)*float64(total)/float64(p.N))
		t := chunkTime64 * chain
		if nc == 2 {
			t = chunkTime128 * chain
		}
		if t < bestTime {
			best, bestTime = nc, t
		}
	}
	return best
}

// chainChunks returns the longest sequence and the sum over sequences, in
// chunks of ChunkLen tokens.
func chainChunks(p Problem) (longest, total int) {
	if p.Seqs == nil {
		l := (p.T + ChunkLen - 1) / ChunkLen
		return l, p.N * l
	}
	for i := 0; i+1 < len(p.Seqs); i++ {
		l := (p.Seqs[i+1] - p.Seqs[i] + ChunkLen - 1) / ChunkLen
		longest = max(longest, l)
		total += l
	}
	return longest, total
}

// PlanCoreVariant plans a core forward with the named kernel variant
// instead of the planner's choice, for tests and benchmarks that must cover
// every variant whatever the device. The variant must suit the problem's
// dtype.
func PlanCoreVariant(p Problem, name string) (Plan, error) {
	for _, nc := range kernsrc.HopperConsumers {
		// The input dtype's name also serves the full forward's fp16 copies
		// of q and k (a bf16 variant forced on a ForwardFull with L2Norm
		// picks the tile; the dtypes are the call's).
		for _, dt := range []kernsrc.CoreDtype{coreDtype(p), inputDtype(p.Dtype)} {
			v, err := kernsrc.HopperVariant(dt, nc)
			if err == nil && v.Name == name {
				return planHopper(p, nc)
			}
		}
	}
	return Plan{}, argErrorf("variant", "%q is not a core-forward variant for %v inputs", name, p.Dtype)
}

// coreDtype is the dtype pair of p's core variants.
func coreDtype(p Problem) kernsrc.CoreDtype {
	if p.Fused && !p.QKNorm {
		return kernsrc.CoreBF16FusedNoNorm
	}
	if p.Fused {
		return kernsrc.CoreBF16Fused
	}
	if p.QKNorm {
		return kernsrc.CoreBF16L2Norm
	}
	if p.Dtype == BF16 && p.QKDtype == FP16 {
		return kernsrc.CoreBF16FP16QK
	}
	return inputDtype(p.Dtype)
}

// inputDtype is the kernels' name for an input dtype.
func inputDtype(d Dtype) kernsrc.CoreDtype {
	if d == FP16 {
		return kernsrc.CoreFP16
	}
	return kernsrc.CoreBF16
}

func planHopper(p Problem, consumers int) (Plan, error) {
	v, err := kernsrc.HopperVariant(coreDtype(p), consumers)
	if err != nil {
		return Plan{}, err
	}
	bv := kernsrc.HopperTileWidth(consumers)
	return Plan{
		Variant:     v,
		TileWidth:   bv,
		Grid:        [3]uint32{uint32(p.Hv * HeadDim / bv), uint32(p.N), 1},
		Block:       [3]uint32{uint32(kernsrc.HopperThreads(coreDtype(p), consumers, false)), 1, 1},
		SharedBytes: kernsrc.HopperSharedBytes(coreDtype(p), consumers),
	}, nil
}
