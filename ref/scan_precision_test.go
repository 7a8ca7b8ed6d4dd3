package ref

import (
	"math"
	"testing"
)

// The split plan's scan (kernsrc/gdn_scan.cu) multiplies each segment's
// transfer matrix M into the running state on the tensor cores as three
// TF32 products of split fp32 operands (hi = the value with its 13 low
// mantissa bits cleared, lo = the rest, likewise): hi(M) hi(S) + hi(M) lo(S)
// + lo(M) hi(S), accumulated in fp32 eight terms an instruction, truncated.
// The split needs the chain in fp32 (its error would grow along the
// segments). This test puts the emulated products against
// an fp32 FMA chain (what the scan did before) and the float64 chain, on
// real transfer maps of the recipe, without decay (g = 0: M carries
// everything, the worst case for growth) and with it, over 32 segments.

// tf32Trunc clears the 13 low mantissa bits of x (as fp32).
func tf32Trunc(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ 0x1fff) }

// rz rounds x to fp32 toward zero: the tensor cores' fp32 accumulation
// normalises by truncation (measured on V100-A100 by Fasi et al.; assumed
// here for Hopper, the harsher model than rounding to nearest).
func rz(x float64) float32 {
	f := float32(x)
	if math.Abs(float64(f)) > math.Abs(x) {
		f = math.Nextafter32(f, 0)
	}
	return f
}

// scanStep returns M S + B for one segment (128 x 128 each, row-major;
// the product over k), with the products as mode says: "fma" fp32 FMA in k
// order; "tf32x3" the kernel's split products, each m16n8k8 instruction
// adding its eight exact products to its accumulator with one truncation:
// the cross terms lo(M) hi(S) and hi(M) lo(S) as two instructions into one
// of two accumulators (even and odd k-steps), hi hi into one of four (a
// quarter of k each), then (big0 + big1) + (big2 + big3) + ((small0 +
// small1) + B) in fp32.
func scanStep(M, S, B []float32, mode string) []float32 {
	out := make([]float32, D*D)
	for i := range D {
		for v := range D {
			switch mode {
			case "fma":
				acc := B[i*D+v]
				for k := range D {
					acc = float32(math.FMA(float64(M[i*D+k]), float64(S[k*D+v]), float64(acc)))
				}
				out[i*D+v] = acc
			case "tf32x3":
				var big [4]float32
				var small [2]float32
				for ks := range D / 8 {
					var lh, hl, hh float64
					for k := 8 * ks; k < 8*ks+8; k++ {
						m, s := M[i*D+k], S[k*D+v]
						mh, sh := tf32Trunc(m), tf32Trunc(s)
						ml, sl := tf32Trunc(m-mh), tf32Trunc(s-sh)
						lh += float64(ml) * float64(sh)
						hl += float64(mh) * float64(sl)
						hh += float64(mh) * float64(sh)
					}
					small[ks&1] = rz(float64(small[ks&1]) + lh)
					small[ks&1] = rz(float64(small[ks&1]) + hl)
					big[ks>>2] = rz(float64(big[ks>>2]) + hh)
				}
				out[i*D+v] = ((big[0] + big[1]) + (big[2] + big[3])) + ((small[0] + small[1]) + B[i*D+v])
			}
		}
	}
	return out
}

func TestScanTF32Precision(t *testing.T) {
	if testing.Short() {
		t.Skip("about a second of float64 transfer maps")
	}
	const segs, segLen = 32, 16
	s := Shape{B: 1, T: segs * segLen, Hq: 1, Hv: 2} // head 0: g = 0; head 1: decay
	in, err := Recipe(s, 91, RecipeOptions{WithH0: true})
	if err != nil {
		t.Fatal(err)
	}
	for h := range s.Hv {
		S64 := append([]float64(nil), in.H0[h*D*D:][:D*D]...)
		Sf := make([]float32, D*D)
		for i, x := range S64 {
			Sf[i] = float32(x)
		}
		St := append([]float32(nil), Sf...)
		var worstFMA, worstTF32 float64
		for seg := range segs {
			tr, err := SegmentTransfer(in, h, seg*segLen, (seg+1)*segLen)
			if err != nil {
				t.Fatal(err)
			}
			M32, B32 := make([]float32, D*D), make([]float32, D*D)
			for i := range M32 {
				M32[i], B32[i] = float32(tr.M[i]), float32(tr.B[i])
			}
			next := make([]float64, D*D)
			for i := range D {
				for v := range D {
					acc := tr.B[i*D+v]
					for k := range D {
						acc += tr.M[i*D+k] * S64[k*D+v]
					}
					next[i*D+v] = acc
				}
			}
			S64 = next
			Sf = scanStep(M32, Sf, B32, "fma")
			St = scanStep(M32, St, B32, "tf32x3")
			worstFMA = max(worstFMA, relMaxDiff32(Sf, S64))
			worstTF32 = max(worstTF32, relMaxDiff32(St, S64))
		}
		t.Logf("head %d (zero gate %v), %d segments: worst state error over max|S|: fp32 FMA %.2e, TF32 x3 %.2e", h, ZeroGateHead(h), segs, worstFMA, worstTF32)
		// The split products keep about 20 bits: within a small factor of
		// fp32 FMA and far below the 16-bit rounding of the kernel's
		// operands (2^-11 = 4.9e-4), which bounds the outputs' error.
		if worstTF32 > 1e-5 || worstTF32 > 64*worstFMA+1e-7 {
			t.Errorf("head %d: TF32 x3 state error %.2e (fp32 FMA %.2e)", h, worstTF32, worstFMA)
		}
	}
}

// relMaxDiff32 is max |a - b| over max |b|.
func relMaxDiff32(a []float32, b []float64) float64 {
	var d, m float64
	for i := range b {
		d = max(d, math.Abs(float64(a[i])-b[i]))
		m = max(m, math.Abs(b[i]))
	}
	return d / m
}
