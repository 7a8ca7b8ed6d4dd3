package ref

import (
	"math"
	"testing"

	"github.com/gdnjit/gdn/dtype"
)

// The error budget of the core kernel's operand precisions, on the CPU.
//
// gdn_hopper.cu rounds its tensor-core operands to 16 bits at fixed points
// of the chunk (kernsrc/gdn_hopper.cu, the header's equations), and
// accumulates in fp32. emulateChunked runs the chunked algorithm in
// float64 with those roundings put back, one switch per point, so that the
// o error each choice costs can be read without a GPU: the kernel's own
// choices must land inside docs/SPEC.md's pass line (and near what the GPU
// tests measure, about 1.8e-3: TestKernelOperandPrecision), and
// BenchmarkOperandPrecision reports which points could take bf16 (no
// conversion by the aux group) and what that would cost.

// rounding is what one operand is rounded to before its product.
type rounding int

const (
	exact rounding = iota // no rounding (float64)
	toFP16
	toBF16
	toTF32 // fp32 with 10 mantissa bits, rounded to nearest (ties away)
)

func (r rounding) String() string {
	return [...]string{"exact", "fp16", "bf16", "tf32"}[r]
}

func (r rounding) of(x float64) float64 {
	switch r {
	case toTF32:
		return float64(math.Float32frombits((math.Float32bits(float32(x)) + 0x1000) &^ 0x1fff))
	case toFP16:
		return float64(dtype.FP16ToFloat32(dtype.RoundFP16(toFloat32Odd(x))))
	case toBF16:
		return float64(dtype.BF16ToFloat32(dtype.RoundBF16(toFloat32Odd(x))))
	}
	return x
}

// operandPrecision names the rounding of each operand the kernel's
// products take.
type operandPrecision struct {
	S  rounding // S^T, the A operand of U^T = S^T K^T and O'^T = S^T (Q e^g)^T
	K  rounding // K (bf16 inputs converted in place by the aux group)
	Q  rounding // Q diag(e^g)
	W  rounding // V - e^g U, the A operand of Vn^T = W^T A2^T
	A2 rounding // A diag(beta)
	P  rounding // Lower(Q K^T * Gamma)
	Vn rounding // Vn, the A operand of O^T += Vn^T P^T, and Vn diag(f) for the update
	O  rounding // the output
}

// kernelPrecision is gdn_hopper.cu's choice for bf16 inputs.
var kernelPrecision = operandPrecision{S: toFP16, K: toFP16, Q: toFP16, W: toFP16, A2: toFP16, P: toFP16, Vn: toFP16, O: toBF16}

// emulateChunked is Chunked with the operands rounded as p says and the
// state rounded to fp32 after each chunk (the kernel keeps it in fp32
// registers). A is the float64 solve; A2 = A diag(beta) is rounded as p.A2.
func emulateChunked(in Inputs, gcum, A []float64, p operandPrecision) (o []float64) {
	s := in.Shape
	scale := in.EffectiveScale()
	gq := s.G()
	o = make([]float64, s.VLen())
	S := make([]float64, D*D)
	Sop := make([]float64, D*D)
	Kop := make([]float64, C*D)
	W := make([]float64, C*D)
	Vn := make([]float64, C*D)
	Vf := make([]float64, C*D)
	Pm := make([]float64, C*C)
	for n, se := range s.Seqs() {
		for h := range s.Hv {
			initState(S, in.H0, n, h, s.Hv)
			hk := h / gq
			for c0 := se[0]; c0 < se[1]; c0 += C {
				L := min(C, se[1]-c0)
				qRow := func(i int) []float64 { return in.Q[((c0+i)*s.Hq+hk)*D:][:D] }
				kRow := func(i int) []float64 { return in.K[((c0+i)*s.Hq+hk)*D:][:D] }
				gc := func(i int) float64 { return gcum[(c0+i)*s.Hv+h] }
				for i, x := range S {
					Sop[i] = p.S.of(x)
				}
				for i := range L {
					for r, x := range kRow(i) {
						Kop[i*D+r] = p.K.of(x)
					}
				}
				// W = V - e^g (K S).
				for i := range L {
					w := W[i*D:][:D]
					clear(w)
					for r := range D {
						axpy(w, Kop[i*D+r], Sop[r*D:][:D])
					}
					eg := math.Exp(gc(i))
					v := in.V[((c0+i)*s.Hv+h)*D:][:D]
					for c := range D {
						w[c] = p.W.of(v[c] - eg*w[c])
					}
				}
				// Vn = A2 W over the lower triangle.
				for i := range L {
					vn := Vn[i*D:][:D]
					clear(vn)
					ai := A[((c0+i)*s.Hv+h)*C:][:C]
					for j := 0; j <= i; j++ {
						axpy(vn, p.A2.of(ai[j]*in.Beta[(c0+j)*s.Hv+h]), W[j*D:][:D])
					}
				}
				// P = Lower(Q K^T * Gamma), from the 16-bit inputs exactly.
				for i := range L {
					for j := range L {
						x := 0.0
						if j <= i {
							x = p.P.of(dot(qRow(i), kRow(j)) * math.Exp(gc(i)-gc(j)))
						}
						Pm[i*C+j] = x
					}
				}
				gl := gc(L - 1)
				for j := range L {
					f := math.Exp(gl - gc(j))
					for c := range D {
						x := Vn[j*D+c]
						Vn[j*D+c] = p.Vn.of(x)
						Vf[j*D+c] = p.Vn.of(x * f)
					}
				}
				// O = scale ((Q e^g) S + P Vn).
				for i := range L {
					out := o[((c0+i)*s.Hv+h)*D:][:D]
					eg := math.Exp(gc(i))
					for r, x := range qRow(i) {
						axpy(out, p.Q.of(x*eg), Sop[r*D:][:D])
					}
					for j := 0; j <= i; j++ {
						axpy(out, Pm[i*C+j], Vn[j*D:][:D])
					}
					for c := range D {
						out[c] = p.O.of(float64(float32(scale * out[c])))
					}
				}
				// S = e^{g_last} S + K^T (Vn diag(f)), in fp32.
				el := math.Exp(gl)
				for i := range S {
					S[i] *= el
				}
				for j := range L {
					for r := range D {
						axpy(S[r*D:][:D], Kop[j*D+r], Vf[j*D:][:D])
					}
				}
				for i, x := range S {
					S[i] = float64(float32(x))
				}
			}
		}
	}
	return o
}

