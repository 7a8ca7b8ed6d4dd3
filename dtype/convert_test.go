package dtype

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func f32(bits uint32) float32 { return math.Float32frombits(bits) }

func TestRoundBF16Known(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3F80},
		{"minus two", -2, 0xC000},
		{"zero", 0, 0x0000},
		{"minus zero", float32(math.Copysign(0, -1)), 0x8000},
		{"tie to even down", f32(0x3F808000), 0x3F80},
		{"tie to even up", f32(0x3F818000), 0x3F82},
		{"above tie", f32(0x3F808001), 0x3F81},
		{"below tie", f32(0x3F807FFF), 0x3F80},
		{"max float32 overflows", math.MaxFloat32, 0x7F80},
		{"largest bf16", f32(0x7F7F0000), 0x7F7F},
		{"+Inf", float32(math.Inf(1)), 0x7F80},
		{"-Inf", float32(math.Inf(-1)), 0xFF80},
		{"subnormal passes", f32(0x00010000), 0x0001},
		{"subnormal rounds", f32(0x00018000), 0x0002},
		{"tiny subnormal to zero", f32(0x00000001), 0x0000},
		{"quiet NaN", f32(0x7FC00000), 0x7FC0},
		{"NaN with low payload only", f32(0x7F800001), 0x7FC0},
		{"negative NaN", f32(0xFFC12345), 0xFFC1},
	} {
		if got := RoundBF16(tc.in); got != tc.want {
			t.Errorf("%s: RoundBF16(%#08x) = %#04x, want %#04x", tc.name, math.Float32bits(tc.in), got, tc.want)
		}
	}
}

func TestRoundFP16Known(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3C00},
		{"minus two", -2, 0xC000},
		{"minus zero", float32(math.Copysign(0, -1)), 0x8000},
		{"max 65504", 65504, 0x7BFF},
		{"65519 rounds to max", 65519, 0x7BFF},
		{"65520 overflows", 65520, 0x7C00},
		{"-65520 overflows", -65520, 0xFC00},
		{"1e10 overflows", 1e10, 0x7C00},
		{"+Inf", float32(math.Inf(1)), 0x7C00},
		{"-Inf", float32(math.Inf(-1)), 0xFC00},
		{"smallest normal 2^-14", 1.0 / (1 << 14), 0x0400},
		{"smallest subnormal 2^-24", 1.0 / (1 << 24), 0x0001},
		{"2^-25 ties to zero", 1.0 / (1 << 25), 0x0000},
		{"-2^-25 ties to minus zero", -1.0 / (1 << 25), 0x8000},
		{"just above 2^-25", f32(0x33000001), 0x0001},
		{"3*2^-25 ties to even 2", 3.0 / (1 << 25), 0x0002},
		{"5*2^-25 ties to even 2", 5.0 / (1 << 25), 0x0002},
		{"largest subnormal", 1023.0 / (1 << 24), 0x03FF},
		{"subnormal rounds up to normal", 1023.5 / (1 << 24), 0x0400},
		{"float32 subnormal to zero", f32(0x00000001), 0x0000},
		{"tie to even down", 1 + 1.0/(1<<11), 0x3C00},
		{"tie to even up", 1 + 3.0/(1<<11), 0x3C02},
		{"quiet NaN", f32(0x7FC00000), 0x7E00},
		{"NaN with low payload only", f32(0x7F800001), 0x7E00},
		{"negative NaN", f32(0xFFC00000), 0xFE00},
	} {
		if got := RoundFP16(tc.in); got != tc.want {
			t.Errorf("%s: RoundFP16(%#08x) = %#04x, want %#04x", tc.name, math.Float32bits(tc.in), got, tc.want)
		}
	}
}

func TestWidenKnown(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  float32
		want float32
	}{
		{"bf16 one", BF16ToFloat32(0x3F80), 1},
		{"bf16 -2", BF16ToFloat32(0xC000), -2},
		{"fp16 one", FP16ToFloat32(0x3C00), 1},
		{"fp16 -2", FP16ToFloat32(0xC000), -2},
		{"fp16 max", FP16ToFloat32(0x7BFF), 65504},
		{"fp16 smallest subnormal", FP16ToFloat32(0x0001), 1.0 / (1 << 24)},
		{"fp16 negative subnormal", FP16ToFloat32(0x8003), -3.0 / (1 << 24)},
		{"fp16 +Inf", FP16ToFloat32(0x7C00), float32(math.Inf(1))},
		{"fp16 -Inf", FP16ToFloat32(0xFC00), float32(math.Inf(-1))},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if math.Signbit(float64(FP16ToFloat32(0x8000))) != true {
		t.Errorf("fp16 0x8000 should widen to -0")
	}
	if !math.IsNaN(float64(FP16ToFloat32(0x7E00))) || !math.IsNaN(float64(BF16ToFloat32(0x7FC0))) {
		t.Errorf("NaN bits should widen to NaN")
	}
}

