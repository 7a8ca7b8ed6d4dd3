package plan

import (
	"slices"
	"strings"

	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/kernsrc"
)

// Knobs override the planner's choices and the full forward's, for the
// tests and benchmarks that cover every path whatever the device (they set
// them on a Runtime through internal/tuning). The zero value lets the
// planner choose everything, which is what users get; results are exact
// either way.
type Knobs struct {
	// Variant, when set, runs every core forward with this kernel variant
	// (a name from kernsrc's catalogue, e.g. "gdn_hopper_bf16_bv64") instead
	// of the planner's choice.
	Variant string
	// SegmentChunks controls sequence parallelism: 0 lets the planner cut
	// long sequences into segments run on many SMs at once when its cost
	// model says that is faster; > 0 cuts every sequence longer than that
	// many 64-token chunks into segments of it (not when that would make
	// more than 65535 segments, the grid rows of the output pass); < 0
	// never cuts.
	SegmentChunks int
	// TransferTile, when positive, is the value-tile width (64 or 128) of
	// every split call's transfer pass, whatever the planner would choose
	// (the benchmarks that fit the split cost model: docs/PERF.md v18). It
	// does not decide whether a call is split, only that pass's tile when it
	// is.
	TransferTile int
	// ScanColumns, when positive, is the value columns (8, 16 or 32) of one
	// CTA of every split call's scan, whatever the planner would choose by
	// the waves of the scan's grid. Results are the same to the bit at every
	// width.
	ScanColumns int
	// EarlyFirstSegment decides whether a split call runs each sequence's
	// first segment (whose true start is h0) as an output pass of its own
	// beside the transfer pass, which then needs no B or M for it. 0 lets
	// the planner's cost model decide. > 0 weighs early plans first: the
	// best of them where one applies (every sequence cut in at least two
	// segments and one in three or more, the early pass's CTAs fewer than
	// the SMs) and the model puts it ahead of running unsplit, else the
	// plain planner's choice. < 0 weighs plain split plans only, so a call
	// whose only split worth making is early runs unsplit.
	EarlyFirstSegment int
	// PrepHeads, when positive, caps how many value heads of one key head
	// each block of the full forward's preparation kernel takes (it loads
	// the chunk's k rows and forms K K^T once for all of them): the most of
	// 4 and 1 that is at most PrepHeads and divides Hv / Hq, whatever the
	// grid's size. 0 lets the full forward choose by shape.
	PrepHeads int
	// L2NormInPrep keeps the full forward's L2 norm in its preparation
	// kernel, which writes normalised fp16 copies of q and k for the core,
	// everywhere. By default the core kernel normalises q and k itself
	// wherever it runs unsplit at BV 128 on bf16 inputs, and then does the
	// whole preparation too (see PrepKernel). With PrepKernel the core still
	// normalises them where G = Hv / Hq is at most 2
	// (kernsrc.CoreBF16L2Norm), the preparation kernel then neither reading
	// q nor writing the copies, with results equal to the bit to the
	// copies'.
	L2NormInPrep bool
	// PrepKernel runs the full forward's preparation (the chunk sums of
	// the gates, A2) as a kernel of its own everywhere. By default, on
	// bf16 inputs wherever the core runs unsplit at BV 128 (any G), the
	// core kernel does the whole preparation itself (kernsrc.CoreBF16Fused
	// with L2Norm, kernsrc.CoreBF16FusedNoNorm without): no kernel runs
	// before it and the call needs no scratch. The results differ in the
	// last bits (A2's inverse is computed in another order, with fp16
	// block products), equally close to the float64 reference.
	PrepKernel bool
}

// Check refuses knobs outside their ranges, with an *gdnerr.ArgError
// naming the knob (gdn.Open calls it before it touches the device).
func (k Knobs) Check() error {
	if k.TransferTile != 0 && k.TransferTile != 64 && k.TransferTile != 128 {
		return gdnerr.Argf("TransferTile", "is %d; want 0 (the planner's), 64 or 128", k.TransferTile)
	}
	if k.ScanColumns != 0 && !slices.Contains(kernsrc.ScanColumnChoices(), k.ScanColumns) {
		return gdnerr.Argf("ScanColumns", "is %d; want 0 (the planner's) or one of %v", k.ScanColumns, kernsrc.ScanColumnChoices())
	}
	if k.PrepHeads < 0 {
		return gdnerr.Argf("PrepHeads", "is %d; want 0 (chosen by shape) or a count of value heads", k.PrepHeads)
	}
	if k.Variant != "" && !isCoreVariant(k.Variant) {
		return gdnerr.Argf("Variant", "%q is not a core-forward kernel variant (gdn warmup lists them)", k.Variant)
	}
	return nil
}

// isCoreVariant says whether name is one of the core forward's kernel
// variants (a transfer-pass variant is not one: the planner runs those
// itself). Whether it suits a call's dtypes is checked per call.
func isCoreVariant(name string) bool {
	for _, v := range kernsrc.HopperVariants() {
		if v.Name == name && !strings.HasSuffix(name, "_transfer") {
			return true
		}
	}
	return false
}

// tileKnobs are the knobs that the full forward's choice of its core
// (FusedPrep, NormInCore, Full) weighs: the forced variant and segment
// length only, as the Runtime has always decided it.
func (k Knobs) tileKnobs() Knobs { return Knobs{Variant: k.Variant, SegmentChunks: k.SegmentChunks} }