// at is the address of m[i][j] in a C x C row-major block.
func at(m []float64, i, j int) *float64 { return &m[i*C+j] }

// blockMul sets out[i0.., j0..] (rows x cols) to sign * round(a[ai.., aj..])
// round(b[bi.., bj..]) over kk: a tensor-core product of operands rounded
// as r, summed exactly (fp32 accumulators, whose error is far below r's).
func blockMul(r rounding, out []float64, i0, j0, rows, cols int, a []float64, ai, aj int, b []float64, bi, bj, kk int, sign float64) {
	for i := range rows {
		for j := range cols {
			x := 0.0
			for m := range kk {
				x += r.of(*at(a, ai+i, aj+m)) * r.of(*at(b, bi+m, bj+j))
			}
			*at(out, i0+i, j0+j) = sign * x
		}
	}
}

// chunkL sets L to the chunk's StrictLower(diag(beta) K K^T * Gamma) for
// value head h, the n tokens from c0 (zero past them).
func chunkL(L []float64, s Shape, k, beta, gcum []float64, c0, n, h int) {
	hk := h / s.G()
	clear(L)
	for i := range n {
		ki := k[((c0+i)*s.Hq+hk)*D:][:D]
		for j := range i {
			kj := k[((c0+j)*s.Hq+hk)*D:][:D]
			*at(L, i, j) = beta[(c0+i)*s.Hv+h] * dot(ki, kj) * math.Exp(gcum[(c0+i)*s.Hv+h]-gcum[(c0+j)*s.Hv+h])
		}
	}
}

// invertDiagonalBlocks sets X's four 16 x 16 diagonal blocks to the
// inverses D of I + L's, by forward substitution (x_i = e_i - sum_{m<i}
// L_im x_m), and the rest of X to zero.
func invertDiagonalBlocks(X, L []float64) {
	clear(X)
	for d := 0; d < C; d += 16 {
		for i := range 16 {
			*at(X, d+i, d+i) = 1
			for m := range i {
				for j := 0; j <= m; j++ {
					*at(X, d+i, d+j) -= *at(L, d+i, d+m) * *at(X, d+m, d+j)
				}
			}
		}
	}
}

// emulateSolveA is SolveA by 16 x 16 blocks, as FlashInfer's aux group
// computes it (and, with its products in three TF32 passes, near exact,
// this project's preparation kernel did until docs/PERF.md v29): the four
// diagonal blocks' inverses
// D by forward substitution (float64), then the two 32 x 32 halves'
// off-diagonal blocks -D_{2h+1} (L_{2h+1,2h} D_{2h}) and the lower-left 32 x
// 32 block -X_23 (L_{23,01} X_01), every matrix rounded as r before it
// enters a product (the tensor cores' operands), the products summed
// exactly.
func emulateSolveA(s Shape, k, beta, gcum []float64, r rounding) []float64 {
	A := make([]float64, s.ALen())
	L := make([]float64, C*C)
	X := make([]float64, C*C)
	Y := make([]float64, C*C)
	chunks(s, func(c0, n int) {
		for h := range s.Hv {
			chunkL(L, s, k, beta, gcum, c0, n, h)
			invertDiagonalBlocks(X, L)
			for d := 0; d < C; d += 32 { // X[2h+1, 2h] = -D_{2h+1} (L[2h+1, 2h] D_{2h})
				blockMul(r, Y, d+16, d, 16, 16, L, d+16, d, X, d, d, 16, 1)
				blockMul(r, X, d+16, d, 16, 16, X, d+16, d+16, Y, d+16, d, 16, -1)
			}
			blockMul(r, Y, 32, 0, 32, 32, L, 32, 0, X, 0, 0, 32, 1) // X[23, 01] = -X[23] (L[23, 01] X[01])
			blockMul(r, X, 32, 0, 32, 32, X, 32, 32, Y, 32, 0, 32, -1)
			for i := range n {
				copy(A[((c0+i)*s.Hv+h)*C:][:i+1], X[i*C:][:i+1])
			}
		}
	})
	return A
}