// TestRoundTripAllBits widens every 16-bit pattern and rounds it back: the
// bits must come back unchanged (NaN: any NaN with the same sign).
func TestRoundTripAllBits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		widen func(uint16) float32
		round func(float32) uint16
		isNaN func(uint16) bool
	}{
		{"bf16", BF16ToFloat32, RoundBF16, func(h uint16) bool { return h&0x7F80 == 0x7F80 && h&0x7F != 0 }},
		{"fp16", FP16ToFloat32, RoundFP16, func(h uint16) bool { return h&0x7C00 == 0x7C00 && h&0x3FF != 0 }},
	} {
		for b := range 1 << 16 {
			h := uint16(b)
			f := tc.widen(h)
			back := tc.round(f)
			if tc.isNaN(h) {
				if !math.IsNaN(float64(f)) || !tc.isNaN(back) || back&0x8000 != h&0x8000 {
					t.Fatalf("%s: NaN %#04x -> %v -> %#04x, want a NaN of the same sign", tc.name, h, f, back)
				}
				continue
			}
			if back != h {
				t.Fatalf("%s: %#04x -> %v -> %#04x", tc.name, h, f, back)
			}
		}
	}
}

// oracle rounds like IEEE from a sorted table of every non-negative finite
// value of a 16-bit format plus the overflow step (the value one ulp past
// the largest finite, mapped to the Inf bits), sharing no code with the
// bit-twiddling under test.
type oracle struct {
	vals []float64
	bits []uint16
}

func newOracle(widen func(uint16) float32, expMask uint16, inf uint16, beyond float64) oracle {
	var o oracle
	for b := range 0x8000 {
		h := uint16(b)
		if h&expMask == expMask {
			continue // Inf and NaN
		}
		o.vals = append(o.vals, float64(widen(h)))
		o.bits = append(o.bits, h)
	}
	o.vals = append(o.vals, beyond)
	o.bits = append(o.bits, inf)
	return o
}

func (o oracle) round(x float32) uint16 {
	a := math.Abs(float64(x))
	var sign uint16
	if math.Signbit(float64(x)) {
		sign = 0x8000
	}
	i := sort.SearchFloat64s(o.vals, a) // first value >= a
	switch {
	case i == len(o.vals):
		return sign | o.bits[len(o.bits)-1]
	case o.vals[i] == a || i == 0:
		return sign | o.bits[i]
	}
	lo, hi := o.vals[i-1], o.vals[i]
	switch {
	case a-lo < hi-a:
		return sign | o.bits[i-1]
	case a-lo > hi-a:
		return sign | o.bits[i]
	case o.bits[i-1]&1 == 0:
		return sign | o.bits[i-1]
	}
	return sign | o.bits[i]
}

// TestRoundMatchesOracle rounds every midpoint between neighbouring values
// (the ties), one float32 ulp either side of it, and random float32 bit
// patterns, and compares with the table oracle.
func TestRoundMatchesOracle(t *testing.T) {
	for _, tc := range []struct {
		name  string
		round func(float32) uint16
		o     oracle
	}{
		{"bf16", RoundBF16, newOracle(BF16ToFloat32, 0x7F80, 0x7F80, math.Ldexp(1, 128))},
		{"fp16", RoundFP16, newOracle(FP16ToFloat32, 0x7C00, 0x7C00, 65536)},
	} {
		var xs []float32
		for i := 1; i < len(tc.o.vals); i++ {
			mid := float32((tc.o.vals[i-1] + tc.o.vals[i]) / 2) // exact: 16-bit midpoints fit float32
			b := math.Float32bits(mid)
			xs = append(xs, mid, f32(b-1), f32(b+1), -mid)
		}
		r := rand.New(rand.NewPCG(1, 2))
		for range 200000 {
			x := f32(r.Uint32())
			if !math.IsNaN(float64(x)) {
				xs = append(xs, x)
			}
		}
		for _, x := range xs {
			if math.IsInf(float64(x), 0) {
				continue
			}
			if got, want := tc.round(x), tc.o.round(x); got != want {
				t.Fatalf("%s: round(%v = %#08x) = %#04x, oracle %#04x", tc.name, x, math.Float32bits(x), got, want)
			}
		}
	}
}

// TestSliceRoundingFromFloat64 checks the slice helpers round float64 values
// once, not through float32 first: 1 + 2^-8 + 2^-30 lies just above a bf16
// tie, but float32 rounding would land exactly on the tie and round down.
