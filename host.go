package gdn

import (
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/hostpath"
)

// HostCoreArgs are the operands of the core forward in host memory, as
// float32 slices in the layouts of CoreArgs. ForwardHost rounds q, k and v
// (and beta or A when asked) to the device dtype, round to nearest even.
type HostCoreArgs struct {
	B, T, Hq, Hv int
	CuSeqlens    []int // packed sequences (B = 1), or nil
	SeqlensDtype Dtype // Int32 (default) or Int64: how cu_seqlens travels

	Dtype   Dtype     // BF16 or FP16: q, k, v and o
	Q, K, V []float32 // [B,T,Hq,128], [B,T,Hq,128], [B,T,Hv,128]
	G       []float32 // [B,T,Hv] chunk-local cumulative log-gate
	Beta    []float32 // [B,T,Hv]
	A       []float32 // [B,T,Hv,64]
	H0      []float32 // [N,Hv,128,128], or nil for a zero initial state

	BetaDtype  Dtype   // FP32 (default) or Dtype
	ADtype     Dtype   // FP32 (default) or BF16
	Scale      float32 // 0 means 1/sqrt(128)
	FinalState bool    // return ht
}

// HostCoreResult holds the outputs of a host call: ForwardHost,
// ForwardHostInto, ForwardFullHost and ForwardFullHostInto.
type HostCoreResult struct {
	O  []float32 // [B,T,Hv,128], values of the device dtype widened to float32
	Ht []float32 // [N,Hv,128,128]; empty (nil from ForwardHost and ForwardFullHost) unless FinalState
}

// ForwardHost runs the core forward on host slices and waits for it: it
// converts the inputs to their device dtypes (on all cores), copies them to
// the device, fills the outputs with NaN (so an element the kernel fails to
// write cannot pass for a result), runs Forward on the legacy default
// stream, and copies the outputs back, widened to float32 in new slices.
// The device and pinned host buffers of the call are kept for the next call
// of the same or a smaller size (see Close), so a repeated call costs about
// the conversions and the PCIe copies, which overlap: each piece of an
// input is copied while the next is converted, and each piece of an output
// is widened while the next is copied back. ForwardHostInto also reuses the
// result slices. For data that stays on the GPU, use UploadCore once and
// Forward.
//
// The result is the caller's: gdn keeps no reference to it and never
// writes it again. Result slices are allocated without Go's zeroing pass
// (every element is written before the call returns) and their pages are
// faulted in on all cores. Once a result is returned, the result of the
// next call of the same shape is prepared so (a spare), which that call
// takes: the cost of a new result falls between calls rather than in them;
// a call that follows at once finishes the preparation on all cores while
// its kernel runs. Memory: such a spare, the size of a result (as large as
// v, plus ht), stays allocated between calls for each of the last 4 shapes
// called, 1 GiB at most in all (a larger result gets none), until Close.
func (rt *Runtime) ForwardHost(h *HostCoreArgs) (*HostCoreResult, error) {
	return rt.forwardHostNew(hostpath.NewCoreLayout((*hostpath.CoreArgs)(h)))
}

// ForwardHostInto is ForwardHost writing the outputs into res: res.O, and
// res.Ht when h.FinalState, are reused when their capacity holds the
// output (resliced to its length) and allocated otherwise, so a caller
// that passes the same res to every call of a size allocates no result
// memory after the first. Without h.FinalState, res.Ht is resliced to
// length 0. This is the path for repeated calls: new slices cost page
// faults over every output byte where their memory is new from the OS
// (and, those it allocates itself, Go's zeroing pass). res's slices must
// not overlap the inputs or each other. On an error the contents of res
// are unspecified.
func (rt *Runtime) ForwardHostInto(h *HostCoreArgs, res *HostCoreResult) error {
	l, err := hostpath.NewCoreLayout((*hostpath.CoreArgs)(h))
	return rt.forwardHostReusing(res, l, err)
}

