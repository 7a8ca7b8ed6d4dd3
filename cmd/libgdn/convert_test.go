package main

import (
	"errors"
	"reflect"
	"testing"
	"unsafe"

	"github.com/gdnjit/gdn"
)

func ctensor(ptr uint64, dt int64, shape ...int64) cTensor {
	t := cTensor{Ptr: ptr, Bytes: 1 << 20, Dtype: int32(dt), Ndim: int32(len(shape))}
	copy(t.Shape[:], shape)
	return t
}

// TestFullArgsConvert checks that every field of gdn_full_args lands in
// its gdn.FullArgs field.
func TestFullArgsConvert(t *testing.T) {
	cu := []int64{0, 5, 64}
	slots := []int32{3, -1}
	c := cFullArgs{
		Q: ctensor(0x1000, dtypeBF16, 1, 64, 2, 128), K: ctensor(0x2000, dtypeBF16, 1, 64, 2, 128),
		V: ctensor(0x3000, dtypeBF16, 1, 64, 4, 128), G: ctensor(0x4000, dtypeFP32, 1, 64, 4),
		Beta: ctensor(0x5000, dtypeFP32, 1, 64, 4), ALog: ctensor(0x6000, dtypeFP32, 4),
		DtBias: ctensor(0x7000, dtypeFP32, 4), O: ctensor(0x8000, dtypeBF16, 1, 64, 4, 128),
		CuSeqlens:       cSeqs{Host: &cu[0], N: 3, Device: ctensor(0x9000, dtypeInt64, 3)},
		Pool:            cPool{States: ctensor(0xa000, dtypeFP32, 8, 4, 128, 128), Slots: &slots[0], NSlots: 2, SlotsDevice: ctensor(0xb000, dtypeInt32, 2)},
		Checkpoints:     ctensor(0xc000, dtypeFP32, 1, 4, 128, 128),
		CheckpointEvery: 64, Scale: 0.5, Layout: int32(layoutVK),
		L2Norm: 1, GateInKernel: 1, BetaLogits: 1, NegEigval: 1,
	}
	a, err := fullArgs(&c)
	if err != nil {
		t.Fatal(err)
	}
	want := &gdn.FullArgs{
		Q:         gdn.Tensor{Ptr: 0x1000, Bytes: 1 << 20, Dtype: gdn.BF16, Shape: []int{1, 64, 2, 128}},
		K:         gdn.Tensor{Ptr: 0x2000, Bytes: 1 << 20, Dtype: gdn.BF16, Shape: []int{1, 64, 2, 128}},
		V:         gdn.Tensor{Ptr: 0x3000, Bytes: 1 << 20, Dtype: gdn.BF16, Shape: []int{1, 64, 4, 128}},
		G:         gdn.Tensor{Ptr: 0x4000, Bytes: 1 << 20, Dtype: gdn.FP32, Shape: []int{1, 64, 4}},
		Beta:      gdn.Tensor{Ptr: 0x5000, Bytes: 1 << 20, Dtype: gdn.FP32, Shape: []int{1, 64, 4}},
		ALog:      gdn.Tensor{Ptr: 0x6000, Bytes: 1 << 20, Dtype: gdn.FP32, Shape: []int{4}},
		DtBias:    gdn.Tensor{Ptr: 0x7000, Bytes: 1 << 20, Dtype: gdn.FP32, Shape: []int{4}},
		O:         gdn.Tensor{Ptr: 0x8000, Bytes: 1 << 20, Dtype: gdn.BF16, Shape: []int{1, 64, 4, 128}},
		CuSeqlens: []int{0, 5, 64}, CuSeqlensDevice: gdn.Tensor{Ptr: 0x9000, Bytes: 1 << 20, Dtype: gdn.Int64, Shape: []int{3}},
		Pool: gdn.StatePool{
			States: gdn.Tensor{Ptr: 0xa000, Bytes: 1 << 20, Dtype: gdn.FP32, Shape: []int{8, 4, 128, 128}},
			Slots:  []int{3, -1}, SlotsDevice: gdn.Tensor{Ptr: 0xb000, Bytes: 1 << 20, Dtype: gdn.Int32, Shape: []int{2}},
		},
		Checkpoints:     gdn.Tensor{Ptr: 0xc000, Bytes: 1 << 20, Dtype: gdn.FP32, Shape: []int{1, 4, 128, 128}},
		CheckpointEvery: 64, Scale: 0.5, Layout: gdn.StateVK,
		L2Norm: true, GateInKernel: true, BetaLogits: true, NegEigval: true,
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("fullArgs:\n got %+v\nwant %+v", a, want)
	}
}

