package gdn

import "fmt"

// Dtype is the element type of a tensor.
type Dtype int

// The element types gdn reads and writes.
const (
	DtypeInvalid Dtype = iota
	BF16               // bfloat16
	FP16               // IEEE half precision
	FP32               // IEEE single precision
	Int32
	Int64
)

// Size is the width of one element in bytes (0 for DtypeInvalid).
func (d Dtype) Size() int {
	switch d {
	case BF16, FP16:
		return 2
	case FP32, Int32:
		return 4
	case Int64:
		return 8
	}
	return 0
}

func (d Dtype) String() string {
	switch d {
	case BF16:
		return "bf16"
	case FP16:
		return "fp16"
	case FP32:
		return "fp32"
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	}
	return fmt.Sprintf("Dtype(%d)", int(d))
}

// ParseDtype reads "bf16", "fp16", "fp32", "int32" or "int64".
func ParseDtype(s string) (Dtype, error) {
	for _, d := range []Dtype{BF16, FP16, FP32, Int32, Int64} {
		if d.String() == s {
			return d, nil
		}
	}
	return DtypeInvalid, fmt.Errorf("gdn: unknown dtype %q (want bf16, fp16, fp32, int32 or int64)", s)
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
// its primary context (what the CUDA runtime API and PyTorch use); 0 is the
// legacy default stream. Calls are ordered on the stream they are given and
// never synchronise it.
type Stream uintptr
