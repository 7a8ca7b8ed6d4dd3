package gdn

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/gdnjit/gdn/driver"
)

// Moving a host call's tensors to the device and back. Every tensor of a
// call lives in one block, at an aligned offset, in its device encoding:
// inputs first, outputs after. The same offsets serve the device
// allocation and the host staging buffer, so one copy moves all inputs and
// one all outputs, and one allocation holds everything.

// layoutAlign separates tensors within the block: cudaMalloc's alignment,
// more than any tensor needs (16 bytes).
const layoutAlign = 256

// layoutSlot is one tensor of a layout.
type layoutSlot struct {
	field func(*CoreArgs) *Tensor // which tensor of CoreArgs it is
	t     *Tensor                 // that field of hostLayout.args
	off   int                     // byte offset in the block
	src   []float32               // host values of a floating-point input
	ints  []int                   // host values of cu_seqlens
}

// The tensors of CoreArgs, for layoutSlot.field.
var (
	fieldQ    = func(a *CoreArgs) *Tensor { return &a.Q }
	fieldK    = func(a *CoreArgs) *Tensor { return &a.K }
	fieldV    = func(a *CoreArgs) *Tensor { return &a.V }
	fieldG    = func(a *CoreArgs) *Tensor { return &a.G }
	fieldBeta = func(a *CoreArgs) *Tensor { return &a.Beta }
	fieldA    = func(a *CoreArgs) *Tensor { return &a.A }
	fieldH0   = func(a *CoreArgs) *Tensor { return &a.H0 }
	fieldCu   = func(a *CoreArgs) *Tensor { return &a.CuSeqlensDevice }
	fieldO    = func(a *CoreArgs) *Tensor { return &a.O }
	fieldHt   = func(a *CoreArgs) *Tensor { return &a.Ht }
)

// hostLayout places the tensors of one HostCoreArgs call in a block.
type hostLayout struct {
	args    CoreArgs // Dtype, Shape and Bytes set; Ptr set by bind
	in, out []layoutSlot
	inBytes int // inputs occupy [0, inBytes)
	total   int // outputs occupy [inBytes, total)
}

// newHostLayout checks h (errors name the argument, as Forward's do) and
// lays its tensors out.
func newHostLayout(h *HostCoreArgs) (*hostLayout, error) {
	if h == nil {
		return nil, argErrorf("args", "nil *HostCoreArgs")
	}
	if dim, msg := checkSizes(h.B, h.T, h.Hq, h.Hv); msg != "" {
		return nil, argErrorf(dim, "%s", msg)
	}
	if h.Dtype != BF16 && h.Dtype != FP16 {
		return nil, argErrorf("Dtype", "%v, want bf16 or fp16", h.Dtype)
	}
	betaDt, aDt, seqDt := orDefault(h.BetaDtype, FP32), orDefault(h.ADtype, FP32), orDefault(h.SeqlensDtype, Int32)
	if betaDt != FP32 && betaDt != h.Dtype {
		return nil, argErrorf("BetaDtype", "%v, want fp32 or the input dtype %v", betaDt, h.Dtype)
	}
	if aDt != FP32 && aDt != BF16 {
		return nil, argErrorf("ADtype", "%v, want fp32 or bf16", aDt)
	}
	if seqDt != Int32 && seqDt != Int64 {
		return nil, argErrorf("SeqlensDtype", "%v, want int32 or int64", seqDt)
	}
	n := h.B
	if h.CuSeqlens != nil {
		if err := checkCuSeqlens(h.CuSeqlens, h.B, h.T); err != nil {
			return nil, err
		}
		n = len(h.CuSeqlens) - 1
		if seqDt == Int32 && h.CuSeqlens[n] > math.MaxInt32 {
			return nil, argErrorf("cu_seqlens", "offset %d does not fit int32", h.CuSeqlens[n])
		}
	}
	bt := func(last ...int) []int { return append([]int{h.B, h.T}, last...) }
	state := []int{n, h.Hv, HeadDim, HeadDim}

	l := &hostLayout{args: CoreArgs{Scale: h.Scale, CuSeqlens: h.CuSeqlens}}
	// slot describes one tensor of l.args and returns its layout slot.
	slot := func(field func(*CoreArgs) *Tensor, dt Dtype, shape []int) layoutSlot {
		t := field(&l.args)
		*t = Tensor{Dtype: dt, Shape: shape}
		t.Bytes = t.Elems() * dt.Size()
		return layoutSlot{field: field, t: t}
	}
	input := func(name string, field func(*CoreArgs) *Tensor, dt Dtype, shape []int, src []float32) error {
		s := slot(field, dt, shape)
		if len(src) != s.t.Elems() {
			return argErrorf(name, "%d values, want %d for B=%d T=%d Hq=%d Hv=%d", len(src), s.t.Elems(), h.B, h.T, h.Hq, h.Hv)
		}
		s.src = src
		l.in = append(l.in, s)
		return nil
	}
	for _, in := range []struct {
		name  string
		field func(*CoreArgs) *Tensor
		dt    Dtype
		shape []int
		src   []float32
	}{
		{"q", fieldQ, h.Dtype, bt(h.Hq, HeadDim), h.Q},
		{"k", fieldK, h.Dtype, bt(h.Hq, HeadDim), h.K},
		{"v", fieldV, h.Dtype, bt(h.Hv, HeadDim), h.V},
		{"g", fieldG, FP32, bt(h.Hv), h.G},
		{"beta", fieldBeta, betaDt, bt(h.Hv), h.Beta},
		{"A", fieldA, aDt, bt(h.Hv, ChunkLen), h.A},
	} {
		if err := input(in.name, in.field, in.dt, in.shape, in.src); err != nil {
			return nil, err
		}
	}
	if h.H0 != nil {
		if err := input("h0", fieldH0, FP32, state, h.H0); err != nil {
			return nil, err
		}
	}
	if h.CuSeqlens != nil {
		s := slot(fieldCu, seqDt, []int{len(h.CuSeqlens)})
		s.ints = h.CuSeqlens
		l.in = append(l.in, s)
	}
	l.out = append(l.out, slot(fieldO, h.Dtype, bt(h.Hv, HeadDim)))
	if h.FinalState {
		l.out = append(l.out, slot(fieldHt, FP32, state))
	}

	off := 0
	place := func(slots []layoutSlot) {
		for i := range slots {
			slots[i].off = off
			off += (slots[i].t.Bytes + layoutAlign - 1) / layoutAlign * layoutAlign
		}
	}
	place(l.in)
	l.inBytes = off
	place(l.out)
	l.total = off
	return l, nil
}

