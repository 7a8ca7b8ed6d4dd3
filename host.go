package gdn

import (
	"fmt"
	"unsafe"
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

// HostCoreResult holds the outputs of ForwardHost.
type HostCoreResult struct {
	O  []float32 // [B,T,Hv,128], values of the device dtype widened to float32
	Ht []float32 // [N,Hv,128,128], nil unless FinalState
}

// ForwardHost runs the core forward on host slices and waits for it: it
// converts the inputs to their device dtypes (on all cores), copies them
// in one transfer, fills the outputs with NaN (so an element the kernel
// fails to write cannot pass for a result), runs Forward on the legacy
// default stream, and copies the outputs back in one transfer. The device
// and pinned host buffers of the call are kept for the next call of the
// same or a smaller size (see Close), so a repeated call costs about the
// conversions and the PCIe copies. For data that stays on the GPU, use
// UploadCore once and Forward.
func (rt *Runtime) ForwardHost(h *HostCoreArgs) (*HostCoreResult, error) {
	l, err := newHostLayout(h)
	if err != nil {
		return nil, err
	}
	if err := rt.enter(); err != nil {
		return nil, err
	}
	defer rt.leave()
	set, err := rt.staging.take(rt.ctx, l.total)
	if err != nil {
		return nil, fmt.Errorf("gdn: allocate %d bytes: %w", l.total, err)
	}
	defer rt.staging.put(rt.ctx, set)

	l.encodeInputs(set.host)
	// The legacy default stream orders everything below after this copy
	// (which, from pageable memory, may return before its data lands).
	if err := rt.ctx.CopyToDevice(set.dev, unsafe.Pointer(&set.host[0]), l.inBytes); err != nil {
		return nil, fmt.Errorf("gdn: upload: %w", err)
	}
	a := l.bind(set.dev)
	if err := poisonOutputs(rt.ctx, a); err != nil {
		return nil, err
	}
	if err := rt.forward(a, 0); err != nil {
		return nil, err
	}
	if err := rt.ctx.WrapStream(0).Synchronize(); err != nil {
		return nil, fmt.Errorf("gdn: forward: %w", err)
	}
	out := l.total - l.inBytes
	if err := rt.ctx.CopyToHost(unsafe.Pointer(&set.host[l.inBytes]), set.dev.Offset(l.inBytes), out); err != nil {
		return nil, fmt.Errorf("gdn: download: %w", err)
	}
	return l.decodeOutputs(set.host), nil
}

// orDefault returns d, or def when d is unset.
func orDefault(d, def Dtype) Dtype {
	if d == DtypeInvalid {
		return def
	}
	return d
}
