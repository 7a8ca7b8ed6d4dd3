package ref

import "math"

// Recurrent computes the ground truth of docs/SPEC.md token by token: per
// sequence n and value head h, with state S (128 x 128, index [k, v])
// starting at h0 (or zero),
//
//	S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T
//	o_t = scale S_t^T q_t
//
// and ht = S after the sequence's last token (h0 for an empty sequence).
// in.G is the raw per-token log-gate. Value head h reads q/k head h/G.
// It returns o [B,T,Hv,128] and ht [N,Hv,128,128].
func Recurrent(in Inputs) (o, ht []float64, err error) {
	if err := in.Check(); err != nil {
		return nil, nil, err
	}
	o, ht = recur(in, nil)
	return o, ht, nil
}

// stateVisitor is handed the state of sequence n, value head h after the
// sequence's i-th token (0-based within the sequence), indexed [k, v]. S
// is the recurrence's working state: a visitor copies what it keeps.
type stateVisitor func(n, h, i int, S []float64)

// recur is Recurrent on checked inputs, calling visit (when non-nil) after
// every token. The visitor only reads, so o and ht are the same bits with
// and without one: the pooled calls, checkpoints and per-token states of
// the serving layer are this one recurrence.
func recur(in Inputs, visit stateVisitor) (o, ht []float64) {
	s := in.Shape
	scale := in.EffectiveScale()
	gq := s.G()
	o = make([]float64, s.VLen())
	ht = make([]float64, s.StateLen())
	S := make([]float64, D*D)
	u := make([]float64, D)
	for n, se := range s.Seqs() {
		for h := range s.Hv {
			initState(S, in.H0, n, h, s.Hv)
			hk := h / gq
			for tok := se[0]; tok < se[1]; tok++ {
				q := in.Q[(tok*s.Hq+hk)*D:][:D]
				k := in.K[(tok*s.Hq+hk)*D:][:D]
				v := in.V[(tok*s.Hv+h)*D:][:D]
				decay := math.Exp(in.G[tok*s.Hv+h])
				beta := in.Beta[tok*s.Hv+h]

				// u = S^T k: what the state currently predicts for key k.
				clear(u)
				for i := range D {
					axpy(u, k[i], S[i*D:][:D])
				}
				// Expanding the update: S = decay*S + k (beta (v - decay u))^T,
				// one rank-1 correction instead of forming I - beta k k^T.
				for j := range D {
					u[j] = beta * (v[j] - decay*u[j])
				}
				for i := range D {
					row := S[i*D:][:D]
					for j := range D {
						row[j] = decay*row[j] + k[i]*u[j]
					}
				}
				// o = scale S^T q.
				out := o[(tok*s.Hv+h)*D:][:D]
				for i := range D {
					axpy(out, q[i], S[i*D:][:D])
				}
				for j := range D {
					out[j] *= scale
				}
				if visit != nil {
					visit(n, h, tok-se[0], S)
				}
			}
			copy(ht[(n*s.Hv+h)*D*D:], S)
		}
	}
	return o, ht
}

// axpy adds a*x to y elementwise (len(x) == len(y)).
func axpy(y []float64, a float64, x []float64) {
	for i, xi := range x {
		y[i] += a * xi
	}
}

// dot returns the inner product of x and y (len(x) == len(y)).
func dot(x, y []float64) float64 {
	var sum float64
	for i, xi := range x {
		sum += xi * y[i]
	}
	return sum
}