// encodeInputs writes every input in its device encoding into buf, which
// holds at least inBytes bytes, on all cores.
func (l *hostLayout) encodeInputs(buf []byte) {
	l.encodeInts(buf)
	l.encodeRun(buf, cutPieces(l.in, pieceBytes)).run()
}

// encodeInts writes the integer inputs (cu_seqlens) into buf.
func (l *hostLayout) encodeInts(buf []byte) {
	for _, s := range l.in {
		if s.ints == nil {
			continue
		}
		dst := buf[s.off : s.off+s.t.Bytes]
		for i, v := range s.ints { // checked to fit at layout time
			if s.t.Dtype == Int64 {
				binary.NativeEndian.PutUint64(dst[8*i:], uint64(v))
			} else {
				binary.NativeEndian.PutUint32(dst[4*i:], uint32(v))
			}
		}
	}
}

// encodeRun converts the floating-point inputs of pieces (cut from l.in)
// into buf.
func (l *hostLayout) encodeRun(buf []byte, pieces []convPiece) *convRun {
	return &convRun{pieces: pieces, work: func(p *convPiece, lo, hi int) {
		s := &l.in[p.slot]
		encodeRange(buf[s.off:s.off+s.t.Bytes], s.t.Dtype, s.src, lo, hi)
	}}
}

// bind returns the call's CoreArgs for a block at device address base.
func (l *hostLayout) bind(base driver.DevicePtr) *CoreArgs {
	a := l.args
	for _, slots := range [][]layoutSlot{l.in, l.out} {
		for _, s := range slots {
			s.field(&a).Ptr = uintptr(base.Offset(s.off))
		}
	}
	return &a
}

// results points res.O (and res.Ht when the call returns the final state)
// at slices of the outputs' lengths, reusing their arrays when large
// enough, and returns them in the order of l.out. Without a final state,
// res.Ht keeps its array at length 0.
func (l *hostLayout) results(res *HostCoreResult) [][]float32 {
	fit := func(x []float32, n int) []float32 {
		if cap(x) >= n {
			return x[:n]
		}
		return make([]float32, n)
	}
	res.Ht = res.Ht[:0]
	dsts := make([][]float32, len(l.out))
	for i, s := range l.out {
		if s.t == fieldO(&l.args) {
			res.O = fit(res.O, s.t.Elems())
			dsts[i] = res.O
		} else {
			res.Ht = fit(res.Ht, s.t.Elems())
			dsts[i] = res.Ht
		}
	}
	return dsts
}

