package ref

import "fmt"

// StateLayout is the order of a 128 x 128 state's entries in memory
// (docs/SPEC.md, "State layout"). It applies to h0, ht, the state pool,
// checkpoints and per-token states alike, chosen per call.
type StateLayout uint8

const (
	// LayoutKV stores entry (k, v) at k*128 + v: FLA's default, and the
	// layout of every state array elsewhere in this package.
	LayoutKV StateLayout = iota
	// LayoutVK stores entry (k, v) at v*128 + k: FLA's state_v_first and
	// FlashInfer's layout.
	LayoutVK
)

// String returns "[K,V]" or "[V,K]".
func (l StateLayout) String() string {
	switch l {
	case LayoutKV:
		return "[K,V]"
	case LayoutVK:
		return "[V,K]"
	}
	return fmt.Sprintf("StateLayout(%d)", uint8(l))
}

// Index returns the offset of entry (k, v) within one state stored in l.
func (l StateLayout) Index(k, v int) int {
	if l == LayoutVK {
		return v*D + k
	}
	return k*D + v
}

// check reports a layout other than LayoutKV and LayoutVK.
func (l StateLayout) check() error {
	if l != LayoutKV && l != LayoutVK {
		return fmt.Errorf("ref: state_layout: want LayoutKV or LayoutVK, got %v: %w", l, ErrShape)
	}
	return nil
}

// TransposeStates returns a copy of x, an array of whole 128 x 128 states
// ([N, Hv, 128, 128] or [S, Hv, 128, 128]), with every state transposed:
// [K,V] states become [V,K] ones and [V,K] states [K,V] ones.
func TransposeStates(x []float64) ([]float64, error) {
	if len(x)%(D*D) != 0 {
		return nil, fmt.Errorf("ref: states: %d values, not a multiple of 128*128: %w", len(x), ErrShape)
	}
	out := make([]float64, len(x))
	for base := 0; base < len(x); base += D * D {
		transposeInto(out[base:][:D*D], x[base:][:D*D])
	}
	return out, nil
}

// ConvertStates returns a copy of the states x, stored in layout from,
// stored in layout to (the same values; transposed when the layouts
// differ).
func ConvertStates(x []float64, from, to StateLayout) ([]float64, error) {
	if err := from.check(); err != nil {
		return nil, err
	}
	if err := to.check(); err != nil {
		return nil, err
	}
	if from != to {
		return TransposeStates(x)
	}
	if len(x)%(D*D) != 0 {
		return nil, fmt.Errorf("ref: states: %d values, not a multiple of 128*128: %w", len(x), ErrShape)
	}
	return append([]float64(nil), x...), nil
}

// transposeInto writes the transpose of the 128 x 128 matrix src to dst.
func transposeInto(dst, src []float64) {
	for i := range D {
		for j := range D {
			dst[j*D+i] = src[i*D+j]
		}
	}
}

// copyState copies one state between [K,V] (as the recurrence keeps it)
// and layout l, either way: for LayoutVK a transpose, its own inverse.
func copyState(dst, src []float64, l StateLayout) {
	if l == LayoutVK {
		transposeInto(dst, src)
		return
	}
	copy(dst, src)
}
