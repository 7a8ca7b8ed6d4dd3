package gdn

import (
	"fmt"

	"github.com/gdnjit/gdn/dtype"
)

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

// ParseDtype reads "bf16", "fp16", "fp32", "int32" or "int64".
func ParseDtype(s string) (Dtype, error) {
	d, err := dtype.Parse(s)
	if err != nil {
		return d, fmt.Errorf("gdn: %w", err)
	}
	return d, nil
}

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
func (t Tensor) Elems() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Stream is a CUDA stream handle (a CUstream) of the Runtime's device and
// its primary context (what the CUDA runtime API and PyTorch use); 0 and
// CU_STREAM_LEGACY (1) are the legacy default stream. CU_STREAM_PER_THREAD
// (2) is refused with an error: it means the calling OS thread's default
// stream, and a Go call may run on any thread. Calls are ordered on the
// stream they are given and never synchronise it.
type Stream uintptr