// decodeRun widens the outputs of pieces (cut from l.out) in buf, the
// whole block as copied back from the device, into dsts (from results).
func (l *hostLayout) decodeRun(buf []byte, dsts [][]float32, pieces []convPiece) *convRun {
	return &convRun{pieces: pieces, work: func(p *convPiece, lo, hi int) {
		s := &l.out[p.slot]
		decodeRange(dsts[p.slot], buf[s.off:s.off+s.t.Bytes], s.t.Dtype, lo, hi)
	}}
}

// decodeOutputs widens the outputs in buf (the whole block, as copied back
// from the device) to float32 on all cores, into res (see results).
func (l *hostLayout) decodeOutputs(buf []byte, res *HostCoreResult) {
	l.decodeRun(buf, l.results(res), cutPieces(l.out, pieceBytes)).run()
}

// poisonOutputs fills every output with NaN on the legacy default stream,
// so that an element the kernel does not write cannot pass for a result.
func poisonOutputs(ctx *driver.Context, a *CoreArgs) error {
	for _, t := range []Tensor{a.O, a.Ht} {
		if !t.Present() {
			continue
		}
		var err error
		if t.Dtype.Size() == 2 {
			err = ctx.MemsetD16(driver.DevicePtr(t.Ptr), 0x7fff, t.Elems(), nil)
		} else {
			err = ctx.MemsetD32(driver.DevicePtr(t.Ptr), 0x7fffffff, t.Elems(), nil)
		}
		if err != nil {
			return fmt.Errorf("gdn: fill outputs with NaN: %w", err)
		}
	}
	return nil
}

// DeviceCoreArgs are device copies of a HostCoreArgs call, from UploadCore:
// Args is ready for Forward (outputs allocated and filled with NaN), and
// Free releases the memory behind it.
type DeviceCoreArgs struct {
	Args   *CoreArgs
	rt     *Runtime
	layout *hostLayout
	base   driver.DevicePtr
}

// UploadCore allocates device memory for a call described by h (one
// allocation for every tensor), converts the inputs to their device dtypes
// on all cores, copies them, and fills the outputs with NaN. The data is on
// the device when it returns, so Args may be used on any stream. It is how
// tests, benchmarks and examples that call Forward themselves set up; Free
// the result when done.
func (rt *Runtime) UploadCore(h *HostCoreArgs) (*DeviceCoreArgs, error) {
	l, err := newHostLayout(h)
	if err != nil {
		return nil, err
	}
	if err := rt.enter(); err != nil {
		return nil, err
	}
	defer rt.leave()
	base, err := rt.ctx.Alloc(l.total)
	if err != nil {
		return nil, fmt.Errorf("gdn: allocate %d bytes: %w", l.total, err)
	}
	d := &DeviceCoreArgs{rt: rt, layout: l, base: base, Args: l.bind(base)}
	// Ordinary Go memory: a one-off upload would spend longer pinning a
	// buffer than the pinning saves on the copy.
	staging := make([]byte, l.inBytes)
	l.encodeInputs(staging)
	err = rt.ctx.CopyToDevice(base, unsafe.Pointer(&staging[0]), l.inBytes)
	if err == nil {
		err = poisonOutputs(rt.ctx, d.Args)
	}
	if err == nil {
		// A copy from pageable memory may return before its data lands, and
		// callers go on with streams of their own: wait for the legacy
		// stream the copy and the poison ran on. Not the whole context: a
		// context-wide synchronisation fails while any stream of it is
		// capturing a graph (another goroutine's Forward may be).
		err = rt.ctx.WrapStream(0).Synchronize()
	}
	if err != nil {
		rt.ctx.Free(base)
		return nil, fmt.Errorf("gdn: upload: %w", err)
	}
	return d, nil
}

// Download copies the outputs (o, and ht when the call asked for it) back
// and widens them to float32. Synchronise the stream that wrote them first.
func (d *DeviceCoreArgs) Download() (*HostCoreResult, error) {
	if err := d.rt.enter(); err != nil {
		return nil, err
	}
	defer d.rt.leave()
	l := d.layout
	buf := make([]byte, l.total)
	if err := d.rt.ctx.CopyToHost(unsafe.Pointer(&buf[l.inBytes]), d.base.Offset(l.inBytes), l.total-l.inBytes); err != nil {
		return nil, fmt.Errorf("gdn: download: %w", err)
	}
	res := &HostCoreResult{}
	l.decodeOutputs(buf, res)
	return res, nil
}

// Free releases the device memory; Args must not be used afterwards. A
// second Free does nothing.
func (d *DeviceCoreArgs) Free() error {
	if d == nil || d.base == 0 {
		return nil
	}
	if err := d.rt.enter(); err != nil {
		return err
	}
	defer d.rt.leave()
	base := d.base
	d.base, d.Args = 0, nil
	return d.rt.ctx.Free(base)
}
