// Package dtype names the element types gdn's tensors hold and converts
// between float32 and the two 16-bit floating-point formats the kernels
// read, rounding exactly as the GPU does. It is a leaf: the root package,
// the reference (ref) and the tools share it, so a dtype means one thing
// everywhere.
package dtype

import "fmt"

// Dtype is the element type of a tensor.
type Dtype int

// The element types gdn reads and writes. The zero value is Invalid, so an
// unset field can mean "the default" to whoever reads it.
const (
	Invalid Dtype = iota
	BF16          // bfloat16
	FP16          // IEEE half precision
	FP32          // IEEE single precision
	Int32
	Int64
)

// Size is the width of one element in bytes (0 for Invalid).
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

// String returns the usual short name: bf16, fp16, fp32, int32, int64.
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

// Parse reads "bf16", "fp16", "fp32", "int32" or "int64".
func Parse(s string) (Dtype, error) {
	for _, d := range []Dtype{BF16, FP16, FP32, Int32, Int64} {
		if d.String() == s {
			return d, nil
		}
	}
	return Invalid, fmt.Errorf("unknown dtype %q (want bf16, fp16, fp32, int32 or int64)", s)
}
