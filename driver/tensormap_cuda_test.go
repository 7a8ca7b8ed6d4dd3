//go:build cuda

package driver

import (
	"testing"
)

func TestEncodeTiledDevice(t *testing.T) {
	c := openCtx(t)
	if c.Info().Major < 9 {
		t.Skip("tensor maps need compute capability 9.0")
	}
	const rows, cols = 64, 128
	p, err := c.Alloc(rows * cols * 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(p)
	tm, err := EncodeTiled(TensorBF16, p, []uint64{cols, rows}, []uint64{cols * 2}, []uint32{64, 32}, Swizzle128B)
	if err != nil {
		t.Fatal(err)
	}
	if tm == (TensorMap{}) {
		t.Error("encoded tensor map is all zeros")
	}
	a := new(Args).Ptr(p).Bytes(tm[:], 64)
	if a.Err() != nil || a.Offset(1) != 64 {
		t.Errorf("tensor map argument at %d, %v", a.Offset(1), a.Err())
	}
}
