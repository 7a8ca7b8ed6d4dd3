package launch

import "github.com/gdnjit/gdn/internal/problem"

// ForwardMixed runs a mixed call (problem/mixed.go) on stream s: each run
// of its sequences as a call of its own on the caller's tensors, the
// decode runs through Decode and the others through ForwardFull, one
// after the other on s (capturable as one graph). The call is validated
// whole first; nothing is launched when it is refused.
func (l *Launcher) ForwardMixed(a problem.Full, s uintptr) error {
	p, err := problem.ValidateMixed(&a)
	if err != nil {
		return err
	}
	if a.CuSeqlens == nil {
		// B sequences of T tokens: all of one kind.
		if problem.IsDecode(p.T) {
			return l.Decode(runDecode(&a), s)
		}
		return l.ForwardFull(a, s)
	}
	return problem.Runs(p, p.CkptEvery, func(r problem.Run) error {
		sub := runOf(&a, p, r)
		if r.Decode {
			return l.Decode(runDecode(&sub), s)
		}
		return l.ForwardFull(sub, s)
	})
}

// runOf is run r of mixed call a (problem p) as a call of its own: its
// stretch of cu_seqlens and of the slot table (host and device), and of
// the checkpoint rows; the tensors are the caller's, whole.
func runOf(a *problem.Full, p problem.Problem, r problem.Run) problem.Full {
	if r.N0 == 0 && r.N1 == p.N {
		return *a
	}
	sub := *a
	sub.SeqRun = true
	n := r.N1 - r.N0
	sub.CuSeqlens = a.CuSeqlens[r.N0 : r.N1+1]
	sub.CuSeqlensDevice = offset(a.CuSeqlensDevice, r.N0*a.CuSeqlensDevice.Dtype.Size(), n+1)
	sub.Pool.Slots = a.Pool.Slots[r.N0:r.N1]
	sub.Pool.SlotsDevice = offset(a.Pool.SlotsDevice, 4*r.N0, n)
	if a.CheckpointEvery > 0 && !r.Decode {
		rows := 0
		for m := r.N0; m < r.N1; m++ {
			b, e := p.SeqBounds(m)
			rows += (e - b) / a.CheckpointEvery
		}
		state := p.Hv * problem.HeadDim * problem.HeadDim * p.StateDtype().Size()
		sub.Checkpoints = offset(a.Checkpoints, r.Rows0*state, rows, p.Hv, problem.HeadDim, problem.HeadDim)
	}
	return sub
}

// offset is the tensor of the given shape that starts bytes into t.
func offset(t problem.Tensor, bytes int, shape ...int) problem.Tensor {
	return problem.Tensor{Ptr: t.Ptr + uintptr(bytes), Bytes: t.Bytes - bytes, Dtype: t.Dtype, Shape: shape}
}

// runDecode is a decode run (or a B x T call of at most MaxDecodeTokens
// tokens) as Decode's arguments: the full forward's, less what a decode
// call has none of (h0, ht, checkpoints).
func runDecode(a *problem.Full) problem.Decode {
	return problem.Decode{Q: a.Q, K: a.K, V: a.V, G: a.G, Beta: a.Beta, ALog: a.ALog, DtBias: a.DtBias, Pool: a.Pool,
		O: a.O, CuSeqlens: a.CuSeqlens, CuSeqlensDevice: a.CuSeqlensDevice, Scale: a.Scale, Layout: a.Layout,
		L2Norm: a.L2Norm, GateInKernel: a.GateInKernel, BetaLogits: a.BetaLogits, NegEigval: a.NegEigval, SeqRun: a.SeqRun}
}