// emulateSolveAFused is A as the fused core kernel and the preparation
// kernel build it (kernsrc/gdn_solve.cuh), returned as A2 / beta so that
// emulateChunked's A2 = A diag(beta) is the kernel's A2 before its fp16
// rounding. The kernel's L carries no beta (StrictLower(K K^T * Gamma), here
// L1); the diagonal blocks D of (I + diag(beta) L1)^-1 come by forward
// substitution (float64; fp32 there) and are stored as D diag(beta); each
// block below the diagonal is the product of two of A2's own blocks around
// one of L1's, (A2[a, a] L1[a, b]) rounded to fp16, times A2[b, b]:
// A2[2h+1, 2h] = -(A2[2h+1, 2h+1] L1[2h+1, 2h]) A2[2h, 2h], then
// A2[23, 01] = -(A2[23, 23] L1[23, 01]) A2[01, 01].
func emulateSolveAFused(s Shape, k, beta, gcum []float64) []float64 {
	const r = toFP16
	A := make([]float64, s.ALen())
	L := make([]float64, C*C)  // diag(beta) L1: the diagonal blocks' substitution
	L1 := make([]float64, C*C) // the kernel's L, without beta
	X := make([]float64, C*C)  // the diagonal blocks' inverses D
	A2 := make([]float64, C*C) // the kernel's A2 blocks, unrounded
	Y := make([]float64, C*C)
	ones := make([]float64, len(beta))
	for i := range ones {
		ones[i] = 1
	}
	chunks(s, func(c0, n int) {
		for h := range s.Hv {
			b := func(j int) float64 {
				if j < n {
					return beta[(c0+j)*s.Hv+h]
				}
				return 0
			}
			chunkL(L, s, k, beta, gcum, c0, n, h)
			chunkL(L1, s, k, ones, gcum, c0, n, h)
			invertDiagonalBlocks(X, L)
			clear(A2)
			for d := 0; d < C; d += 16 {
				for i := range 16 {
					for j := 0; j <= i; j++ {
						*at(A2, d+i, d+j) = *at(X, d+i, d+j) * b(d+j)
					}
				}
			}
			for d := 0; d < C; d += 32 {
				blockMul(r, Y, d+16, d, 16, 16, A2, d+16, d+16, L1, d+16, d, 16, 1)
				blockMul(r, A2, d+16, d, 16, 16, Y, d+16, d, A2, d, d, 16, -1)
			}
			blockMul(r, Y, 32, 0, 32, 32, A2, 32, 32, L1, 32, 0, 32, 1)
			blockMul(r, A2, 32, 0, 32, 32, Y, 32, 0, A2, 0, 0, 32, -1)
			for i := range n {
				row := A[((c0+i)*s.Hv+h)*C:][:i+1]
				for j := range row {
					if bj := b(j); bj != 0 {
						row[j] = *at(A2, i, j) / bj
					}
				}
			}
		}
	})
	return A
}

// fusedInverse, as worstO's inverse, takes A from emulateSolveAFused.
const fusedInverse rounding = -2

// Unrounded, the blockwise inverse is SolveA's forward substitution; the
// fused kernel's, whose fp16 roundings cannot be turned off, lands within
// them (a few 2^-11 of the blocks' 0.1).
func TestEmulateSolveAExact(t *testing.T) {
	for i, in := range precisionCases(t) {
		gcum, want := gcumAndA(t, in)
		e := Compare64(emulateSolveAFused(in.Shape, in.K, in.Beta, gcum), want)
		if e.MaxAbs > 5e-4 || e.Missing != 0 || i == 0 && e.MaxAbs < 1e-6 {
			t.Errorf("the fused kernel's inverse against forward substitution: %v, want fp16's few 2^-11 of 0.1", e)
		}
	}
	for _, in := range precisionCases(t) {
		gcum, want := gcumAndA(t, in)
		got := emulateSolveA(in.Shape, in.K, in.Beta, gcum, exact)
		if e := Compare64(got, want); e.MaxAbs > 1e-9 || e.Missing != 0 {
			t.Errorf("blockwise inverse against forward substitution: %v", e)
		}
	}
	// On the recipe's decay the off-diagonal blocks are of order 0.1, so
	// fp16 operands move them by about 2^-11 of that. (Under strong decay
	// they are nearly zero, and so is the change.)
	in := precisionCases(t)[0]
	gcum, want := gcumAndA(t, in)
	if e := Compare64(emulateSolveA(in.Shape, in.K, in.Beta, gcum, toFP16), want); e.MaxAbs < 1e-6 || e.MaxAbs > 1e-3 {
		t.Errorf("fp16 operands moved A by at most %.2e (%v): want about 2^-11 of the blocks' 0.1", e.MaxAbs, e)
	}
}
