package problem

import "github.com/gdnjit/gdn/dtype"

// Tensor is a dense, row-major tensor in device memory: gdn.Tensor's twin
// (the same fields, so that package gdn converts one into the other).
type Tensor struct {
	Ptr   uintptr // device address; 0 means absent (only for optional tensors)
	Bytes int     // bytes available from Ptr on
	Dtype dtype.Dtype
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
