// Package problem validates the arguments of a forward call and sizes it:
// a Problem is what the planner and the prepared calls read of a call.
// Validation is pure Go (nothing is read from the device) and allocates
// nothing unless it fails; every error is a *gdnerr.ArgError naming the
// argument.
package problem

import (
	"fmt"

	"github.com/gdnjit/gdn/dtype"
)

// HeadDim is the head dimension K = V the kernels are built for.
const HeadDim = 128

// ChunkLen is the chunk length C of the chunked algorithm.
const ChunkLen = 64

// MaxHeads bounds Hq and Hv: the preparation and scan kernels run one grid
// row (grid.y, at most 65535) per value head; no model comes close, and
// with B*T below 2^31 it keeps every element count and byte size far from
// overflowing.
const MaxHeads = 65535

// MaxSeqs is the most sequences one call runs (the grid's y dimension).
const MaxSeqs = 65535

// Problem is the validated size of a call.
type Problem struct {
	B, T, Hq, Hv int
	N            int         // number of sequences
	Seqs         []int       // cu_seqlens (N+1 offsets into the B*T tokens); nil without varlen
	Dtype        dtype.Dtype // of v and o, and of q and k but for QKDtype
	QKDtype      dtype.Dtype // of q and k: Dtype (or unset), or FP16 for the full forward's normalised copies (Core.QKFP16)
	QKNorm       bool        // the core kernel L2-normalises q and k (the full forward's L2Norm, bf16, Core.QKNorm)
	Fused        bool        // the core kernel does the full forward's preparation (with QKNorm, after its L2 norm; Core.Fused)
	BetaDtype    dtype.Dtype
	ADtype       dtype.Dtype // FP16 only for the full forward's prepared A2 (Core.APrepared)
	SeqlensDtype dtype.Dtype // of CuSeqlensDevice; Invalid without varlen
	HasH0, HasHt bool
	Scale        float32
	Layout       Layout   // of h0, ht or the pool
	Pool         PoolInfo // the pool's slots and dtype; S = 0 without a pool
	CkptEvery    int      // checkpoint_every; 0 without checkpoints
	CkptRows     int      // the checkpoint rows R
}

// Tokens is B*T.
func (p Problem) Tokens() int { return p.B * p.T }

// SeqBounds returns sequence n's tokens [b, e) as flat indices into the
// B*T tokens (without cu_seqlens, sequence n is batch row n).
func (p Problem) SeqBounds(n int) (b, e int) {
	if p.Seqs != nil {
		return p.Seqs[n], p.Seqs[n+1]
	}
	return n * p.T, (n + 1) * p.T
}

// G is the number of value heads per query/key head (Hv/Hq).
func (p Problem) G() int { return p.Hv / p.Hq }

// WithN is p with N set from B or Seqs where it is not (a Problem written
// by hand, as the tools' shapes are).
func (p Problem) WithN() Problem {
	if p.N == 0 {
		p.N = p.B
		if p.Seqs != nil {
			p.N = len(p.Seqs) - 1
		}
	}
	return p
}

func (p Problem) String() string {
	return fmt.Sprintf("B=%d T=%d Hq=%d Hv=%d N=%d %v", p.B, p.T, p.Hq, p.Hv, p.N, p.Dtype)
}
