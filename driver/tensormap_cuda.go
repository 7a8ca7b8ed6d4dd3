//go:build cuda

package driver

/*
#include <string.h>
#include <cuda.h>

// gdn_encode_tiled encodes into a 64-byte aligned local map, then copies the
// 128 bytes out.
static CUresult gdn_encode_tiled(void* out, int dtype, unsigned rank, CUdeviceptr base,
		const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box, int swizzle) {
	CUtensorMap m;
	cuuint32_t estrides[5] = {1, 1, 1, 1, 1};
	memset(&m, 0, sizeof m);
	CUresult r = cuTensorMapEncodeTiled(&m, (CUtensorMapDataType)dtype, rank, (void*)base,
		dims, strides, box, estrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
		(CUtensorMapSwizzle)swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
		CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	if (r == CUDA_SUCCESS) memcpy(out, &m, sizeof m);
	return r;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// The Go TensorMap must be exactly a CUtensorMap.
const (
	_ = uintptr(unsafe.Sizeof(TensorMap{}) - unsafe.Sizeof(C.CUtensorMap{}))
	_ = uintptr(unsafe.Sizeof(C.CUtensorMap{}) - unsafe.Sizeof(TensorMap{}))
)

func cuTensorDtype(dt TensorDtype) (C.int, error) {
	switch dt {
	case TensorBF16:
		return C.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, nil
	case TensorF16:
		return C.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, nil
	case TensorF32:
		return C.CU_TENSOR_MAP_DATA_TYPE_FLOAT32, nil
	}
	return 0, fmt.Errorf("driver: EncodeTiled: invalid element type %v", dt)
}

// encodeTiled calls cuTensorMapEncodeTiled on validated arguments.
func encodeTiled(dt TensorDtype, base DevicePtr, dims []uint64, strides []uint64, box []uint32, swizzle Swizzle) (TensorMap, error) {
	var tm TensorMap
	cdt, err := cuTensorDtype(dt)
	if err != nil {
		return tm, err
	}
	// Fixed arrays (rank <= 5, validated): four allocations per call, as cgo
	// moves what C is given a pointer to onto the heap. Forward encodes on
	// the first call of an argument set only.
	var cdims, cstrides [5]C.cuuint64_t
	var cbox [5]C.cuuint32_t
	for i, d := range dims {
		cdims[i] = C.cuuint64_t(d)
	}
	for i, s := range strides {
		cstrides[i] = C.cuuint64_t(s)
	}
	for i, b := range box {
		cbox[i] = C.cuuint32_t(b)
	}
	r := C.gdn_encode_tiled(unsafe.Pointer(&tm[0]), cdt, C.uint(len(dims)), C.CUdeviceptr(base),
		&cdims[0], &cstrides[0], &cbox[0], C.int(swizzle))
	if err := check("cuTensorMapEncodeTiled", r); err != nil {
		return TensorMap{}, err
	}
	return tm, nil
}

// EncodeTiled is the package's EncodeTiled with the context made current on
// the calling thread first, which the driver requires.
func (c *Context) EncodeTiled(dt TensorDtype, base DevicePtr, dims []uint64, strides []uint64, box []uint32, swizzle Swizzle) (TensorMap, error) {
	if err := validateTiled(dt, base, dims, strides, box, swizzle); err != nil {
		return TensorMap{}, err
	}
	var tm TensorMap
	err := c.do(func() error {
		var err error
		tm, err = encodeTiled(dt, base, dims, strides, box, swizzle)
		return err
	})
	return tm, err
}
