package gdn

import (
	"reflect"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/problem"
)

// setEvery fills every field of the struct x points to with a value of its
// own (tensors get distinct pointers, sizes and shapes), so that a
// conversion that forgets a field shows.
func setEvery(t *testing.T, x any) {
	t.Helper()
	v := reflect.ValueOf(x).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Interface().(type) {
		case Tensor:
			f.Set(reflect.ValueOf(Tensor{Ptr: uintptr(i+1) << 20, Bytes: 64 * (i + 1), Dtype: FP32, Shape: []int{i + 1, 2}}))
		case []int:
			f.Set(reflect.ValueOf([]int{0, i, 2 * i}))
		case float32:
			f.SetFloat(0.25)
		case bool:
			f.SetBool(true)
		case StatePool:
			f.Set(reflect.ValueOf(StatePool{States: Tensor{Ptr: uintptr(i+1) << 20, Bytes: 64, Dtype: BF16, Shape: []int{3, 2, 128, 128}},
				Slots: []int{i, -1}, SlotsDevice: Tensor{Ptr: uintptr(i+2) << 20, Bytes: 8, Dtype: Int32, Shape: []int{2}}}))
		case StateLayout:
			f.Set(reflect.ValueOf(StateVK))
		case int:
			f.SetInt(int64(64 * (i + 1)))
		default:
			t.Fatalf("field %s of %T: no value for its type", v.Type().Field(i).Name, x)
		}
	}
}

// The arguments reach the layers below field for field, and come back so
// (UploadCore and UploadFull return what the layers bound).
func TestArgsConversions(t *testing.T) {
	var c CoreArgs
	setEvery(t, &c)
	if back := coreArgsOf(c.core()); !reflect.DeepEqual(*back, c) {
		t.Errorf("CoreArgs through core() and back:\n%+v\nwant\n%+v", *back, c)
	}
	var f FullArgs
	setEvery(t, &f)
	if back := fullArgsOf(f.full()); !reflect.DeepEqual(*back, f) {
		t.Errorf("FullArgs through full() and back:\n%+v\nwant\n%+v", *back, f)
	}
	// A caller's arguments carry none of the full forward's own flags.
	if in := c.core(); in.APrepared || in.QKFP16 || in.QKNorm || in.Fused || in.GateInKernel || in.ALog.Present() || in.DtBias.Present() {
		t.Errorf("a caller's core arguments carry internal flags: %+v", in)
	}
}

// The constants users see are the ones validation checks against.
func TestConstants(t *testing.T) {
	if HeadDim != problem.HeadDim || ChunkLen != problem.ChunkLen {
		t.Errorf("HeadDim %d, ChunkLen %d; validation's %d, %d", HeadDim, ChunkLen, problem.HeadDim, problem.ChunkLen)
	}
}

func TestTensor(t *testing.T) {
	x := Tensor{Ptr: 1 << 20, Dtype: BF16, Shape: []int{2, 3, 4}}
	if !x.Present() || x.Elems() != 24 || (Tensor{}).Present() || (Tensor{}).Elems() != 1 {
		t.Errorf("Present %v, Elems %d", x.Present(), x.Elems())
	}
}

// gdn's dtype names are package dtype's.
func TestDtypes(t *testing.T) {
	for _, d := range []Dtype{BF16, FP16, FP32, Int32, Int64} {
		got, err := dtype.Parse(d.String())
		if err != nil || got != d {
			t.Errorf("dtype.Parse(%q) = %v, %v", d.String(), got, err)
		}
	}
	if BF16.Size() != 2 || FP32.Size() != 4 || Int64.Size() != 8 || DtypeInvalid.Size() != 0 {
		t.Error("sizes")
	}
}
