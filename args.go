package gdn

import (
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/problem"
)

// HeadDim is the head dimension K = V the kernels are built for.
const HeadDim = 128

// ChunkLen is the chunk length C of the chunked algorithm (A's last
// dimension).
const ChunkLen = 64

// Dtype is the element type of a tensor (package dtype; the names below
// keep gdn's API in one import).
type Dtype = dtype.Dtype

// The element types gdn reads and writes.
const (
	DtypeInvalid = dtype.Invalid
	BF16         = dtype.BF16  // bfloat16
	FP16         = dtype.FP16  // IEEE half precision
	FP32         = dtype.FP32  // IEEE single precision
	Int32        = dtype.Int32 // cu_seqlens
	Int64        = dtype.Int64 // cu_seqlens
)

// Tensor describes a dense, row-major tensor in device memory that the
// caller owns. Bytes is the size of the allocation from Ptr on: gdn checks
// that the shape fits in it, so a short buffer is an error, never an
// out-of-bounds access.
type Tensor struct {
	Ptr   uintptr // device address; 0 means absent (only for optional tensors)
	Bytes int     // bytes available from Ptr on
	Dtype Dtype
	Shape []int
}

// Present reports whether the tensor is given (Ptr non-zero).
func (t Tensor) Present() bool { return t.Ptr != 0 }

// Elems is the product of the shape's dimensions.
func (t Tensor) Elems() int { return problem.Tensor(t).Elems() }

// Stream is a CUDA stream handle (a CUstream) of the Runtime's device and
// its primary context (what the CUDA runtime API and PyTorch use), or one
// from Runtime.NewStream; 0 and CU_STREAM_LEGACY (1) are the legacy
// default stream. CU_STREAM_PER_THREAD (2) is refused with an error: it
// means the calling OS thread's default stream, and a Go call may run on
// any thread. Calls are ordered on the stream they are given and never
// synchronise it.
type Stream uintptr

// CoreArgs are the operands of the core forward (docs/SPEC.md, "Operations"):
// the caller computed g_cumsum and A. Shapes follow FLA's layout:
//
//	Q, K        [B, T, Hq, 128]   BF16 or FP16
//	V           [B, T, Hv, 128]   same dtype as Q
//	G           [B, T, Hv]        FP32, chunk-local cumulative log-gate
//	Beta        [B, T, Hv]        FP32 or the dtype of Q
//	A           [B, T, Hv, 64]    FP32 or BF16
//	H0          [N, Hv, 128, 128] FP32, optional (Ptr 0: zero state)
//	O           [B, T, Hv, 128]   dtype of V, written
//	Ht          [N, Hv, 128, 128] FP32, optional, written
//
// For packed variable-length sequences set B = 1 and give the boundaries
// twice: CuSeqlens on the host (validated, and used to plan) and
// CuSeqlensDevice, the same values in device memory (Int32 or Int64, shape
// [N+1]) that the kernel reads; they must hold the same values (the kernel
// clamps what it reads to the B*T tokens, but cannot check more). N is the
// number of sequences: B, or len(CuSeqlens)-1, at most 65535.
//
// Device pointers must be aligned: q, k, v, o and A to 16 bytes (they are
// copied in 16-byte vectors), h0 and ht to 8, g and beta to 4; cudaMalloc's
// are. Every tensor is dense and row-major in exactly its shape. Outputs
// must not overlap inputs or each other, but ht may be h0 itself (the
// state updated in place).
//
// The kernels compute in fp16 on the tensor cores (fp32 accumulation, fp32
// state): values of v, and of the state they build, beyond fp16's range
// (|x| > 65504) overflow to Inf, which shows in o and ht. Normalised q and k
// and unit-scale v, what the models feed it, are far inside.
//
// A serving engine keeps its states in a pool instead (docs/SPEC.md, "The
// serving layer"): Pool replaces H0 and Ht (give neither with it).
// Sequence n starts from Pool.States[Pool.Slots[n]] and its final state is
// written back there, in place; a negative slot starts from zero and
// writes nothing; slots the table does not name keep their bits. The
// pool's memory must not overlap any other tensor of the call. Layout
// chooses how H0, Ht or the pool's states lie: StateKV (the default) or
// StateVK, read and written directly, with the same o to the bit and
// states that are the exact transposes.
//
// CheckpointEvery = E (a positive multiple of 64; 0: none) keeps the state
// after every E tokens of each sequence in Checkpoints, [R, Hv, 128, 128]
// of the call's state dtype (FP32, or the pool's) and layout, 16-byte
// aligned: checkpoint j of sequence n (the state after its first (j+1) E
// tokens of this call) is row start[n] + j, start[0] = 0 and start[n+1] =
// start[n] + floor(L_n / E), R = start[N] (docs/SPEC.md, "Checkpoints").
type CoreArgs struct {
	Q, K, V, G, Beta, A Tensor
	H0                  Tensor
	O, Ht               Tensor
	CuSeqlens           []int
	CuSeqlensDevice     Tensor
	Scale               float32     // 0 means 1/sqrt(128)
	Pool                StatePool   // optional: the states in a pool, in place of H0 and Ht
	Layout              StateLayout // of H0, Ht or the pool; StateKV by default
	CheckpointEvery     int         // optional: keep the state after every this many tokens (a multiple of 64)
	Checkpoints         Tensor      // the checkpoints, written; with CheckpointEvery only
}

