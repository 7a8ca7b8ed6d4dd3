package driver

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestArgsLayout(t *testing.T) {
	var tm TensorMap
	for i := range tm {
		tm[i] = byte(i)
	}
	a := new(Args).
		Int32(-3).         // 0..4
		Ptr(0x1122334455). // 8..16 (aligned up from 4)
		Float32(1.5).      // 16..20
		Uint32(7).         // 20..24
		Int64(-9).         // 24..32
		Bytes(tm[:], 64).  // 64..192
		Uint32(5)          // 192..196
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	wantOffs := []int{0, 8, 16, 20, 24, 64, 192}
	if a.Len() != len(wantOffs) {
		t.Fatalf("Len = %d, want %d", a.Len(), len(wantOffs))
	}
	for i, w := range wantOffs {
		if got := a.Offset(i); got != w {
			t.Errorf("Offset(%d) = %d, want %d", i, got, w)
		}
	}
	if a.Size() != 196 {
		t.Errorf("Size = %d, want 196", a.Size())
	}
	b := a.Buffer()
	le := binary.LittleEndian
	if v := int32(le.Uint32(b[0:])); v != -3 {
		t.Errorf("int32 = %d", v)
	}
	for _, i := range []int{4, 5, 6, 7} {
		if b[i] != 0 {
			t.Errorf("padding byte %d = %d", i, b[i])
		}
	}
	if v := le.Uint64(b[8:]); v != 0x1122334455 {
		t.Errorf("ptr = %#x", v)
	}
	if v := math.Float32frombits(le.Uint32(b[16:])); v != 1.5 {
		t.Errorf("float32 = %v", v)
	}
	if v := le.Uint32(b[20:]); v != 7 {
		t.Errorf("uint32 = %d", v)
	}
	if v := int64(le.Uint64(b[24:])); v != -9 {
		t.Errorf("int64 = %d", v)
	}
	for i := 0; i < 128; i++ {
		if b[64+i] != byte(i) {
			t.Fatalf("tensor map byte %d = %d", i, b[64+i])
		}
	}
	if v := le.Uint32(b[192:]); v != 5 {
		t.Errorf("trailing uint32 = %d", v)
	}
	if a.Offset(7) != -1 || a.Offset(-1) != -1 {
		t.Error("Offset out of range should be -1")
	}
	// Buffer is a copy.
	b[0] = 99
	if a.Buffer()[0] == 99 {
		t.Error("Buffer aliases the Args storage")
	}
}

func TestArgsNilAndReset(t *testing.T) {
	var a *Args
	if a.Len() != 0 || a.Size() != 0 || a.Err() != nil || a.Buffer() != nil || a.Offset(0) != -1 {
		t.Error("nil Args is not empty")
	}
	a.Reset() // must not panic
	b := a.Float64(2).Uint64(3)
	if b == nil || b.Len() != 2 || b.Offset(1) != 8 || b.Size() != 16 {
		t.Fatalf("chain from nil: len %d size %d", b.Len(), b.Size())
	}
	b.Reset()
	if b.Len() != 0 || b.Size() != 0 {
		t.Error("Reset did not empty")
	}
	b.Int32(1)
	if b.Offset(0) != 0 || b.Size() != 4 {
		t.Error("reuse after Reset")
	}
}

func TestArgsErrors(t *testing.T) {
	for _, align := range []int{0, 3, -8, 512} {
		a := new(Args).Int32(1).Bytes([]byte{1, 2}, align).Int32(2)
		if a.Err() == nil {
			t.Errorf("align %d: no error", align)
		}
		if a.Len() != 1 {
			t.Errorf("align %d: Len = %d after error, want 1", align, a.Len())
		}
	}
	if new(Args).Bytes(nil, 8).Err() == nil {
		t.Error("empty Bytes: no error")
	}
	if err := new(Args).Bytes(make([]byte, 3), 1).Err(); err != nil {
		t.Errorf("align 1: %v", err)
	}
}
