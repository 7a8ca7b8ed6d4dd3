package ref

import "math"

// The chunked form of docs/SPEC.md in three steps, as the GPU pipeline splits
// it: ChunkCumsum (raw gates to chunk-local cumulative gates), SolveA (the
// 64x64 unit lower triangular inverse per chunk and head) and Chunked (the
// core forward given both). Together they equal Recurrent to rounding.

// chunks calls f(start, length) for every chunk of every sequence of s, in
// order. Chunks restart at each sequence start and never cross a sequence
// end; the last chunk of a sequence may be shorter than C.
func chunks(s Shape, f func(start, length int)) {
	for _, se := range s.Seqs() {
		for c0 := se[0]; c0 < se[1]; c0 += C {
			f(c0, min(C, se[1]-c0))
		}
	}
}

// ChunkCumsum returns g_cumsum [B,T,Hv]: per value head, the running sum of
// the raw log-gates g [B,T,Hv] within each chunk of C tokens, restarting at
// every chunk and sequence start.
func ChunkCumsum(s Shape, g []float64) ([]float64, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := checkLen("g", len(g), s.GateLen(), "B*T*Hv"); err != nil {
		return nil, err
	}
	out := make([]float64, len(g))
	chunks(s, func(c0, n int) {
		for h := range s.Hv {
			var sum float64
			for tok := c0; tok < c0+n; tok++ {
				sum += g[tok*s.Hv+h]
				out[tok*s.Hv+h] = sum
			}
		}
	})
	return out, nil
}

// SolveA returns A [B,T,Hv,C]: for every chunk and value head,
//
//	A = (I + StrictLower(diag(beta) (K K^T) * Gamma))^-1,  Gamma_ij = exp(g_i - g_j)
//
// with g = gcum (chunk-local cumsum). Row t of the result holds row
// (t - start of its sequence) mod C of its chunk's A; columns past the
// chunk's end, and above the diagonal, are 0. k is [B,T,Hq,128], beta and
// gcum are [B,T,Hv].
func SolveA(s Shape, k, beta, gcum []float64) ([]float64, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := checkLen("k", len(k), s.QKLen(), "B*T*Hq*128"); err != nil {
		return nil, err
	}
	if err := checkLen("beta", len(beta), s.GateLen(), "B*T*Hv"); err != nil {
		return nil, err
	}
	if err := checkLen("g_cumsum", len(gcum), s.GateLen(), "B*T*Hv"); err != nil {
		return nil, err
	}
	A := make([]float64, s.ALen())
	gq := s.G()
	chunks(s, func(c0, n int) {
		for h := range s.Hv {
			hk := h / gq
			row := func(i int) []float64 { return A[((c0+i)*s.Hv+h)*C:][:C] }
			// Forward substitution: (I + M) A = I gives, row by row,
			// A_i = e_i - sum_{j<i} M_ij A_j, and A_j (j < i) is already known.
			for i := range n {
				ai := row(i)
				ai[i] = 1
				ki := k[((c0+i)*s.Hq+hk)*D:][:D]
				gi := gcum[(c0+i)*s.Hv+h]
				bi := beta[(c0+i)*s.Hv+h]
				for j := range i {
					kj := k[((c0+j)*s.Hq+hk)*D:][:D]
					// The difference first: exp(-g_j) alone overflows under strong decay.
					m := bi * dot(ki, kj) * math.Exp(gi-gcum[(c0+j)*s.Hv+h])
					if m != 0 {
						axpy(ai[:j+1], -m, row(j)[:j+1])
					}
				}
			}
		}
	})
	return A, nil
}

