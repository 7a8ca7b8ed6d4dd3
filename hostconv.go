package gdn

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gdnjit/gdn/dtype"
)

// Conversions between host float32 values and the device encoding of a
// tensor, spread over the machine's cores: ForwardHost converts hundreds of
// megabytes per call, which on one core takes longer than the PCIe copy.

// convChunk is the number of elements one goroutine converts at a time:
// large enough to amortise the hand-off, small enough to balance the load.
const convChunk = 1 << 17

// parallelFor calls fn on consecutive ranges covering [0, n), from up to
// GOMAXPROCS goroutines, and returns when all are done.
func parallelFor(n int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), (n+convChunk-1)/convChunk)
	if workers <= 1 {
		fn(0, n)
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(convChunk)) - convChunk
				if lo >= n {
					return
				}
				fn(lo, min(lo+convChunk, n))
			}
		}()
	}
	wg.Wait()
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

// encodeFloats writes src into dst in dt: BF16 and FP16 rounded to nearest
// even, FP32 as it is. dst holds len(src)*dt.Size() bytes.
func encodeFloats(dst []byte, dt Dtype, src []float32) {
	switch dt {
	case FP32:
		d := asFloat32(dst, len(src))
		parallelFor(len(src), func(lo, hi int) { copy(d[lo:hi], src[lo:hi]) })
	case BF16:
		d := asUint16(dst, len(src))
		parallelFor(len(src), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				d[i] = dtype.RoundBF16(src[i])
			}
		})
	case FP16:
		d := asUint16(dst, len(src))
		parallelFor(len(src), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				d[i] = dtype.RoundFP16(src[i])
			}
		})
	}
}

// decodeFloats widens n elements of dt in src to float32 (exact).
func decodeFloats(src []byte, dt Dtype, n int) []float32 {
	out := make([]float32, n)
	switch dt {
	case FP32:
		s := asFloat32(src, n)
		parallelFor(n, func(lo, hi int) { copy(out[lo:hi], s[lo:hi]) })
	case BF16:
		s := asUint16(src, n)
		parallelFor(n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				out[i] = dtype.BF16ToFloat32(s[i])
			}
		})
	case FP16:
		s := asUint16(src, n)
		parallelFor(n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				out[i] = dtype.FP16ToFloat32(s[i])
			}
		})
	}
	return out
}
