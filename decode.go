package gdn

import (
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/problem"
)

// MaxDecodeTokens is the most tokens one sequence may bring to a decode
// call: one, or a few for speculative or multi-token-prediction
// verification.
const MaxDecodeTokens = problem.MaxDecodeTokens

// DecodeArgs are the operands of a decode call (docs/SPEC.md, "Decode"):
// a batched recurrent step of 1 to MaxDecodeTokens tokens for each of N
// sequences, from a state pool, in place. Shapes follow FLA's layout:
//
//	Q, K         [B, T, Hq, 128]     BF16 or FP16
//	V            [B, T, Hv, 128]     the dtype of Q
//	G            [B, T, Hv]          FP32: the per-token log-gate; with
//	                                 GateInKernel, the gate's raw input a
//	Beta         [B, T, Hv]          FP32 or the dtype of Q; with
//	                                 BetaLogits, beta's logits b
//	ALog, DtBias [Hv]                FP32, GateInKernel only:
//	                                 g = -exp(ALog) softplus(a + DtBias)
//	Pool         StatePool           required: [S, Hv, 128, 128] FP32 or
//	                                 BF16 and the slot table
//	O            [B, T, Hv, 128]     the dtype of V, written
//	TokenStates  [B*T, Hv, 128, 128] optional, the pool's dtype and Layout:
//	                                 the state after every token, written
//
// N = B sequences of T <= 8 tokens, or B = 1 and packed sequences of 1 to
// 8 tokens each, given by CuSeqlens (host, validated) and CuSeqlensDevice
// (Int32 or Int64 [N+1], read by the kernel), as in CoreArgs. Sequence n
// starts from its slot (zero for a negative slot), runs the recurrence
// token by token and writes its final state back to its slot (nothing for
// a negative slot). Value head h reads q/k head h / (Hv/Hq).
//
// Row t of TokenStates is the state after token t of the flattened token
// axis (the row of O of the same token), written whatever the slot; a
// sequence's last row has the bits of its slot. An engine that accepts the
// first a tokens of sequence n copies row cu_seqlens[n] + a - 1 into the
// slot.
//
// The options are the full forward's in-kernel steps: L2Norm normalises q
// and k (x / sqrt(sum(x^2) + 1e-6)); GateInKernel takes the gate from a,
// ALog and DtBias; BetaLogits takes beta = sigmoid(b), and with NegEigval
// 2 sigmoid(b) (NegEigval without BetaLogits is an error). Everything runs
// in fp32; only O is rounded (and a bf16 pool's states, once each, to
// nearest even, as they are written). Layout is the state layout of the
// pool and TokenStates; the same call in the other layout gives O bit for
// bit and the exact transposes of the states.
//
// Pointers are aligned as in CoreArgs (q, k, v, o, the pool and
// token_states to 16 bytes). O and TokenStates must not overlap an input
// or each other, and the pool must not overlap any other tensor.
type DecodeArgs struct {
	Q, K, V, G, Beta Tensor
	ALog, DtBias     Tensor
	Pool             StatePool
	O                Tensor
	TokenStates      Tensor
	CuSeqlens        []int
	CuSeqlensDevice  Tensor
	Scale            float32 // 0 means 1/sqrt(128)
	Layout           StateLayout
	L2Norm           bool
	GateInKernel     bool
	BetaLogits       bool
	NegEigval        bool
}

// decode is a as the layers below see it.
func (a *DecodeArgs) decode() problem.Decode {
	t := func(x Tensor) problem.Tensor { return problem.Tensor(x) }
	return problem.Decode{Q: t(a.Q), K: t(a.K), V: t(a.V), G: t(a.G), Beta: t(a.Beta), ALog: t(a.ALog), DtBias: t(a.DtBias),
		Pool: a.Pool.pool(), O: t(a.O), TokenStates: t(a.TokenStates), CuSeqlens: a.CuSeqlens,
		CuSeqlensDevice: t(a.CuSeqlensDevice), Scale: a.Scale, Layout: a.Layout, L2Norm: a.L2Norm,
		GateInKernel: a.GateInKernel, BetaLogits: a.BetaLogits, NegEigval: a.NegEigval}
}

// Decode runs a decode call on device buffers, enqueued on stream s: one
// kernel launch, which reads every sequence's slot of the pool and writes
// it back in place, so its cost is the states' bytes (with an fp32 pool,
// Hv x 64 KB read and as much written per sequence; half that with bf16),
// whatever the number of tokens. Arguments are validated first (errors
// wrap ErrInvalidArgument and name the argument); nothing is launched or
// written when they are wrong. The call does not synchronise the stream
// and may be captured into the caller's CUDA graph. A call repeated with
// the same arguments allocates nothing; the slot table's contents are
// data, so a call that changes only them (on the host and on the device)
// is a repeated call.
func (rt *Runtime) Decode(a *DecodeArgs, s Stream) error {
	if err := rt.guard.Enter(); err != nil {
		return err
	}
	defer rt.guard.Leave()
	if a == nil {
		return gdnerr.Argf("args", "nil *DecodeArgs")
	}
	return rt.dev.Decode(a.decode(), uintptr(s))
}
