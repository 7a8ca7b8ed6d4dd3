// Package plan decides how a forward call runs: which kernel variant, its
// launch geometry and, where long sequences leave SMs idle, how to cut them
// into segments run in parallel (the split cost model); and for the full
// forward, where its preparation runs. A plan is a pure function of the
// problem, the SM count and the knobs of tests and benchmarks: nothing here
// touches a device, so all of it is tested on the CPU.
package plan

import (
	"fmt"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/problem"
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

// Core returns the plan a Runtime with knobs k on sms multiprocessors (a
// MIG slice or a green context has few) runs the core forward of p with:
// the forced variant's tile or the cost model's (Tile), then the split
// decision (WithSplit). p comes from problem.ValidateCore.
func Core(p problem.Problem, sms int, k Knobs) (Plan, error) {
	pl, err := Tile(p, sms, k.Variant)
	if err != nil {
		return Plan{}, err
	}
	pl, _, err = WithSplit(p, pl, sms, k)
	return pl, err
}

// Tile returns the unsplit plan of p: the named variant's (variant set:
// Variant) or the tile the cost model of chooseConsumers picks.
//
// The kernel (gdn_hopper.cu) runs one CTA (it takes most of the shared
// memory, so one per multiprocessor) per (sequence, value head, value tile)
// along the sequence's chunks. The tile is 64 or 128 value columns.
func Tile(p problem.Problem, sms int, variant string) (Plan, error) {
	if variant != "" {
		return Variant(p, variant)
	}
	nc := chooseConsumers(p, sms)
	if p.QKNorm || p.Fused {
		nc = 2 // its only tile (the full forward's NormInCore checks the copies' plan has it)
	}
	return planHopper(p, nc)
}

// Variant plans a core forward with the named kernel variant instead of
// the planner's choice, for tests and benchmarks that must cover every
// variant whatever the device. The variant must suit the problem's dtype.
func Variant(p problem.Problem, name string) (Plan, error) {
	for _, nc := range kernsrc.HopperConsumers {
		// The input dtype's name also serves the full forward's fp16 copies
		// of q and k (a bf16 variant forced on a ForwardFull with L2Norm
		// picks the tile; the dtypes are the call's).
		for _, dt := range []kernsrc.CoreDtype{CoreDtype(p), InputDtype(p.Dtype)} {
			v, err := kernsrc.HopperVariant(dt, nc)
			if err == nil && v.Name == name {
				return planHopper(p, nc)
			}
		}
	}
	return Plan{}, gdnerr.Argf("variant", "%q is not a core-forward variant for %v inputs", name, p.Dtype)
}

// CoreDtype is the dtype pair of p's core variants.
func CoreDtype(p problem.Problem) kernsrc.CoreDtype {
	if p.Fused && !p.QKNorm {
		return kernsrc.CoreBF16FusedNoNorm
	}
	if p.Fused {
		return kernsrc.CoreBF16Fused
	}
	if p.QKNorm {
		return kernsrc.CoreBF16L2Norm
	}
	if p.Dtype == dtype.BF16 && p.QKDtype == dtype.FP16 {
		return kernsrc.CoreBF16FP16QK
	}
	return InputDtype(p.Dtype)
}

// InputDtype is the kernels' name for an input dtype.
func InputDtype(d dtype.Dtype) kernsrc.CoreDtype {
	if d == dtype.FP16 {
		return kernsrc.CoreFP16
	}
	return kernsrc.CoreBF16
}

func planHopper(p problem.Problem, consumers int) (Plan, error) {
	v, err := kernsrc.HopperVariant(CoreDtype(p), consumers)
	if err != nil {
		return Plan{}, err
	}
	bv := kernsrc.HopperTileWidth(consumers)
	return Plan{
		Variant:     v,
		TileWidth:   bv,
		Grid:        [3]uint32{uint32(p.Hv * problem.HeadDim / bv), uint32(p.N), 1},
		Block:       [3]uint32{uint32(kernsrc.HopperThreads(CoreDtype(p), consumers, false)), 1, 1},
		SharedBytes: kernsrc.HopperSharedBytes(CoreDtype(p), consumers),
	}, nil
}
