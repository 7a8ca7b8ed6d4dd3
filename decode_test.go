package gdn

import (
	"errors"
	"reflect"
	"testing"

	"github.com/gdnjit/gdn/internal/problem"
)

// Decode hands the call down field for field, with its stream, and the
// device's answer back; a nil call is an ArgError naming args, a closed
// Runtime ErrClosed.
func TestDecodeHandsCallDown(t *testing.T) {
	rt, rec := openRecorded()
	ten := func(i int) Tensor {
		return Tensor{Ptr: uintptr(i) << 20, Bytes: 64 * i, Dtype: FP32, Shape: []int{i, 2}}
	}
	a := DecodeArgs{Q: ten(1), K: ten(2), V: ten(3), G: ten(4), Beta: ten(5), ALog: ten(6), DtBias: ten(7),
		Pool: StatePool{States: ten(8), Slots: []int{3, -1}, SlotsDevice: ten(9)}, O: ten(10), TokenStates: ten(11),
		CuSeqlens: []int{0, 1, 3}, CuSeqlensDevice: ten(12), Scale: 0.25, Layout: StateVK,
		L2Norm: true, GateInKernel: true, BetaLogits: true, NegEigval: true}
	if err := rt.Decode(&a, 0x9000); err != nil || rec.stream != 0x9000 || rec.calls != 1 {
		t.Fatalf("Decode: %v, stream %#x, %d calls", err, rec.stream, rec.calls)
	}
	p := func(x Tensor) problem.Tensor { return problem.Tensor(x) }
	want := problem.Decode{Q: p(a.Q), K: p(a.K), V: p(a.V), G: p(a.G), Beta: p(a.Beta), ALog: p(a.ALog), DtBias: p(a.DtBias),
		Pool: problem.Pool{States: p(a.Pool.States), Slots: a.Pool.Slots, SlotsDevice: p(a.Pool.SlotsDevice)},
		O:    p(a.O), TokenStates: p(a.TokenStates), CuSeqlens: a.CuSeqlens, CuSeqlensDevice: p(a.CuSeqlensDevice),
		Scale: 0.25, Layout: problem.LayoutVK, L2Norm: true, GateInKernel: true, BetaLogits: true, NegEigval: true}
	if !reflect.DeepEqual(rec.decode, want) {
		t.Errorf("handed down\n%+v\nwant\n%+v", rec.decode, want)
	}
	// Every field of the call reaches the layer below (a field added to one
	// side only shows here as a zero); SeqRun is the mixed call's own.
	v := reflect.ValueOf(rec.decode)
	for i := range v.NumField() {
		if v.Field(i).IsZero() && v.Type().Field(i).Name != "SeqRun" {
			t.Errorf("field %s not handed down", v.Type().Field(i).Name)
		}
	}
	rec.err = errors.New("launch failed")
	if err := rt.Decode(&a, 0); err != rec.err {
		t.Errorf("device error: %v", err)
	}
	var ae *ArgError
	if err := rt.Decode(nil, 0); !errors.As(err, &ae) || ae.Arg != "args" {
		t.Errorf("Decode(nil): %v", err)
	}
	rt.guard.open.Store(false)
	if err := rt.Decode(&a, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("closed: %v", err)
	}
	if MaxDecodeTokens != 8 {
		t.Errorf("MaxDecodeTokens = %d", MaxDecodeTokens)
	}
}

// ForwardMixed hands the whole call down as the full forward's arguments,
// marked as a mixed call's.
func TestForwardMixedHandsCallDown(t *testing.T) {
	rt, rec := openRecorded()
	a := FullArgs{CuSeqlens: []int{0, 1, 300}, Pool: StatePool{Slots: []int{0, 1}}, Layout: StateVK, BetaLogits: true}
	if err := rt.ForwardMixed(&a, 0x77); err != nil || !rec.mixed || rec.stream != 0x77 {
		t.Fatalf("ForwardMixed: %v, mixed %v, stream %#x", err, rec.mixed, rec.stream)
	}
	if !reflect.DeepEqual(rec.full, a.full()) {
		t.Errorf("handed down %+v, want %+v", rec.full, a.full())
	}
	if err := rt.ForwardMixed(nil, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil args: %v", err)
	}
	rt.Close()
	if err := rt.ForwardMixed(&a, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}
