package kernsrc

import (
	"encoding/binary"
	"testing"
)

// The prep and scan blocks are laid out as the kernels' parameter spaces:
// pointers 8 bytes apart from 0, then the 32-bit scalars, each value where
// its field says.
func TestParamBlocks(t *testing.T) {
	pp := PrepParams{Q: 1, K: 2, QN: 3, KN: 4, Beta: 5, G: 6, ALog: 7, DtBias: 8, GCum: 9, A2: 10, Chunks: 11, Hq: 12, Hv: -13, Flags: 14}
	var pb [PrepParamsBytes]byte
	for i := range pb {
		pb[i] = 0xff
	}
	pp.Pack(&pb)
	checkBlock(t, "prep", pb[:], PrepParamFields(), prepBytes, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, uint64(uint32(0xfffffff3)), 14})
	sp := ScanParams{BM: 1, H0: 2, Starts: 3, First: 4, P: 5, Hv: 6, N: 7}
	var sb [ScanParamsBytes]byte
	sp.Pack(&sb)
	checkBlock(t, "scan", sb[:], ScanParamFields(), scanBytes, []uint64{1, 2, 3, 4, 5, 6, 7})
}

func checkBlock(t *testing.T, name string, b []byte, fields []ParamField, size int, want []uint64) {
	t.Helper()
	if size != len(b) || len(fields) != len(want) {
		t.Fatalf("%s: %d fields in %d bytes, block of %d", name, len(fields), size, len(b))
	}
	end := 0
	for i, f := range fields {
		if f.Offset != end || (f.Size != 8 && f.Size != 4) || f.Offset%f.Size != 0 {
			t.Errorf("%s field %d: %+v after byte %d", name, i, f, end)
		}
		end = f.Offset + f.Size
		got := uint64(binary.LittleEndian.Uint32(b[f.Offset:]))
		if f.Size == 8 {
			got = binary.LittleEndian.Uint64(b[f.Offset:])
		}
		if got != want[i] {
			t.Errorf("%s field %d = %#x, want %#x", name, i, got, want[i])
		}
	}
	if end != len(b) {
		t.Errorf("%s: fields end at %d of %d bytes", name, end, len(b))
	}
}

// Every tensor map the kernel reads or writes moves one stage tile a box
// (hopper_params.cuh static_asserts HopperBoxBytes against its tile): q, k,
// v and o in 16-bit rows of 64, A in fp32 rows of 32 or 16-bit ones of 64.
func TestHopperTensorMaps(t *testing.T) {
	for _, m := range []HopperTensorMap{
		{ElemBytes: 2, Inner: 128, Heads: 4, T: 100, B: 2, BoxInner: 64},
		{ElemBytes: 4, Inner: 64, Heads: 8, T: 100, B: 1, BoxInner: 32},
		{ElemBytes: 2, Inner: 64, Heads: 8, T: 100, B: 1, BoxInner: 64},
	} {
		if m.BoxBytes() != HopperBoxBytes || m.BoxInner*m.ElemBytes != 128 {
			t.Errorf("%+v: box of %d bytes, rows of %d", m, m.BoxBytes(), m.BoxInner*m.ElemBytes)
		}
		d, s, b := m.Dims(), m.Strides(), m.Box()
		row := uint64(m.Inner * m.ElemBytes)
		if d[0] != uint64(m.Inner) || d[3] != uint64(m.B) || s[0] != row || s[2] != row*uint64(m.Heads*m.T) || b[2] != 64 || b[1] != 1 {
			t.Errorf("%+v: dims %v strides %v box %v", m, d, s, b)
		}
	}
}