// HostFullArgs are the operands of the full forward (ForwardFull, FullArgs)
// in host memory, as float32 slices in the layouts of FullArgs; the fields
// shared with HostCoreArgs mean the same. ForwardFullHost rounds q, k and v
// (and beta when asked) to the device dtype, round to nearest even; g,
// A_log, dt_bias and h0 travel in fp32.
type HostFullArgs struct {
	B, T, Hq, Hv int
	CuSeqlens    []int // packed sequences (B = 1), or nil
	SeqlensDtype Dtype // Int32 (default) or Int64: how cu_seqlens travels

	Dtype   Dtype     // BF16 or FP16: q, k, v and o
	Q, K, V []float32 // [B,T,Hq,128], [B,T,Hq,128], [B,T,Hv,128]
	// G is the per-token log-gate [B,T,Hv] (natural log, <= 0 in real
	// models; not its cumulative sum), or with GateInKernel the gate's raw
	// input a.
	G    []float32
	Beta []float32 // [B,T,Hv]
	// ALog and DtBias [Hv] are the gate's per-head parameters, given with
	// GateInKernel and only then: g = -exp(ALog) softplus(a + DtBias).
	ALog, DtBias []float32
	H0           []float32 // [N,Hv,128,128], or nil for a zero initial state

	BetaDtype  Dtype   // FP32 (default) or Dtype
	Scale      float32 // 0 means 1/sqrt(128)
	FinalState bool    // return ht
	// L2Norm normalises every 128-vector of q and k inside
	// (FullArgs.L2Norm); GateInKernel computes g from G, ALog and DtBias.
	L2Norm, GateInKernel bool
	// BetaLogits takes Beta as logits b (beta = sigmoid(b)), NegEigval with
	// it as 2 sigmoid(b) (FullArgs.BetaLogits, NegEigval).
	BetaLogits, NegEigval bool
}

// ForwardFullHost is ForwardHost for the full forward: it runs ForwardFull
// on host slices and waits for it, through the same kept device and pinned
// buffers, conversions on all cores, overlapped copies and spare results
// (one pool for both forwards: results of one shape are interchangeable;
// see ForwardHost). Errors name the argument (wrapping ErrInvalidArgument)
// as ForwardHost's do, and A_log or dt_bias for the gate's parameters. The
// scratch memory of the full forward is kept with its prepared call, as
// ForwardFull keeps it.
func (rt *Runtime) ForwardFullHost(h *HostFullArgs) (*HostCoreResult, error) {
	return rt.forwardHostNew(hostpath.NewFullLayout((*hostpath.FullArgs)(h)))
}

// ForwardFullHostInto is ForwardFullHost writing the outputs into res,
// reused as ForwardHostInto reuses it: the path for repeated calls.
func (rt *Runtime) ForwardFullHostInto(h *HostFullArgs, res *HostCoreResult) error {
	l, err := hostpath.NewFullLayout((*hostpath.FullArgs)(h))
	return rt.forwardHostReusing(res, l, err)
}

// forwardHostNew runs a host call, laid out by hostpath.NewCoreLayout or
// NewFullLayout (whose error it returns as it is), into a new result.
func (rt *Runtime) forwardHostNew(l *hostpath.Layout, err error) (*HostCoreResult, error) {
	if err != nil {
		return nil, err
	}
	if err := rt.guard.Enter(); err != nil {
		return nil, err
	}
	defer rt.guard.Leave()
	res := &HostCoreResult{}
	if err := rt.host.Forward(l, (*hostpath.Result)(res), true); err != nil {
		return nil, err
	}
	return res, nil
}

// forwardHostReusing runs a host call, laid out by hostpath.NewCoreLayout
// or NewFullLayout (whose error it returns as it is), into res; a nil res
// is the error whatever the layout's.
func (rt *Runtime) forwardHostReusing(res *HostCoreResult, l *hostpath.Layout, err error) error {
	if res == nil {
		return gdnerr.Argf("res", "nil *HostCoreResult")
	}
	if err != nil {
		return err
	}
	if err := rt.guard.Enter(); err != nil {
		return err
	}
	defer rt.guard.Leave()
	return rt.host.Forward(l, (*hostpath.Result)(res), false)
}
