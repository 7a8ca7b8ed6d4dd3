package driver

import "fmt"

// TensorMap is an encoded CUtensorMap (a TMA descriptor). A kernel takes it
// by value, 64-byte aligned: pass it with Args.Bytes(tm[:], 64).
type TensorMap [128]byte

// TensorDtype is the element type of a tensor map.
type TensorDtype int

// Element types (CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, _FLOAT16, _FLOAT32).
// The zero value is invalid.
const (
	TensorBF16 TensorDtype = iota + 1
	TensorF16
	TensorF32
)

// Size returns the element size in bytes, or 0 for an invalid type.
func (t TensorDtype) Size() int {
	switch t {
	case TensorBF16, TensorF16:
		return 2
	case TensorF32:
		return 4
	}
	return 0
}

// String names the type.
func (t TensorDtype) String() string {
	switch t {
	case TensorBF16:
		return "bf16"
	case TensorF16:
		return "f16"
	case TensorF32:
		return "f32"
	}
	return fmt.Sprintf("TensorDtype(%d)", int(t))
}

// Swizzle is the shared-memory swizzle pattern of a tensor map.
type Swizzle int

// Swizzle patterns (CU_TENSOR_MAP_SWIZZLE_NONE, _32B, _64B, _128B).
const (
	SwizzleNone Swizzle = iota
	Swizzle32B
	Swizzle64B
	Swizzle128B
)

// Bytes returns the swizzle span in bytes (0 for SwizzleNone, -1 if invalid).
func (s Swizzle) Bytes() int {
	switch s {
	case SwizzleNone:
		return 0
	case Swizzle32B:
		return 32
	case Swizzle64B:
		return 64
	case Swizzle128B:
		return 128
	}
	return -1
}

// String names the pattern.
func (s Swizzle) String() string {
	if b := s.Bytes(); b > 0 {
		return fmt.Sprintf("swizzle%dB", b)
	} else if b == 0 {
		return "swizzleNone"
	}
	return fmt.Sprintf("Swizzle(%d)", int(s))
}

// EncodeTiled encodes a tiled tensor map (cuTensorMapEncodeTiled) for the
// tensor of element type dt at device address base. dims are the sizes of
// the dimensions, innermost (contiguous) first; strides are the byte strides
// of dimensions 1..len(dims)-1; box is the tile copied per TMA operation, in
// elements per dimension. Element strides are 1, interleave none, L2
// promotion 128B, out-of-bounds elements read as zeros.
//
// The arguments are checked first against the driver's documented rules,
// with errors naming the argument: rank 1..5, base 16-byte aligned, each dim
// in [1, 2^32], each stride a non-zero multiple of 16 below 2^40, each box
// extent in [1, 256], box[0] times the element size a multiple of 16 bytes
// and, with a swizzle, at most the swizzle span. The driver wants a current
// context on the calling thread (it answers CUDA_ERROR_INVALID_CONTEXT
// otherwise): use Context.EncodeTiled from goroutines that may move between
// threads. The stub build validates, then returns ErrNoCUDA.
func EncodeTiled(dt TensorDtype, base DevicePtr, dims []uint64, strides []uint64, box []uint32, swizzle Swizzle) (TensorMap, error) {
	if err := validateTiled(dt, base, dims, strides, box, swizzle); err != nil {
		return TensorMap{}, err
	}
	return encodeTiled(dt, base, dims, strides, box, swizzle)
}

func validateTiled(dt TensorDtype, base DevicePtr, dims []uint64, strides []uint64, box []uint32, swizzle Swizzle) error {
	es := dt.Size()
	if es == 0 {
		return fmt.Errorf("driver: EncodeTiled: invalid element type %v", dt)
	}
	rank := len(dims)
	if rank < 1 || rank > 5 {
		return fmt.Errorf("driver: EncodeTiled: rank %d (len(dims)) must be 1..5", rank)
	}
	if len(strides) != rank-1 {
		return fmt.Errorf("driver: EncodeTiled: len(strides) = %d, want len(dims)-1 = %d", len(strides), rank-1)
	}
	if len(box) != rank {
		return fmt.Errorf("driver: EncodeTiled: len(box) = %d, want len(dims) = %d", len(box), rank)
	}
	if base == 0 {
		return fmt.Errorf("driver: EncodeTiled: base address is 0")
	}
	if base%16 != 0 {
		return fmt.Errorf("driver: EncodeTiled: base address %v is not 16-byte aligned", base)
	}
	for i, d := range dims {
		if d == 0 || d > 1<<32 {
			return fmt.Errorf("driver: EncodeTiled: dims[%d] = %d must be in [1, 2^32]", i, d)
		}
	}
	for i, s := range strides {
		if s == 0 || s%16 != 0 || s >= 1<<40 {
			return fmt.Errorf("driver: EncodeTiled: strides[%d] = %d bytes must be a non-zero multiple of 16 below 2^40", i, s)
		}
	}
	for i, b := range box {
		if b == 0 || b > 256 {
			return fmt.Errorf("driver: EncodeTiled: box[%d] = %d must be in [1, 256]", i, b)
		}
	}
	inner := int(box[0]) * es
	if inner%16 != 0 {
		return fmt.Errorf("driver: EncodeTiled: box[0] = %d %v elements = %d bytes, must be a multiple of 16 bytes", box[0], dt, inner)
	}
	span := swizzle.Bytes()
	if span < 0 {
		return fmt.Errorf("driver: EncodeTiled: invalid swizzle %v", swizzle)
	}
	if span > 0 && inner > span {
		return fmt.Errorf("driver: EncodeTiled: box[0] = %d %v elements = %d bytes exceeds the %v span of %d bytes", box[0], dt, inner, swizzle, span)
	}
	return nil
}
