package problem

import (
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
)

// Full is a full forward's arguments: gdn.FullArgs, whose documentation
// gives the shapes and rules.
type Full struct {
	Q, K, V, G, Beta Tensor
	ALog, DtBias     Tensor
	H0               Tensor
	O, Ht            Tensor
	CuSeqlens        []int
	CuSeqlensDevice  Tensor
	Scale            float32 // 0 means 1/sqrt(128)
	L2Norm           bool
	GateInKernel     bool
	// BetaLogits: Beta holds logits b, beta = sigmoid(b); NegEigval (with
	// BetaLogits only): beta = 2 sigmoid(b).
	BetaLogits, NegEigval bool
	Pool                  Pool   // in place of H0 and Ht (Core.Pool)
	Layout                Layout // of H0, Ht or the pool
	CheckpointEvery       int    // Core.CheckpointEvery
	Checkpoints           Tensor
	SeqRun                bool // a run of a mixed call's sequences (Decode.SeqRun)
}

// ValidateFull checks the arguments of a full forward as ValidateCore does
// and returns the problem size (its ADtype is FP16: the A2 computed
// inside).
func ValidateFull(a *Full) (Problem, error) {
	if a == nil {
		return Problem{}, gdnerr.Argf("args", "nil *FullArgs")
	}
	core := a.CoreTemplate(a.Q, a.K, 0, 0)
	p, err := ValidateCore(&core)
	if err != nil {
		return p, err
	}
	if a.NegEigval && !a.BetaLogits {
		// Beta as given may lie anywhere in (0, 2) already: the flag would do
		// nothing.
		return p, gdnerr.Argf("neg_eigval", "set without beta_logits: it applies to beta given as logits (2 sigmoid(b))")
	}
	if a.GateInKernel {
		for _, x := range []struct {
			name string
			t    Tensor
		}{{"a_log", a.ALog}, {"dt_bias", a.DtBias}} {
			if err := checkTensor(x.name, x.t, dtype.FP32, shapeOf(p.Hv), 4); err != nil {
				return p, err
			}
		}
		// The gate's parameters are inputs too (checkNoOverlap has the rest).
		outs := [...]span{spanOf(a.O), {}}
		if p.HasHt {
			outs[1] = spanOf(a.Ht)
		}
		for i, in := range [...]span{spanOf(a.ALog), spanOf(a.DtBias)} {
			for j, out := range outs {
				if out.overlaps(in) {
					return p, overlapError([...]string{"o", "ht"}[j], out, [...]string{"a_log", "dt_bias"}[i], in)
				}
			}
		}
	} else if a.ALog.Present() || a.DtBias.Present() {
		return p, gdnerr.Argf("a_log", "A_log and dt_bias are given but GateInKernel is off")
	}
	if err := checkFullServing(a); err != nil {
		return p, err
	}
	return p, nil
}

// CoreTemplate is the core forward of a with its q, k, g_cumsum and A
// buffers (A2 = A diag(beta), fp16 [B, T, Hv, 64], as gdn_prep_chunk writes
// it); validation passes a stand-in address for A (and g stands for
// g_cumsum), whose shape follows q and v.
func (a *Full) CoreTemplate(q, k Tensor, gcum, aPtr uintptr) Core {
	g := a.G
	if gcum != 0 {
		g = Tensor{Ptr: gcum, Bytes: a.G.Bytes, Dtype: dtype.FP32, Shape: a.G.Shape}
	}
	A := Tensor{Ptr: aPtr, Dtype: dtype.FP16}
	if len(a.Q.Shape) == 4 && len(a.V.Shape) == 4 {
		A.Shape = []int{a.Q.Shape[0], a.Q.Shape[1], a.V.Shape[2], ChunkLen}
		A.Bytes = A.Elems() * 2
	}
	if aPtr == 0 {
		A.Ptr = 1 << 12 // a stand-in: validation checks A's shape, not its memory
	}
	return Core{Q: q, K: k, V: a.V, G: g, Beta: a.Beta, A: A, H0: a.H0, O: a.O, Ht: a.Ht,
		CuSeqlens: a.CuSeqlens, CuSeqlensDevice: a.CuSeqlensDevice, Scale: a.Scale, APrepared: true,
		Pool: a.Pool, Layout: a.Layout, CheckpointEvery: a.CheckpointEvery, Checkpoints: a.Checkpoints, SeqRun: a.SeqRun}
}
