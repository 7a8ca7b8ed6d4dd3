package hostpath

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gdnjit/gdn/dtype"
)

// Conversions between host float32 values and the device encoding of a
// tensor, spread over the machine's cores: ForwardHost converts hundreds of
// megabytes per call, which on one core takes longer than the PCIe copy.
//
// The work of a call is cut twice. A piece is a range of one tensor that
// travels in one transfer (pieceBytes of device encoding at most); a task
// is a range of a piece that one goroutine converts at a time (taskElems
// elements). Goroutines take tasks in order, so pieces finish roughly in
// order and the copy of one overlaps the conversion of the next.

// taskElems is the number of elements one goroutine converts at a time:
// large enough to amortise the hand-off (an atomic add), small enough to
// balance the load across cores within a piece.
const taskElems = 1 << 16

// pieceBytes bounds the device bytes of a piece: a transfer of that size
// takes about 0.1 ms at PCIe 5 rates, so the first copy starts early and
// the last one, which nothing overlaps, is short.
const pieceBytes = 4 << 20

// The element conversions below are bit-exact with dtype.RoundBF16,
// dtype.RoundFP16, dtype.BF16ToFloat32 and dtype.FP16ToFloat32 (the tests
// compare every float32 and every 16-bit pattern), written for long runs:
// no calls, no bounds checks in the loop, and the rare cases (NaN, Inf,
// subnormals) as a select or a well-predicted branch.

// roundBF16s writes RoundBF16(src[i]) to dst[i]; len(dst) >= len(src).
// Two elements at a time, as the 32-bit lanes of a uint64: rounding adds
// no carry from one lane into the other for any value but a NaN (the
// largest non-NaN pattern, -Inf, is 0xFF800000), and a pair holding a NaN
// takes the one-element path.
func roundBF16s(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	u := bitsOf(src)
	i := 0
	for ; i+1 < len(u); i += 2 {
		w := uint64(u[i]) | uint64(u[i+1])<<32
		// Bit 31 of a lane of |w| + 0x7FFFFF is set iff the lane is a NaN.
		if (w&0x7FFFFFFF7FFFFFFF+0x007FFFFF007FFFFF)&0x8000000080000000 != 0 {
			dst[i], dst[i+1] = roundBF16(src[i]), roundBF16(src[i+1])
			continue
		}
		w += 0x00007FFF00007FFF + (w>>16)&0x0000000100000001
		dst[i], dst[i+1] = uint16(w>>16), uint16(w>>48)
	}
	if i < len(src) {
		dst[i] = roundBF16(src[i])
	}
}

// roundBF16 is dtype.RoundBF16, for the odd elements of roundBF16s.
func roundBF16(x float32) uint16 {
	b := math.Float32bits(x)
	// Round half to even: add 0x7FFF plus the kept LSB; a carry out of the
	// mantissa bumps the exponent, out of the top exponent gives Inf.
	r := uint16((b + 0x7FFF + (b>>16)&1) >> 16)
	if b&0x7FFFFFFF > 0x7F800000 {
		r = uint16(b>>16) | 0x0040 // NaN: keep it one (quiet bit set)
	}
	return r
}

// roundFP16s writes RoundFP16(src[i]) to dst[i]; len(dst) >= len(src).
func roundFP16s(dst []uint16, src []float32) {
	u := bitsOf(src)
	dst = dst[:len(u)]
	for i, b := range u {
		a := b & 0x7FFFFFFF
		var h uint32
		switch {
		case a < 0x38800000:
			// Below 2^-14, the half normal range: round(|x| / 2^-24). Adding
			// 0.5, whose ulp is 2^-24, makes the FPU round exactly so (to
			// nearest, ties to even); the mantissa bits are the result, up to
			// 0x400 (the smallest normal) when |x| rounds up into it.
			h = math.Float32bits(math.Float32frombits(a)+0.5) - 0x3F000000
		case a < 0x47800000:
			// Normal half, or 65520 and above rounding to Inf: rebias the
			// exponent (127 -> 15), keep 10 mantissa bits rounded half to
			// even; a carry into the exponent is the right answer.
			h = (a - 0x38000000 + 0xFFF + (a>>13)&1) >> 13
		default: // 2^16 and above, Inf, NaN
			h = 0x7C00
			if a > 0x7F800000 {
				h = 0x7E00 | (a>>13)&0x3FF // quiet NaN, top payload bits
			}
		}
		dst[i] = uint16(b>>16)&0x8000 | uint16(h)
	}
}

// widenBF16s writes BF16ToFloat32(src[i]) to dst[i]; len(dst) >= len(src).
func widenBF16s(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = math.Float32frombits(uint32(h) << 16)
	}
}

