package ref

// BetaFromLogits returns beta from its logits b (docs/SPEC.md, "Beta as
// logits"): sigmoid(b), in (0, 1); with negEigval, 2 sigmoid(b), in (0, 2),
// which lets I - beta k k^T have a negative eigenvalue (FLA's
// allow_neg_eigval). The doubling is exact, so 2 sigmoid(b) is twice the
// bits of sigmoid(b).
func BetaFromLogits(b []float64, negEigval bool) []float64 {
	out := make([]float64, len(b))
	for i, x := range b {
		out[i] = Sigmoid(x)
		if negEigval {
			out[i] *= 2
		}
	}
	return out
}
