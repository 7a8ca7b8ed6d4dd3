package gdn

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/ref"
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

// ForwardHost runs the core forward on host slices: it allocates device
// buffers, uploads, fills the outputs with NaN (so an element the kernel
// fails to write cannot pass for a result), runs Forward on the legacy
// default stream, waits for it, downloads and frees. Convenient, not fast: for repeated calls keep
// the data on the device and call Forward.
func (rt *Runtime) ForwardHost(h *HostCoreArgs) (*HostCoreResult, error) {
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
	}
	tok := h.B * h.T
	state := n * h.Hv * HeadDim * HeadDim
	lens := []struct {
		name string
		got  int
		want int
	}{
		{"q", len(h.Q), tok * h.Hq * HeadDim}, {"k", len(h.K), tok * h.Hq * HeadDim},
		{"v", len(h.V), tok * h.Hv * HeadDim}, {"g", len(h.G), tok * h.Hv},
		{"beta", len(h.Beta), tok * h.Hv}, {"A", len(h.A), tok * h.Hv * ChunkLen},
	}
	if h.H0 != nil {
		lens = append(lens, struct {
			name string
			got  int
			want int
		}{"h0", len(h.H0), state})
	}
	for _, l := range lens {
		if l.got != l.want {
			return nil, argErrorf(l.name, "%d values, want %d for B=%d T=%d Hq=%d Hv=%d", l.got, l.want, h.B, h.T, h.Hq, h.Hv)
		}
	}
	if err := rt.enter(); err != nil {
		return nil, err
	}
	defer rt.leave()

	ar := &arena{ctx: rt.ctx}
	defer ar.free()
	var err error
	a := &CoreArgs{Scale: h.Scale, CuSeqlens: h.CuSeqlens}
	shape := func(last ...int) []int { return append([]int{h.B, h.T}, last...) }
	if a.Q, err = ar.upload(h.Dtype, h.Q, shape(h.Hq, HeadDim)); err != nil {
		return nil, err
	}
	if a.K, err = ar.upload(h.Dtype, h.K, shape(h.Hq, HeadDim)); err != nil {
		return nil, err
	}
	if a.V, err = ar.upload(h.Dtype, h.V, shape(h.Hv, HeadDim)); err != nil {
		return nil, err
	}
	if a.G, err = ar.upload(FP32, h.G, shape(h.Hv)); err != nil {
		return nil, err
	}
	if a.Beta, err = ar.upload(betaDt, h.Beta, shape(h.Hv)); err != nil {
		return nil, err
	}
	if a.A, err = ar.upload(aDt, h.A, shape(h.Hv, ChunkLen)); err != nil {
		return nil, err
	}
	stateShape := []int{n, h.Hv, HeadDim, HeadDim}
	if h.H0 != nil {
		if a.H0, err = ar.upload(FP32, h.H0, stateShape); err != nil {
			return nil, err
		}
	}
	if h.CuSeqlens != nil {
		if a.CuSeqlensDevice, err = ar.uploadInts(seqDt, h.CuSeqlens); err != nil {
			return nil, err
		}
	}
	if a.O, err = ar.alloc(h.Dtype, shape(h.Hv, HeadDim)); err != nil {
		return nil, err
	}
	if h.FinalState {
		if a.Ht, err = ar.alloc(FP32, stateShape); err != nil {
			return nil, err
		}
	}
	// Everything below runs on the legacy default stream, after the uploads
	// (copies from pageable memory may return before their data lands; the
	// legacy stream orders after them) and without a context-wide wait.
	stream := rt.ctx.WrapStream(0)
	// Poison the outputs: NaN in every element, 16 or 32 bits wide.
	if err := ar.poison(a.O, stream); err != nil {
		return nil, err
	}
	if a.Ht.Present() {
		if err := ar.poison(a.Ht, stream); err != nil {
			return nil, err
		}
	}
	if err := rt.forward(a, 0); err != nil {
		return nil, err
	}
	if err := stream.Synchronize(); err != nil {
		return nil, fmt.Errorf("gdn: forward: %w", err)
	}
	res := &HostCoreResult{}
	if res.O, err = ar.download(a.O); err != nil {
		return nil, err
	}
	if a.Ht.Present() {
		if res.Ht, err = ar.download(a.Ht); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func orDefault(d, def Dtype) Dtype {
	if d == DtypeInvalid {
		return def
	}
	return d
}

// arena owns the device buffers of one host call and frees them all.
type arena struct {
	ctx  *driver.Context
	ptrs []driver.DevicePtr
}

func (ar *arena) alloc(dt Dtype, shape []int) (Tensor, error) {
	t := Tensor{Dtype: dt, Shape: shape}
	t.Bytes = t.Elems() * dt.Size()
	p, err := ar.ctx.Alloc(t.Bytes)
	if err != nil {
		return Tensor{}, fmt.Errorf("gdn: allocate %d bytes: %w", t.Bytes, err)
	}
	ar.ptrs = append(ar.ptrs, p)
	t.Ptr = uintptr(p)
	return t, nil
}

// upload converts host float32 values to dt (rounding to nearest even for
// 16-bit types) and copies them into a new device tensor.
func (ar *arena) upload(dt Dtype, x []float32, shape []int) (Tensor, error) {
	t, err := ar.alloc(dt, shape)
	if err != nil {
		return t, err
	}
	var src unsafe.Pointer
	switch dt {
	case FP32:
		src = unsafe.Pointer(&x[0])
	case BF16, FP16:
		b := make([]uint16, len(x))
		for i, v := range x {
			if dt == BF16 {
				b[i] = ref.RoundBF16(v)
			} else {
				b[i] = ref.RoundFP16(v)
			}
		}
		src = unsafe.Pointer(&b[0])
	default:
		return t, fmt.Errorf("gdn: cannot upload %v from float32", dt)
	}
	if err := ar.ctx.CopyToDevice(driver.DevicePtr(t.Ptr), src, t.Bytes); err != nil {
		return t, err
	}
	return t, nil
}

func (ar *arena) uploadInts(dt Dtype, x []int) (Tensor, error) {
	t, err := ar.alloc(dt, []int{len(x)})
	if err != nil {
		return t, err
	}
	var src unsafe.Pointer
	if dt == Int64 {
		b := make([]int64, len(x))
		for i, v := range x {
			b[i] = int64(v)
		}
		src = unsafe.Pointer(&b[0])
	} else {
		b := make([]int32, len(x))
		for i, v := range x {
			if v > math.MaxInt32 {
				return t, argErrorf("cu_seqlens", "offset %d does not fit int32", v)
			}
			b[i] = int32(v)
		}
		src = unsafe.Pointer(&b[0])
	}
	return t, ar.ctx.CopyToDevice(driver.DevicePtr(t.Ptr), src, t.Bytes)
}

func (ar *arena) poison(t Tensor, s *driver.Stream) error {
	if t.Dtype.Size() == 2 {
		return ar.ctx.MemsetD16(driver.DevicePtr(t.Ptr), 0x7fff, t.Elems(), s)
	}
	return ar.ctx.MemsetD32(driver.DevicePtr(t.Ptr), 0x7fffffff, t.Elems(), s)
}

func (ar *arena) download(t Tensor) ([]float32, error) {
	out := make([]float32, t.Elems())
	if t.Dtype == FP32 {
		return out, ar.ctx.CopyToHost(unsafe.Pointer(&out[0]), driver.DevicePtr(t.Ptr), t.Bytes)
	}
	b := make([]uint16, t.Elems())
	if err := ar.ctx.CopyToHost(unsafe.Pointer(&b[0]), driver.DevicePtr(t.Ptr), t.Bytes); err != nil {
		return nil, err
	}
	for i, v := range b {
		if t.Dtype == BF16 {
			out[i] = ref.BF16ToFloat32(v)
		} else {
			out[i] = ref.FP16ToFloat32(v)
		}
	}
	return out, nil
}

func (ar *arena) free() {
	for _, p := range ar.ptrs {
		ar.ctx.Free(p)
	}
	ar.ptrs = nil
}
