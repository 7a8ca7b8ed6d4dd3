package ref

import (
	"math"
	"testing"

	"github.com/gdnjit/gdn/dtype"
)

func TestSliceRoundingFromFloat64(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   float64
		bf16 uint16
		fp16 uint16
	}{
		{"one", 1, 0x3F80, 0x3C00},
		{"above bf16 tie", 1 + 1.0/(1<<8) + 1.0/(1<<30), 0x3F81, 0x3C04},
		{"below bf16 tie", 1 + 1.0/(1<<8) - 1.0/(1<<30), 0x3F80, 0x3C04},
		{"above fp16 tie", 1 + 1.0/(1<<11) + 1.0/(1<<40), 0x3F80, 0x3C01},
		{"overflow", 1e300, 0x7F80, 0x7C00},
		{"negative overflow", -1e300, 0xFF80, 0xFC00},
		{"underflow", 1e-300, 0x0000, 0x0000},
		{"fp16 subnormal above tie", math.Ldexp(1, -25) + math.Ldexp(1, -60), 0x3300, 0x0001},
		{"NaN", math.NaN(), 0x7FC0, 0x7E00},
	} {
		bf, fp := make([]uint16, 1), make([]uint16, 1)
		RoundSliceBF16(bf, []float64{tc.in})
		RoundSliceFP16(fp, []float64{tc.in})
		if tc.name == "NaN" {
			if bf[0]&0x7FFF <= 0x7F80 || fp[0]&0x7FFF <= 0x7C00 {
				t.Errorf("NaN: got bf16 %#04x fp16 %#04x, want NaNs", bf[0], fp[0])
			}
			continue
		}
		if bf[0] != tc.bf16 || fp[0] != tc.fp16 {
			t.Errorf("%s: got bf16 %#04x fp16 %#04x, want %#04x %#04x", tc.name, bf[0], fp[0], tc.bf16, tc.fp16)
		}
		if got, want := QuantizeBF16([]float64{tc.in})[0], float64(dtype.BF16ToFloat32(tc.bf16)); got != want {
			t.Errorf("%s: QuantizeBF16 = %v, want %v", tc.name, got, want)
		}
		if got, want := QuantizeFP16([]float64{tc.in})[0], float64(dtype.FP16ToFloat32(tc.fp16)); got != want {
			t.Errorf("%s: QuantizeFP16 = %v, want %v", tc.name, got, want)
		}
	}
	// Short destination: only the overlap is written, nothing panics.
	dst := []uint16{0xAAAA}
	RoundSliceBF16(dst, []float64{1, 2, 3})
	RoundSliceFP16(dst[:0], []float64{1})
	if dst[0] != 0x3F80 {
		t.Errorf("short dst: got %#04x", dst[0])
	}
}

func TestFloat32s(t *testing.T) {
	got := Float32s([]float64{1, -0.5, 1 + 1e-12, math.Inf(-1)})
	want := []float32{1, -0.5, 1, float32(math.Inf(-1))}
	if len(got) != len(want) {
		t.Fatalf("len %d", len(got))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: %v, want %v", i, got[i], want[i])
		}
	}
	if Float32s(nil) != nil {
		t.Error("nil in, non-nil out")
	}
}
