package gdn

import (
	"cmp"
	"fmt"
	"sync"
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
// called, 1 GiB at most in all (a larger result gets none), until Close;
// see resultpool.go.
func (rt *Runtime) ForwardHost(h *HostCoreArgs) (*HostCoreResult, error) {
	return rt.forwardHostNew(newHostLayout(h))
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
	l, err := newHostLayout(h)
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
	return rt.forwardHostNew(newFullHostLayout(h))
}

// ForwardFullHostInto is ForwardFullHost writing the outputs into res,
// reused as ForwardHostInto reuses it: the path for repeated calls.
func (rt *Runtime) ForwardFullHostInto(h *HostFullArgs, res *HostCoreResult) error {
	l, err := newFullHostLayout(h)
	return rt.forwardHostReusing(res, l, err)
}

// forwardHostNew runs a host call, laid out by newHostLayout or
// newFullHostLayout (whose error it returns as it is), into a new result.
func (rt *Runtime) forwardHostNew(l *hostLayout, err error) (*HostCoreResult, error) {
	if err != nil {
		return nil, err
	}
	res := &HostCoreResult{}
	if err := rt.forwardHostInto(l, res, true); err != nil {
		return nil, err
	}
	return res, nil
}

// forwardHostReusing runs a host call, laid out by newHostLayout or
// newFullHostLayout (whose error it returns as it is), into res; a nil res
// is the error whatever the layout's.
func (rt *Runtime) forwardHostReusing(res *HostCoreResult, l *hostLayout, err error) error {
	if res == nil {
		return argErrorf("res", "nil *HostCoreResult")
	}
	if err != nil {
		return err
	}
	return rt.forwardHostInto(l, res, false)
}

// forwardHostInto runs the host call laid out by l into res; fresh
// (ForwardHost's and ForwardFullHost's empty result) takes the result
// slices from rt.spares: a spare prepared since the last call of the shape,
// or slices prepared while the inputs convert.
func (rt *Runtime) forwardHostInto(l *hostLayout, res *HostCoreResult, fresh bool) error {
	if err := rt.enter(); err != nil {
		return err
	}
	defer rt.leave()
	set, err := rt.staging.take(rt.ctx, l.total)
	if err != nil {
		return fmt.Errorf("gdn: allocate %d bytes: %w", l.total, err)
	}
	defer rt.staging.put(rt.ctx, set)
	if !fresh {
		return rt.forwardHost(l, set, func() [][]float32 { return l.results(res) })
	}
	results, end := rt.spares.fresh(l, res)
	err = rt.forwardHost(l, set, results)
	end(err)
	return err
}

// forwardHost runs one host call through a staging set, everything on the
// legacy default stream, which orders the copies, the NaN fill, the kernel
// and the copies back one after the other. results returns the slices the
// outputs are widened into (res's, fitted to the outputs); forwardHost
// calls it once the kernel is queued.
func (rt *Runtime) forwardHost(l *hostLayout, set *stagingSet, results func() [][]float32) (err error) {
	ctx, legacy := rt.ctx, rt.ctx.WrapStream(0)
	host := unsafe.Pointer(&set.host[0])
	// The copies read and write set.host after their calls return: once one
	// is queued, the set must not go back to the pool (where the next call
	// writes it) before the stream has drained, error or not.
	defer func() {
		if err != nil {
			legacy.Synchronize()
		}
	}()

	// Upload: each piece of an input is queued as soon as it is converted
	// (by the goroutine that finished it), and copies while the next pieces
	// convert. cu_seqlens, tiny, goes first.
	var mu sync.Mutex
	var upErr error
	upload := func(off, bytes int) {
		if e := ctx.CopyToDeviceAsync(set.dev.Offset(off), unsafe.Add(host, off), bytes, nil); e != nil {
			mu.Lock()
			upErr = cmp.Or(upErr, e)
			mu.Unlock()
		}
	}
	l.encodeInts(set.host)
	for _, s := range l.in {
		if s.ints != nil {
			upload(s.off, s.t.Bytes)
		}
	}
	in := cutPieces(l.in, pieceBytes)
	enc := l.encodeRun(set.host, in)
	enc.done = func(p int) { upload(in[p].off, in[p].bytes) }
	enc.run()
	if upErr != nil {
		return fmt.Errorf("gdn: upload: %w", upErr)
	}

	if err := l.poisonOutputs(ctx, set.dev); err != nil {
		return err
	}
	if l.full {
		err = rt.forwardFull(l.fullArgs(set.dev), 0)
	} else {
		err = rt.forward(l.coreArgs(set.dev), 0)
	}
	if err != nil {
		return err
	}

	// Download: every piece of the outputs is queued at once, an event
	// after each; a piece is widened as soon as its event has passed, while
	// the later ones copy. The last event passing means the stream has run
	// everything of this call.
	out := cutPieces(l.out, pieceBytes)
	evs, err := set.eventsFor(ctx, len(out))
	if err != nil {
		return fmt.Errorf("gdn: download: %w", err)
	}
	for i, p := range out {
		if err := ctx.CopyToHostAsync(unsafe.Add(host, p.off), set.dev.Offset(p.off), p.bytes, nil); err != nil {
			return fmt.Errorf("gdn: download: %w", err)
		}
		if err := evs[i].Record(nil); err != nil {
			return fmt.Errorf("gdn: download: %w", err)
		}
	}
	dec := l.decodeRun(set.host, results(), out)
	dec.ready = func(p int) error { return evs[p].Synchronize() }
	if err := dec.run(); err != nil {
		return fmt.Errorf("gdn: forward: %w", err)
	}
	return nil
}

// orDefault returns d, or def when d is unset.
func orDefault(d, def Dtype) Dtype {
	if d == DtypeInvalid {
		return def
	}
	return d
}
