package problem

import (
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
)

// The serving layer's rules for a prefill (docs/SPEC.md, "The serving
// layer"): the state layout and the state pool of a core or full forward.
// ValidateCore and ValidateFull call them once the shapes, h0, ht and the
// other overlaps are checked; like the rest of validation they allocate
// nothing unless they fail.

// checkServing validates a's state layout and pool into p.
func checkServing(a *Core, p *Problem) error {
	if err := CheckLayout(a.Layout); err != nil {
		return err
	}
	p.Layout = a.Layout
	if !a.Pool.Given() {
		return nil
	}
	if p.HasH0 || p.HasHt {
		return gdnerr.Argf("pool", "given with h0 or ht: a pooled call starts from its slots and writes its final states back there")
	}
	info, err := CheckPool(a.Pool, p.N, p.Hv)
	if err != nil {
		return err
	}
	p.Pool = info
	var aSpan span
	if !a.APrepared { // the full forward's own scratch, or validation's stand-in
		aSpan = spanOf(a.A)
	}
	var cu span
	if a.CuSeqlens != nil {
		cu = spanOf(a.CuSeqlensDevice)
	}
	var gate [2]span
	if a.Fused && a.GateInKernel {
		gate = [2]span{spanOf(a.ALog), spanOf(a.DtBias)}
	}
	names := [...]string{"q", "k", "v", "g", "beta", "A", "cu_seqlens (device)", "o", "a_log", "dt_bias"}
	spans := [...]span{spanOf(a.Q), spanOf(a.K), spanOf(a.V), spanOf(a.G), spanOf(a.Beta), aSpan, cu, spanOf(a.O), gate[0], gate[1]}
	return checkPoolApart(a.Pool, names[:], spans[:])
}

// checkFullServing checks what the core's validation of a full forward
// does not see: the gate's parameters against the pool (the core of a
// full call with a preparation kernel does not read them).
func checkFullServing(a *Full) error {
	if !a.Pool.Given() || !a.GateInKernel {
		return nil
	}
	names := [...]string{"a_log", "dt_bias"}
	spans := [...]span{spanOf(a.ALog), spanOf(a.DtBias)}
	return checkPoolApart(a.Pool, names[:], spans[:])
}

// StateDtype is the dtype of the call's states: the pool's, or FP32 (h0,
// ht).
func (p Problem) StateDtype() dtype.Dtype {
	if p.Pool.S > 0 {
		return p.Pool.Dtype
	}
	return dtype.FP32
}
