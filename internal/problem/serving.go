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

// checkServing validates a's state layout, pool and checkpoints into p.
func checkServing(a *Core, p *Problem) error {
	if err := CheckLayout(a.Layout); err != nil {
		return err
	}
	p.Layout = a.Layout
	if err := checkPool(a, p); err != nil {
		return err
	}
	return checkCheckpoints(a, p)
}

// checkPool validates a's pool into p.
func checkPool(a *Core, p *Problem) error {
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

// checkCheckpoints validates a's checkpoint interval and buffer into p
// (docs/SPEC.md, "Checkpoints"): E a positive multiple of 64; the buffer
// [R, Hv, 128, 128] of the call's state dtype, R the sum of floor(L_n / E)
// over the sequences, overlapping no other tensor of the call.
func checkCheckpoints(a *Core, p *Problem) error {
	ck := a.Checkpoints
	given := ck.Present() || ck.Shape != nil
	if a.CheckpointEvery == 0 {
		if given {
			return gdnerr.Argf("checkpoints", "given without checkpoint_every")
		}
		return nil
	}
	every := a.CheckpointEvery
	if every < 0 || every%ChunkLen != 0 {
		return gdnerr.Argf("checkpoint_every", "%d, want a positive multiple of %d (a chunk boundary)", every, ChunkLen)
	}
	if !given {
		return gdnerr.Argf("checkpoints", "missing: checkpoint_every = %d asks for checkpoints", every)
	}
	rows := 0
	for n := 0; n < p.N; n++ {
		b, e := p.SeqBounds(n)
		rows += (e - b) / every
	}
	if err := checkTensor("checkpoints", ck, p.StateDtype(), shapeOf(rows, p.Hv, HeadDim, HeadDim), 16); err != nil {
		return err
	}
	var aSpan, cu, h0, ht, gate0, gate1 span
	if !a.APrepared {
		aSpan = spanOf(a.A)
	}
	if a.CuSeqlens != nil {
		cu = spanOf(a.CuSeqlensDevice)
	}
	if p.HasH0 {
		h0 = spanOf(a.H0)
	}
	if p.HasHt {
		ht = spanOf(a.Ht)
	}
	if a.Fused && a.GateInKernel {
		gate0, gate1 = spanOf(a.ALog), spanOf(a.DtBias)
	}
	var pool, slots span
	if p.Pool.S > 0 {
		pool, slots = spanOf(a.Pool.States), spanOf(a.Pool.SlotsDevice)
	}
	names := [...]string{"q", "k", "v", "g", "beta", "A", "cu_seqlens (device)", "o", "h0", "ht", "pool", "slots (device)", "a_log", "dt_bias"}
	spans := [...]span{spanOf(a.Q), spanOf(a.K), spanOf(a.V), spanOf(a.G), spanOf(a.Beta), aSpan, cu, spanOf(a.O), h0, ht, pool, slots, gate0, gate1}
	if err := checkApart("checkpoints", spanOf(ck), names[:], spans[:]); err != nil {
		return err
	}
	p.CkptEvery, p.CkptRows = every, rows
	return nil
}

// checkApart refuses an output (name, x) that shares memory with another
// tensor of the call.
func checkApart(name string, x span, names []string, spans []span) error {
	for i, s := range spans {
		if x.overlaps(s) {
			return gdnerr.Argf(name, "shares memory with %s ([%#x, %#x), %s [%#x, %#x)): it must not overlap another tensor",
				names[i], x.p, x.p+x.n, names[i], s.p, s.p+s.n)
		}
	}
	return nil
}

// checkFullServing checks what the core's validation of a full forward
// does not see: the gate's parameters against the pool and the
// checkpoints (the core of a full call with a preparation kernel does not
// read them).
func checkFullServing(a *Full) error {
	if !a.GateInKernel {
		return nil
	}
	names := [...]string{"a_log", "dt_bias"}
	spans := [...]span{spanOf(a.ALog), spanOf(a.DtBias)}
	if a.Pool.Given() {
		if err := checkPoolApart(a.Pool, names[:], spans[:]); err != nil {
			return err
		}
	}
	if a.CheckpointEvery != 0 {
		return checkApart("checkpoints", spanOf(a.Checkpoints), names[:], spans[:])
	}
	return nil
}

// StateDtype is the dtype of the call's states: the pool's, or FP32 (h0,
// ht).
func (p Problem) StateDtype() dtype.Dtype {
	if p.Pool.S > 0 {
		return p.Pool.Dtype
	}
	return dtype.FP32
}
