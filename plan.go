package gdn

import (
	"slices"

	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/kernsrc"
)

// Plan is how a call runs: which kernel, its launch geometry and, for a
// long sequence on few heads, how it is cut into segments that run in
// parallel. It is a value, computed from the call's shape and the GPU's SM
// count alone (PlanFor), or read from prepared arguments (Runtime.PlanOf).
type Plan struct {
	Kernel      string // the kernel variant, e.g. "gdn_hopper_bf16_bv64"
	TileWidth   int    // value columns per CTA (BV)
	Grid        [3]uint32
	Block       [3]uint32
	SharedBytes int

	// SegmentChunks > 0 makes the plan sequence-parallel: sequences longer
	// than that many 64-token chunks run as segments of it, with Segments
	// of them in the transfer pass (each segment's state map, computed in
	// parallel), then a scan of the maps and an output pass. Grid is then
	// the unsplit one.
	SegmentChunks int
	Segments      int
	// TransferTileWidth is the transfer pass's tile when it differs from
	// TileWidth (0 otherwise).
	TransferTileWidth int
	// ScanColumns is the value columns of one CTA of a split plan's scan (0
	// when not split).
	ScanColumns int
	// EarlyFirstSegment: every sequence's first segment runs its output
	// pass beside the transfer pass, which then covers Segments segments
	// between each sequence's first and last.
	EarlyFirstSegment bool
}

// String describes the plan in one line: "KERNEL grid=[x y z] block=[x y
// z] smem=BYTES", and for a split plan "split=SEGMENTSxCHUNKS" and the
// passes' details.
func (p Plan) String() string { return p.internal().String() }

// planOf is an internal plan as users see it.
func planOf(p plan.Plan) Plan {
	return Plan{Kernel: p.Variant.Name, TileWidth: p.TileWidth, Grid: p.Grid, Block: p.Block, SharedBytes: p.SharedBytes,
		SegmentChunks: p.SegmentChunks, Segments: p.Segments, TransferTileWidth: p.TransferTileWidth,
		ScanColumns: p.ScanColumns, EarlyFirstSegment: p.EarlyFirstSegment}
}

// internal is planOf's inverse, as far as String needs it.
func (p Plan) internal() plan.Plan {
	return plan.Plan{Variant: kernsrc.Variant{Name: p.Kernel}, TileWidth: p.TileWidth, Grid: p.Grid, Block: p.Block,
		SharedBytes: p.SharedBytes, SegmentChunks: p.SegmentChunks, Segments: p.Segments,
		TransferTileWidth: p.TransferTileWidth, ScanColumns: p.ScanColumns, EarlyFirstSegment: p.EarlyFirstSegment}
}

// A PlanRequest describes a call by its shape alone, for PlanFor.
type PlanRequest struct {
	B, T, Hq, Hv int   // as in CoreArgs: q is [B, T, Hq, 128], v [B, T, Hv, 128]
	CuSeqlens    []int // packed sequences (B = 1), or nil
	Dtype        Dtype // of q, k and v: BF16 or FP16
	// SMs is the multiprocessors of the GPU, or of the Runtime's slice of
	// it (Options.SMs): what Device().SMs reports (132 on an H100 SXM or an
	// H200).
	SMs int
	// Full asks for the plan of the full forward's core kernel (ForwardFull),
	// with or without L2Norm; else the core forward's (Forward).
	Full, L2Norm bool
}

// PlanFor returns the plan a Runtime on r.SMs multiprocessors runs a call
// of r's shape with, without a GPU: what PlanOf or PlanOfFull report for
// such arguments. A shape gdn cannot run is an *ArgError naming the field.
func PlanFor(r PlanRequest) (Plan, error) {
	if dim, msg := problem.CheckSizes(r.B, r.T, r.Hq, r.Hv); msg != "" {
		return Plan{}, gdnerr.Argf(dim, "%s", msg)
	}
	if r.Dtype != BF16 && r.Dtype != FP16 {
		return Plan{}, gdnerr.Argf("Dtype", "%v, want bf16 or fp16", r.Dtype)
	}
	if r.SMs < 1 {
		return Plan{}, gdnerr.Argf("SMs", "is %d; want the GPU's multiprocessors (Device().SMs)", r.SMs)
	}
	p := problem.Problem{B: r.B, T: r.T, Hq: r.Hq, Hv: r.Hv, N: r.B, Dtype: r.Dtype, QKDtype: r.Dtype}
	if r.CuSeqlens != nil {
		if err := problem.CheckCuSeqlens(r.CuSeqlens, r.B, r.T); err != nil {
			return Plan{}, err
		}
		p.Seqs, p.N = slices.Clone(r.CuSeqlens), len(r.CuSeqlens)-1
	}
	if p.N > problem.MaxSeqs {
		return Plan{}, gdnerr.Argf("B", "%d sequences, at most %d per call", p.N, problem.MaxSeqs)
	}
	var pl plan.Plan
	var err error
	if r.Full {
		pl, err = plan.Full(p, r.SMs, plan.Knobs{}, r.L2Norm)
	} else {
		pl, err = plan.Core(p, r.SMs, plan.Knobs{})
	}
	return planOf(pl), err
}
