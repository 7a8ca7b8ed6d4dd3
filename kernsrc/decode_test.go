package kernsrc

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// The Go side of GdnDecodeParams: the layout's size and the scalars'
// offset are the defines the kernel static_asserts, and Pack puts every
// field at its offset.
func TestDecodeParamsPack(t *testing.T) {
	if decodeBytes != DecodeParamsBytes || decodeFields[12].Offset != DecodeOffScalars {
		t.Fatalf("layout %d bytes, scalars at %d; constants %d, %d", decodeBytes, decodeFields[12].Offset, DecodeParamsBytes, DecodeOffScalars)
	}
	p := DecodeParams{Q: 1, K: 2, V: 3, G: 4, Beta: 5, ALog: 6, DtBias: 7, Pool: 8, Slots: 9, O: 10, TokenStates: 11,
		CuSeqlens: 12, Scale: 0.25, T: 13, Hq: 14, Hv: 15, N: 16, Flags: 17}
	var b [DecodeParamsBytes]byte
	p.Pack(&b)
	for i := 0; i < 12; i++ {
		if got := binary.LittleEndian.Uint64(b[8*i:]); got != uint64(i+1) {
			t.Errorf("pointer %d = %d, want %d", i, got, i+1)
		}
	}
	if got := math.Float32frombits(binary.LittleEndian.Uint32(b[96:])); got != 0.25 {
		t.Errorf("scale %v", got)
	}
	for i := 1; i < 6; i++ {
		if got := binary.LittleEndian.Uint32(b[96+4*i:]); got != uint32(12+i) {
			t.Errorf("scalar %d = %d, want %d", i, got, 12+i)
		}
	}
}

// Every decode variant is in the catalogue under its own name and carries
// the contract's defines.
func TestDecodeVariants(t *testing.T) {
	vs := DecodeVariants()
	if len(vs) != 8 {
		t.Fatalf("%d variants, want 8", len(vs))
	}
	seen := map[string]bool{}
	for _, v := range vs {
		if seen[v.Name] {
			t.Errorf("%s twice", v.Name)
		}
		seen[v.Name] = true
		if _, ok := Lookup(v.Name); !ok {
			t.Errorf("%s not in the catalogue", v.Name)
		}
		if !strings.Contains(strings.Join(v.Defines, " "), "GDN_DECODE_PARAMS_BYTES=120") {
			t.Errorf("%s: defines %v", v.Name, v.Defines)
		}
	}
	if _, err := DecodeVariant(CoreBF16, "kk", false); err == nil {
		t.Error("layout kk accepted")
	}
	if _, err := DecodeVariant(CoreBF16Fused, DecodeKV, false); err == nil {
		t.Error("fused dtype accepted")
	}
}