// Chunked computes the chunked form of docs/SPEC.md given g_cumsum gcum [B,T,Hv]
// and A [B,T,Hv,C] (as from ChunkCumsum and SolveA); in.G is ignored and may
// be nil. Per sequence and value head, with state S_c entering each chunk
// (h0 or zero for the first) and g = gcum within the chunk:
//
//	U'      = K @ S_c
//	W'      = beta * (V - exp(g) * U')
//	V_new   = A @ W'
//	O       = scale * (exp(g) * (Q @ S_c) + Lower(Q K^T * Gamma) @ V_new)
//	S_{c+1} = exp(g_last) * S_c + (K * exp(g_last - g))^T @ V_new
//
// Only the lower triangle of A, diagonal included, is read. Empty sequences
// leave their state at h0 and have no rows of o. It returns o [B,T,Hv,128]
// and ht [N,Hv,128,128].
func Chunked(in Inputs, gcum, A []float64) (o, ht []float64, err error) {
	if err := in.check(false); err != nil {
		return nil, nil, err
	}
	s := in.Shape
	if err := checkLen("g_cumsum", len(gcum), s.GateLen(), "B*T*Hv"); err != nil {
		return nil, nil, err
	}
	if err := checkLen("A", len(A), s.ALen(), "B*T*Hv*64"); err != nil {
		return nil, nil, err
	}
	scale := in.EffectiveScale()
	gq := s.G()
	o = make([]float64, s.VLen())
	ht = make([]float64, s.StateLen())
	S := make([]float64, D*D)
	W := make([]float64, C*D)  // W' rows of the current chunk
	Vn := make([]float64, C*D) // V_new rows
	for n, se := range s.Seqs() {
		for h := range s.Hv {
			initState(S, in.H0, n, h, s.Hv)
			hk := h / gq
			for c0 := se[0]; c0 < se[1]; c0 += C {
				L := min(C, se[1]-c0)
				qRow := func(i int) []float64 { return in.Q[((c0+i)*s.Hq+hk)*D:][:D] }
				kRow := func(i int) []float64 { return in.K[((c0+i)*s.Hq+hk)*D:][:D] }
				gc := func(i int) float64 { return gcum[(c0+i)*s.Hv+h] }

				// W'_i = beta_i (v_i - exp(g_i) S^T k_i).
				for i := range L {
					w := W[i*D:][:D]
					clear(w)
					ki := kRow(i)
					for r := range D {
						axpy(w, ki[r], S[r*D:][:D])
					}
					eg := math.Exp(gc(i))
					b := in.Beta[(c0+i)*s.Hv+h]
					v := in.V[((c0+i)*s.Hv+h)*D:][:D]
					for c := range D {
						w[c] = b * (v[c] - eg*w[c])
					}
				}
				// V_new = A @ W' over the lower triangle.
				for i := range L {
					vn := Vn[i*D:][:D]
					clear(vn)
					ai := A[((c0+i)*s.Hv+h)*C:][:C]
					for j := 0; j <= i; j++ {
						axpy(vn, ai[j], W[j*D:][:D])
					}
				}
				// O_i = scale (exp(g_i) S^T q_i + sum_{j<=i} (q_i.k_j) Gamma_ij V_new_j),
				// from the state entering the chunk.
				for i := range L {
					out := o[((c0+i)*s.Hv+h)*D:][:D]
					qi := qRow(i)
					for r := range D {
						axpy(out, qi[r], S[r*D:][:D])
					}
					eg := math.Exp(gc(i))
					for c := range D {
						out[c] *= eg
					}
					for j := 0; j <= i; j++ {
						axpy(out, dot(qi, kRow(j))*math.Exp(gc(i)-gc(j)), Vn[j*D:][:D])
					}
					for c := range D {
						out[c] *= scale
					}
				}
				// S = exp(g_last) S + sum_j exp(g_last - g_j) k_j V_new_j^T.
				gl := gc(L - 1)
				el := math.Exp(gl)
				for i := range S {
					S[i] *= el
				}
				for j := range L {
					kj := kRow(j)
					w := math.Exp(gl - gc(j))
					vn := Vn[j*D:][:D]
					for r := range D {
						axpy(S[r*D:][:D], w*kj[r], vn)
					}
				}
			}
			copy(ht[(n*s.Hv+h)*D*D:], S)
		}
	}
	return o, ht, nil
}
