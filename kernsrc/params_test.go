package kernsrc

import (
	"encoding/binary"
	"math"
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
	sp := ScanParams{BM: 1, H0: 2, Starts: 3, First: 4, P: 5, Hv: 6, N: 7, Flags: 8, Slots: 9, PoolSlots: 10}
	var sb [ScanParamsBytes]byte
	sp.Pack(&sb)
	checkBlock(t, "scan", sb[:], ScanParamFields(), scanBytes, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
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

// The Hopper block: the five tensor maps at 128-byte steps, then the eight
// pointers, then scale and the nine 32-bit fields, then the serving
// layer's three pointers, which end the block.
func TestHopperParamsPack(t *testing.T) {
	var p HopperParams
	for i, m := range []*[128]byte{&p.MapQ, &p.MapK, &p.MapV, &p.MapA, &p.MapO} {
		for j := range m {
			m[j] = byte(16*i + j%16)
		}
	}
	p.G, p.Beta, p.H0, p.Ht, p.CuSeqlens, p.O, p.ALog, p.DtBias = 1, 2, 3, 4, 5, 6, 7, 8
	p.Scale, p.T, p.Hq, p.Hv, p.N, p.Flags, p.NHt = 0.25, 9, 10, 11, -12, 13, 14
	p.PoolSlots, p.CkChunks, p.CkRows = 15, 16, 17
	p.Slots, p.Ckpt, p.CkptRows = 18, 19, 20
	var b [HopperParamsBytes]byte
	for i := range b {
		b[i] = 0xff
	}
	p.Pack(&b)
	for i := 0; i < 5*128; i++ {
		if want := byte(16*(i/128) + i%16); b[i] != want {
			t.Fatalf("map byte %d = %#x, want %#x", i, b[i], want)
		}
	}
	for i := range 8 {
		if got := binary.LittleEndian.Uint64(b[HopperOffPtrs+8*i:]); got != uint64(i+1) {
			t.Errorf("pointer %d = %d, want %d", i, got, i+1)
		}
	}
	if got := math.Float32frombits(binary.LittleEndian.Uint32(b[HopperOffScalars:])); got != 0.25 {
		t.Errorf("scale = %v", got)
	}
	for i, want := range []int32{9, 10, 11, -12, 13, 14, 15, 16, 17} {
		if got := int32(binary.LittleEndian.Uint32(b[HopperOffScalars+4+4*i:])); got != want {
			t.Errorf("scalar %d = %d, want %d", i, got, want)
		}
	}
	for i := range 3 {
		if got := binary.LittleEndian.Uint64(b[HopperOffState+8*i:]); got != uint64(18+i) {
			t.Errorf("serving pointer %d = %d, want %d", i, got, 18+i)
		}
	}
	if HopperOffState+3*8 != HopperParamsBytes {
		t.Errorf("the serving pointers end at %d of %d bytes", HopperOffState+3*8, HopperParamsBytes)
	}
}

// Every Hopper variant's configuration is found again from the variant,
// and nothing else has one.
func TestHopperCfgOfVariant(t *testing.T) {
	for _, v := range HopperVariants() {
		c, ok := HopperCfgOfVariant(v)
		if !ok || c.Entry() != v.Kernel {
			t.Errorf("%s: configuration %+v (%v), entry %s", v.Name, c, ok, v.Kernel)
		}
	}
	for _, v := range append(PrepVariants(), ScanVariants()...) {
		if c, ok := HopperCfgOfVariant(v); ok {
			t.Errorf("%s: a Hopper configuration %+v", v.Name, c)
		}
	}
}

// A variant's defines become -D options, in order.
func TestVariantOptions(t *testing.T) {
	v := Variant{Defines: []string{"A=1", "B"}}
	if got := v.Options(); len(got) != 2 || got[0] != "-DA=1" || got[1] != "-DB" {
		t.Errorf("Options = %q", got)
	}
	if got := (Variant{}).Options(); len(got) != 0 {
		t.Errorf("no defines: %q", got)
	}
}
