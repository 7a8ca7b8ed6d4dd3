package ref

import (
	"math"

	"github.com/gdnjit/gdn/dtype"
)

// Rounding float64 reference values to the GPU input dtypes, through the
// float32 converters of package dtype.

// toFloat32Odd converts x to float32 rounding to odd: truncate toward zero,
// then set the last bit if anything was lost. Rounding that result to bf16
// or fp16 (8 or more bits shorter) then equals rounding x directly, with no
// double-rounding error at ties.
func toFloat32Odd(x float64) float32 {
	f := float32(x)
	if math.IsNaN(x) || float64(f) == x {
		return f
	}
	b := math.Float32bits(f)
	if math.Abs(float64(f)) > math.Abs(x) {
		b-- // one step toward zero: round-to-nearest went away from zero
	}
	return math.Float32frombits(b | 1)
}

// RoundSliceBF16 rounds each src value to bfloat16 bits in dst, correctly
// rounded from float64. It handles min(len(dst), len(src)) elements.
func RoundSliceBF16(dst []uint16, src []float64) {
	for i := range min(len(dst), len(src)) {
		dst[i] = dtype.RoundBF16(toFloat32Odd(src[i]))
	}
}

// RoundSliceFP16 rounds each src value to IEEE half bits in dst, correctly
// rounded from float64. It handles min(len(dst), len(src)) elements.
func RoundSliceFP16(dst []uint16, src []float64) {
	for i := range min(len(dst), len(src)) {
		dst[i] = dtype.RoundFP16(toFloat32Odd(src[i]))
	}
}

// QuantizeBF16 returns a new slice with each value of x rounded to bfloat16
// and widened back: what the reference is fed when the kernel reads bf16.
func QuantizeBF16(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(dtype.BF16ToFloat32(dtype.RoundBF16(toFloat32Odd(v))))
	}
	return out
}

// QuantizeFP16 returns a new slice with each value of x rounded to IEEE
// half and widened back: what the reference is fed when the kernel reads fp16.
func QuantizeFP16(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(dtype.FP16ToFloat32(dtype.RoundFP16(toFloat32Odd(v))))
	}
	return out
}

// QuantizeF32 returns a new slice with each value of x rounded to float32
// and widened back: what the reference is fed for fp32 inputs (g, beta, h0).
func QuantizeF32(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(float32(v))
	}
	return out
}

// Float32s returns x as float32 values (nil for nil): how reference inputs,
// already rounded to their device dtype, are handed to the GPU API.
func Float32s(x []float64) []float32 {
	if x == nil {
		return nil
	}
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}