// widenFP16s writes FP16ToFloat32(src[i]) to dst[i]; len(dst) >= len(src).
func widenFP16s(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, h := range src {
		e := uint32(h) & 0x7C00
		m := uint32(h&0x7FFF) << 13
		var f uint32
		switch e {
		case 0x7C00: // Inf, NaN (payload kept)
			f = m + (255-31)<<23
		case 0: // zero, subnormal: man * 2^-24, exact in float32
			f = math.Float32bits(float32(h&0x3FF) * (1.0 / (1 << 24)))
		default:
			f = m + (127-15)<<23
		}
		dst[i] = math.Float32frombits(uint32(h&0x8000)<<16 | f)
	}
}

// bitsOf views float32 values as their bits: loaded as integers, they go
// straight to integer registers (a []float32 element is loaded into a
// vector register and moved, one more instruction per element).
func bitsOf(x []float32) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
}

// asUint16 and asFloat32 view a byte buffer of a device encoding as its
// elements. buf must hold n elements and be aligned for them (layout
// offsets are 256-byte aligned; pinned and Go allocations more).
func asUint16(buf []byte, n int) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(buf))), n)
}

func asFloat32(buf []byte, n int) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(buf))), n)
}

// encodeRange writes src[lo:hi] into dst, the whole tensor's device
// encoding in dt: dtype.BF16 and dtype.FP16 rounded to nearest even, dtype.FP32 as it is.
func encodeRange(dst []byte, dt dtype.Dtype, src []float32, lo, hi int) {
	switch dt {
	case dtype.FP32:
		copy(asFloat32(dst, len(src))[lo:hi], src[lo:hi])
	case dtype.BF16:
		roundBF16s(asUint16(dst, len(src))[lo:hi], src[lo:hi])
	case dtype.FP16:
		roundFP16s(asUint16(dst, len(src))[lo:hi], src[lo:hi])
	}
}

// decodeRange widens elements [lo, hi) of src, a whole tensor of dt with
// len(dst) elements, into dst (exact).
func decodeRange(dst []float32, src []byte, dt dtype.Dtype, lo, hi int) {
	switch dt {
	case dtype.FP32:
		copy(dst[lo:hi], asFloat32(src, len(dst))[lo:hi])
	case dtype.BF16:
		widenBF16s(dst[lo:hi], asUint16(src, len(dst))[lo:hi])
	case dtype.FP16:
		widenFP16s(dst[lo:hi], asUint16(src, len(dst))[lo:hi])
	}
}

// convPiece is a range of elements of one tensor that moves in one
// transfer: bytes [off, off+bytes) of the block.
type convPiece struct {
	slot   int // index in the layout's in or out slots
	lo, hi int // elements
	off    int // byte offset in the block
	bytes  int
}

// cutPieces cuts the floating-point tensors of slots into pieces of at most
// maxBytes of device encoding (cu_seqlens, integers, is left out).
func cutPieces(slots []layoutSlot, maxBytes int) []convPiece {
	var ps []convPiece
	for i, s := range slots {
		if s.ints != nil {
			continue
		}
		size := s.t.Dtype.Size()
		step := max(maxBytes/size, 1)
		for lo, n := 0, s.t.Elems(); lo < n; lo += step {
			hi := min(lo+step, n)
			ps = append(ps, convPiece{slot: i, lo: lo, hi: hi, off: s.off + lo*size, bytes: (hi - lo) * size})
		}
	}
	return ps
}

// convRun converts pieces on up to GOMAXPROCS goroutines, tasks taken in
// order. ready, when not nil, is called once per piece before any of its
// tasks (the first task of the piece calls it; others of the same piece
// wait for it); when it fails, the piece is not converted and run returns
// the first such error. work converts elements [lo, hi) of a piece. done,
// when not nil, is called once per piece, by the goroutine that finished
// its last task.
type convRun struct {
	pieces []convPiece
	ready  func(p int) error
	work   func(p *convPiece, lo, hi int)
	done   func(p int)
}

func (r *convRun) run() error {
	type task struct{ piece, lo, hi int }
	var tasks []task
	left := make([]atomic.Int32, len(r.pieces))
	for i, p := range r.pieces {
		for lo := p.lo; lo < p.hi; lo += taskElems {
			tasks = append(tasks, task{i, lo, min(lo+taskElems, p.hi)})
			left[i].Add(1)
		}
	}
	var onces []sync.Once
	var errs []error
	if r.ready != nil {
		onces, errs = make([]sync.Once, len(r.pieces)), make([]error, len(r.pieces))
	}
	var next atomic.Int64
	worker := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(tasks) {
				return
			}
			t := tasks[i]
			if r.ready != nil {
				onces[t.piece].Do(func() { errs[t.piece] = r.ready(t.piece) })
			}
			if errs == nil || errs[t.piece] == nil {
				r.work(&r.pieces[t.piece], t.lo, t.hi)
			}
			if left[t.piece].Add(-1) == 0 && r.done != nil {
				r.done(t.piece)
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(tasks))
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(worker)
	}
	worker()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
