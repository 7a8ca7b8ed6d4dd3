package dtype

import "math"

// Rounding to the GPU's 16-bit input formats and widening back. The
// reference is fed the very values the kernel sees, so these round exactly
// like the device: IEEE round to nearest, ties to even; NaN stays NaN
// (quiet), Inf stays Inf, finite values too large overflow to Inf.

// RoundBF16 rounds x to the nearest bfloat16 (ties to even) and returns its
// bits. NaN comes back as a quiet NaN with x's sign and top payload bits;
// float32 subnormals round like any other value (bf16 shares float32's
// exponent range, so it has the same subnormals at lower precision).
func RoundBF16(x float32) uint16 {
	b := math.Float32bits(x)
	if b&0x7FFFFFFF > 0x7F800000 {
		// Truncating a NaN could clear every payload bit and make it Inf;
		// setting the quiet bit keeps it a NaN.
		return uint16(b>>16) | 0x0040
	}
	// Adding 0x7FFF plus the kept LSB rounds half to even; a carry out of the
	// mantissa bumps the exponent, and out of the top exponent gives Inf.
	return uint16((b + 0x7FFF + (b>>16)&1) >> 16)
}

// BF16ToFloat32 widens bfloat16 bits to float32 (exact).
func BF16ToFloat32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// RoundFP16 rounds x to the nearest IEEE half (ties to even) and returns its
// bits. Values of magnitude 65520 and above become Inf; values below the
// normal range become half subnormals (down to 2^-24) or signed zero. NaN
// comes back as a quiet NaN with x's sign and top payload bits.
func RoundFP16(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xFF
	man := b & 0x7FFFFF
	if exp == 0xFF {
		if man == 0 {
			return sign | 0x7C00
		}
		return sign | 0x7E00 | uint16(man>>13)
	}
	e := exp - 127 + 15 // biased half exponent
	if e >= 0x1F {
		return sign | 0x7C00
	}
	if e <= 0 {
		// Half subnormal: the result is round(|x| / 2^-24). |x| < 2^-25
		// (e < -10, float32 subnormals included) always rounds to zero.
		if e < -10 {
			return sign
		}
		m := man | 0x800000 // |x| = m * 2^(exp-150)
		shift := uint(14 - e)
		return sign | uint16(roundShift(m, shift))
	}
	// Normal: keep 10 of the 23 mantissa bits. A carry into the exponent is
	// the right answer, including the step from 65504 to Inf.
	return sign | uint16(roundShift(uint32(e)<<23|man, 13))
}

// roundShift returns m >> shift rounded to nearest, ties to even.
func roundShift(m uint32, shift uint) uint32 {
	q := m >> shift
	rem := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q
}

// FP16ToFloat32 widens IEEE half bits to float32 (exact), subnormals
// included. NaN payloads are kept.
func FP16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1F
	man := uint32(h & 0x3FF)
	switch exp {
	case 0x1F:
		return math.Float32frombits(sign | 0x7F800000 | man<<13)
	case 0:
		// Subnormal or zero: man * 2^-24, exact in float32.
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}