// TestCoreAndDecodeArgsConvert checks the fields the core and decode
// arguments have that the full forward's lack.
func TestCoreAndDecodeArgsConvert(t *testing.T) {
	c := cCoreArgs{A: ctensor(0x10, dtypeBF16, 1, 64, 4, 64), H0: ctensor(0x20, dtypeFP32, 1, 4, 128, 128), Ht: ctensor(0x30, dtypeFP32, 1, 4, 128, 128)}
	a, err := coreArgs(&c)
	if err != nil {
		t.Fatal(err)
	}
	if a.A.Ptr != 0x10 || a.A.Dtype != gdn.BF16 || a.H0.Ptr != 0x20 || a.Ht.Ptr != 0x30 || len(a.Ht.Shape) != 4 || a.Layout != gdn.StateKV {
		t.Errorf("coreArgs: %+v", a)
	}
	if a.Q.Shape != nil || a.CuSeqlens != nil || a.Pool.Present() {
		t.Errorf("absent tensors and arrays should convert to zero values: %+v", a)
	}
	d := cDecodeArgs{TokenStates: ctensor(0x40, dtypeBF16, 2, 4, 128, 128), GateInKernel: 1}
	da, err := decodeArgs(&d)
	if err != nil {
		t.Fatal(err)
	}
	if da.TokenStates.Ptr != 0x40 || !da.GateInKernel || da.L2Norm {
		t.Errorf("decodeArgs: %+v", da)
	}
}

// TestConvertRejects checks the errors conversion itself gives, each an
// *ArgError naming the argument.
func TestConvertRejects(t *testing.T) {
	cu := []int64{0, 64}
	for _, tc := range []struct {
		name, arg string
		c         cFullArgs
	}{
		{"ndim 6", "v", cFullArgs{V: cTensor{Ndim: 6}}},
		{"ndim -1", "q", cFullArgs{Q: cTensor{Ndim: -1}}},
		{"negative length", "cu_seqlens", cFullArgs{CuSeqlens: cSeqs{Host: &cu[0], N: -1}}},
		{"NULL host array", "cu_seqlens", cFullArgs{CuSeqlens: cSeqs{N: 2}}},
		{"NULL slots", "slots", cFullArgs{Pool: cPool{NSlots: 1}}},
		{"layout 2", "state_layout", cFullArgs{Layout: 2}},
	} {
		_, err := fullArgs(&tc.c)
		var ae *gdn.ArgError
		if !errors.As(err, &ae) || ae.Arg != tc.arg {
			t.Errorf("%s: err %v, want an *ArgError naming %s", tc.name, err, tc.arg)
		}
		if status(err) != statusInvalidArgument {
			t.Errorf("%s: status %d, want %d", tc.name, status(err), statusInvalidArgument)
		}
	}
}

// TestOptionsConvert checks gdn_open's options, NULL included.
func TestOptionsConvert(t *testing.T) {
	if got := options(nil); !reflect.DeepEqual(got, gdn.Options{}) {
		t.Errorf("options(NULL) = %+v, want the zero Options", got)
	}
	dir := []byte("/tmp/k\x00")
	got := options(&cOptions{Device: 1, SMs: 16, NoGraphs: 1, CacheDir: unsafe.Pointer(&dir[0])})
	if got.Device != 1 || got.SMs != 16 || !got.NoGraphs || got.CacheDir != "/tmp/k" {
		t.Errorf("options = %+v", got)
	}
}
