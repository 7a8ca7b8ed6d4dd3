package driver

import (
	"strings"
	"testing"
)

type tiledArgs struct {
	dt      TensorDtype
	base    DevicePtr
	dims    []uint64
	strides []uint64
	box     []uint32
	swizzle Swizzle
}

// validTiled is a 2-D bf16 tensor of 64 rows of 128 elements (256-byte rows)
// with a 32x64 box and the 128-byte swizzle.
func validTiled() tiledArgs {
	return tiledArgs{TensorBF16, 0x7f0000000000, []uint64{128, 64}, []uint64{256}, []uint32{64, 32}, Swizzle128B}
}

func TestValidateTiled(t *testing.T) {
	good := []tiledArgs{
		validTiled(),
		{TensorF32, 0x10000, []uint64{100}, nil, []uint32{4}, SwizzleNone},
		{TensorF16, 0x10000, []uint64{64, 2, 3, 4, 5}, []uint64{128, 256, 768, 3072}, []uint32{32, 1, 1, 1, 1}, Swizzle64B},
	}
	for i, a := range good {
		if err := validateTiled(a.dt, a.base, a.dims, a.strides, a.box, a.swizzle); err != nil {
			t.Errorf("good[%d] rejected: %v", i, err)
		}
	}
	cases := []struct {
		name string
		mod  func(*tiledArgs)
		want string
	}{
		{"dtype", func(a *tiledArgs) { a.dt = 0 }, "element type"},
		{"rank0", func(a *tiledArgs) { a.dims, a.strides, a.box = nil, nil, nil }, "rank 0"},
		{"rank6", func(a *tiledArgs) {
			a.dims, a.strides, a.box = []uint64{8, 1, 1, 1, 1, 1}, []uint64{16, 16, 16, 16, 16}, []uint32{8, 1, 1, 1, 1, 1}
		}, "rank 6"},
		{"strides len", func(a *tiledArgs) { a.strides = []uint64{256, 256} }, "len(strides)"},
		{"box len", func(a *tiledArgs) { a.box = []uint32{64} }, "len(box)"},
		{"nil base", func(a *tiledArgs) { a.base = 0 }, "base address is 0"},
		{"base align", func(a *tiledArgs) { a.base += 8 }, "16-byte aligned"},
		{"dim zero", func(a *tiledArgs) { a.dims[1] = 0 }, "dims[1]"},
		{"dim big", func(a *tiledArgs) { a.dims[0] = 1<<32 + 1 }, "dims[0]"},
		{"stride align", func(a *tiledArgs) { a.strides[0] = 260 }, "strides[0]"},
		{"stride zero", func(a *tiledArgs) { a.strides[0] = 0 }, "strides[0]"},
		{"stride big", func(a *tiledArgs) { a.strides[0] = 1 << 40 }, "strides[0]"},
		{"box zero", func(a *tiledArgs) { a.box[1] = 0 }, "box[1]"},
		{"box big", func(a *tiledArgs) { a.box[1] = 257 }, "box[1]"},
		{"box inner bytes", func(a *tiledArgs) { a.box[0] = 4 }, "multiple of 16 bytes"},
		{"swizzle span", func(a *tiledArgs) { a.swizzle = Swizzle64B }, "exceeds"},
		{"swizzle invalid", func(a *tiledArgs) { a.swizzle = 9 }, "invalid swizzle"},
	}
	for _, c := range cases {
		a := validTiled()
		c.mod(&a)
		err := validateTiled(a.dt, a.base, a.dims, a.strides, a.box, a.swizzle)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "driver: EncodeTiled: ") {
			t.Errorf("%s: error %q does not mention %q", c.name, err, c.want)
		}
		if _, err2 := EncodeTiled(a.dt, a.base, a.dims, a.strides, a.box, a.swizzle); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("%s: EncodeTiled returned %v, want the validation error", c.name, err2)
		}
	}
}

func TestTensorEnums(t *testing.T) {
	if TensorBF16.Size() != 2 || TensorF16.Size() != 2 || TensorF32.Size() != 4 || TensorDtype(0).Size() != 0 {
		t.Error("element sizes")
	}
	if SwizzleNone.Bytes() != 0 || Swizzle32B.Bytes() != 32 || Swizzle64B.Bytes() != 64 || Swizzle128B.Bytes() != 128 || Swizzle(4).Bytes() != -1 {
		t.Error("swizzle spans")
	}
	if TensorBF16.String() != "bf16" || Swizzle128B.String() != "swizzle128B" || SwizzleNone.String() != "swizzleNone" {
		t.Error("names")
	}
}