// FullArgs are the operands of the full forward (docs/SPEC.md, "Operations";
// FLA's chunk_gated_delta_rule): what a model layer produces, with the
// chunk-local cumulative sum and A computed inside. Shapes and dtypes are
// those of CoreArgs except:
//
//	G       [B, T, Hv]  FP32: the per-token log-gate (natural log, <= 0 in
//	                    real models); with GateInKernel, the gate's raw input a
//	ALog    [Hv]        FP32, GateInKernel only: g = -exp(ALog) softplus(a + DtBias)
//	DtBias  [Hv]        FP32, GateInKernel only
//
// and there is no A. L2Norm normalises every 128-vector of q and k to
// x / sqrt(sum(x^2) + 1e-6) first (FLA's use_qk_l2norm_in_kernel), rounded
// to fp16 (FLA rounds back to the input dtype: on bf16 inputs, fp16's three
// more bits for entries of at most 1 take about 40% off o's error).
//
// BetaLogits takes Beta as logits b (FLA's chunk_gated_delta_rule with
// beta left to the kernel): beta = sigmoid(b), computed in fp32 from b as
// read. NegEigval, with BetaLogits only, takes beta = 2 sigmoid(b) in (0,
// 2), so that I - beta k k^T may have a negative eigenvalue (FLA's
// allow_neg_eigval); without BetaLogits it is an error naming "neg_eigval"
// (beta given as it is may lie in (0, 2) already).
//
// Pool, Layout, CheckpointEvery and Checkpoints are CoreArgs'.
type FullArgs struct {
	Q, K, V, G, Beta Tensor
	ALog, DtBias     Tensor
	H0               Tensor
	O, Ht            Tensor
	CuSeqlens        []int
	CuSeqlensDevice  Tensor
	Scale            float32 // 0 means 1/sqrt(128)
	L2Norm           bool
	GateInKernel     bool
	BetaLogits       bool        // Beta holds logits b: beta = sigmoid(b)
	NegEigval        bool        // with BetaLogits: beta = 2 sigmoid(b)
	Pool             StatePool   // optional: the states in a pool, in place of H0 and Ht
	Layout           StateLayout // of H0, Ht or the pool; StateKV by default
	CheckpointEvery  int         // optional: keep the state after every this many tokens (a multiple of 64)
	Checkpoints      Tensor      // the checkpoints, written; with CheckpointEvery only
}

// core is a as the layers below see it.
func (a *CoreArgs) core() problem.Core {
	t := func(x Tensor) problem.Tensor { return problem.Tensor(x) }
	return problem.Core{Q: t(a.Q), K: t(a.K), V: t(a.V), G: t(a.G), Beta: t(a.Beta), A: t(a.A), H0: t(a.H0),
		O: t(a.O), Ht: t(a.Ht), CuSeqlens: a.CuSeqlens, CuSeqlensDevice: t(a.CuSeqlensDevice), Scale: a.Scale,
		Pool: a.Pool.pool(), Layout: a.Layout, CheckpointEvery: a.CheckpointEvery, Checkpoints: t(a.Checkpoints)}
}

// full is a as the layers below see it.
func (a *FullArgs) full() problem.Full {
	t := func(x Tensor) problem.Tensor { return problem.Tensor(x) }
	return problem.Full{Q: t(a.Q), K: t(a.K), V: t(a.V), G: t(a.G), Beta: t(a.Beta), ALog: t(a.ALog), DtBias: t(a.DtBias),
		H0: t(a.H0), O: t(a.O), Ht: t(a.Ht), CuSeqlens: a.CuSeqlens, CuSeqlensDevice: t(a.CuSeqlensDevice), Scale: a.Scale,
		L2Norm: a.L2Norm, GateInKernel: a.GateInKernel, BetaLogits: a.BetaLogits, NegEigval: a.NegEigval,
		Pool: a.Pool.pool(), Layout: a.Layout, CheckpointEvery: a.CheckpointEvery, Checkpoints: t(a.Checkpoints)}
}

// coreArgsOf is the inverse of CoreArgs.core (a caller's arguments carry
// none of the full forward's flags).
func coreArgsOf(c problem.Core) *CoreArgs {
	return &CoreArgs{Q: Tensor(c.Q), K: Tensor(c.K), V: Tensor(c.V), G: Tensor(c.G), Beta: Tensor(c.Beta), A: Tensor(c.A),
		H0: Tensor(c.H0), O: Tensor(c.O), Ht: Tensor(c.Ht), CuSeqlens: c.CuSeqlens, CuSeqlensDevice: Tensor(c.CuSeqlensDevice), Scale: c.Scale,
		Pool: statePoolOf(c.Pool), Layout: c.Layout, CheckpointEvery: c.CheckpointEvery, Checkpoints: Tensor(c.Checkpoints)}
}

// fullArgsOf is the inverse of FullArgs.full.
func fullArgsOf(f problem.Full) *FullArgs {
	return &FullArgs{Q: Tensor(f.Q), K: Tensor(f.K), V: Tensor(f.V), G: Tensor(f.G), Beta: Tensor(f.Beta), ALog: Tensor(f.ALog),
		DtBias: Tensor(f.DtBias), H0: Tensor(f.H0), O: Tensor(f.O), Ht: Tensor(f.Ht), CuSeqlens: f.CuSeqlens,
		CuSeqlensDevice: Tensor(f.CuSeqlensDevice), Scale: f.Scale, L2Norm: f.L2Norm, GateInKernel: f.GateInKernel,
		BetaLogits: f.BetaLogits, NegEigval: f.NegEigval,
		Pool: statePoolOf(f.Pool), Layout: f.Layout, CheckpointEvery: f.CheckpointEvery, Checkpoints: Tensor(f.Checkpoints)}
}

// statePoolOf is the inverse of StatePool.pool.
func statePoolOf(p problem.Pool) StatePool {
	return StatePool{States: Tensor(p.States), Slots: p.Slots, SlotsDevice: Tensor(p.SlotsDevice)}
}
