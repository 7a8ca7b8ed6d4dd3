package plan

import (
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/problem"
)

// The full forward's choice of where its preparation runs (the chunk sums
// of the gates, A2 and, with L2Norm, the normalised q and k): in the core
// kernel itself where the core runs unsplit at BV 128 on bf16 inputs (the
// only plan of the variants that do it), else in a preparation kernel
// before the core. These rules read only the knobs' forced variant and
// segment length (Knobs.tileKnobs), as the Runtime has always decided.

// normInCoreMaxG is the largest G for which the core kernel normalises q
// and k (NormInCore). The preparation's copies are written once per key
// head, by one CTA in G, while every one of the G value heads' core CTAs
// normalises its own tiles: measured (docs/PERF.md v25, the full forward,
// three calls), sym32_8kx4 (G = 1) 1.18x-1.24x, q35_4kx8 and q35_1kx8
// (G = 2) 0.97x-1.03x, q397_4kx8 (G = 4) 0.98x and 0.99x. At G = 2 it
// costs no time and saves the copies' scratch.
const normInCoreMaxG = 2

// NormInCoreMaxG is the largest G = Hv / Hq whose full forward normalises
// q and k in the core kernel (for the GPU tests' expected plans).
const NormInCoreMaxG = normInCoreMaxG

// Full returns the plan of the core kernel that a Runtime with knobs k on
// sms SMs runs the full forward (ForwardFull) of p's shape and input dtype
// with, with or without L2Norm: the variant that does the whole
// preparation itself (kernsrc.CoreBF16Fused with L2Norm,
// kernsrc.CoreBF16FusedNoNorm without) where it runs, else the core on the
// preparation's normalised copies (L2Norm) or on q and k as given.
func Full(p problem.Problem, sms int, k Knobs, l2norm bool) (Plan, error) {
	return Core(fullCoreProblem(p.WithN(), sms, k.tileKnobs(), l2norm), sms, k)
}

// FusedPrep says whether the core kernel does the full forward's whole
// preparation for p: with L2Norm (kernsrc.CoreBF16Fused) on bf16 inputs
// wherever the core forward of the normalised copies would run unsplit at
// BV 128, whatever G (k.L2NormInPrep turns it off); without
// (kernsrc.CoreBF16FusedNoNorm) wherever the core forward of q and k as
// given would. k.PrepKernel turns both off.
func FusedPrep(p problem.Problem, sms int, k Knobs, l2norm bool) bool {
	if k.PrepKernel {
		return false
	}
	if l2norm {
		return !k.L2NormInPrep && coreTakesNorm(p, sms, k.tileKnobs())
	}
	return coreTakesFused(p, sms, k.tileKnobs())
}

// NormInCore says whether the full forward of p with L2Norm leaves its L2
// norm to the core kernel (kernsrc.CoreBF16L2Norm): on bf16 inputs and G =
// Hv / Hq of at most normInCoreMaxG, wherever the core forward of the
// normalised copies would run unsplit at BV 128, the only plan that variant
// has (the few-head shapes that split keep the copies). Its converter
// warpgroup then normalises each chunk's rows of q and k as the preparation
// would have, to the bit, and the preparation neither reads q nor writes
// the copies (nor is their scratch allocated). It matters only with
// k.PrepKernel (elsewhere such calls take FusedPrep); k.L2NormInPrep turns
// it off.
func NormInCore(p problem.Problem, sms int, k Knobs, l2norm bool) bool {
	return l2norm && !k.L2NormInPrep && p.Hq != 0 && p.Hv/p.Hq <= normInCoreMaxG && coreTakesNorm(p, sms, k.tileKnobs())
}

// coreTakesNorm says whether the core kernel can normalise q and k for the
// full forward of p with L2Norm: the core forward of the normalised (fp16)
// copies would run unsplit at BV 128 (coreRunsWide).
func coreTakesNorm(p problem.Problem, sms int, k Knobs) bool {
	return coreRunsWide(p, dtype.FP16, sms, k)
}

// coreTakesFused says whether the core kernel can do the whole preparation
// of the full forward of p without L2Norm (kernsrc.CoreBF16FusedNoNorm):
// the core forward of q and k as given would run unsplit at BV 128.
func coreTakesFused(p problem.Problem, sms int, k Knobs) bool {
	return coreRunsWide(p, p.Dtype, sms, k)
}

// coreRunsWide says whether the core forward of p on bf16 inputs, with q
// and k in qk, is planned unsplit at BV 128: the only plan of the variants
// that normalise q and k or prepare everything themselves.
func coreRunsWide(p problem.Problem, qk dtype.Dtype, sms int, k Knobs) bool {
	if p.Dtype != dtype.BF16 || p.Hq == 0 {
		return false
	}
	p.QKDtype = qk
	pl, err := Core(p, sms, k)
	return err == nil && pl.SegmentChunks == 0 && pl.TileWidth == 128
}

// fullCoreProblem is the core problem of a full forward of p (its input
// dtype, N set) on a Runtime with knobs k: with L2Norm, the fused
// preparation's (FusedPrep) or the normalised copies'; without, the fused
// preparation's without the norm (coreTakesFused) or q and k as given.
func fullCoreProblem(p problem.Problem, sms int, k Knobs, l2norm bool) problem.Problem {
	p.QKDtype, p.QKNorm, p.Fused, p.ADtype = p.Dtype, false, false, dtype.FP16
	switch {
	case l2norm && coreTakesNorm(p, sms, k):
		p.QKNorm, p.Fused = true, true
	case l2norm:
		p.QKDtype = dtype.FP16
	case coreTakesFused(p, sms, k):
		p.Fused = true
	}
	return p
}
