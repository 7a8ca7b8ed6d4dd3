package problem

import "github.com/gdnjit/gdn/internal/gdnerr"

// checkNoOverlap refuses outputs (o, ht) that share memory with an input or
// with each other: the kernels' CTAs read their inputs while other CTAs
// write outputs, so an overlap gives a wrong answer, not an error. ht may be
// h0 itself (the state updated in place): each CTA reads its own part of h0
// before it writes that part of ht. A prepared A (the full forward's own
// scratch, or validation's stand-in address) is not the caller's and is
// left out. The extents come from p (the shapes are checked by now): a few
// dozen nanoseconds a call, nothing allocated unless it fails.
func checkNoOverlap(a *Core, p Problem) error {
	tok, hv := uintptr(p.B*p.T), uintptr(p.Hv)
	vo := tok * hv * HeadDim * uintptr(p.Dtype.Size())
	qk := tok * uintptr(p.Hq) * HeadDim * uintptr(p.QKDtype.Size())
	state := uintptr(p.N) * hv * HeadDim * HeadDim * 4
	var aBytes, h0Bytes, cuBytes uintptr
	if !a.APrepared {
		aBytes = tok * hv * ChunkLen * uintptr(a.A.Dtype.Size())
	}
	if p.HasH0 {
		h0Bytes = state
	}
	if a.CuSeqlens != nil {
		cuBytes = uintptr(p.N+1) * uintptr(a.CuSeqlensDevice.Dtype.Size())
	}
	ins := [...]span{{a.Q.Ptr, qk}, {a.K.Ptr, qk}, {a.V.Ptr, vo}, {a.G.Ptr, tok * hv * 4},
		{a.Beta.Ptr, tok * hv * uintptr(a.Beta.Dtype.Size())}, {a.A.Ptr, aBytes}, {a.H0.Ptr, h0Bytes}, {a.CuSeqlensDevice.Ptr, cuBytes}}
	names := [...]string{"q", "k", "v", "g", "beta", "A", "h0", "cu_seqlens (device)"}
	const h0 = 6
	o := span{a.O.Ptr, vo}
	ht := span{a.Ht.Ptr, 0}
	if p.HasHt {
		ht.n = state
	}
	for i, in := range ins {
		if o.overlaps(in) {
			return overlapError("o", o, names[i], in)
		}
		if ht.overlaps(in) && !(i == h0 && ht.p == in.p) {
			return overlapError("ht", ht, names[i], in)
		}
	}
	if ht.overlaps(o) {
		return gdnerr.Argf("ht", "shares memory with o: the two outputs must not overlap")
	}
	return nil
}

// span is the bytes [p, p + n) of a tensor; n = 0 overlaps nothing.
type span struct{ p, n uintptr }

func (x span) overlaps(y span) bool { return x.n > 0 && y.n > 0 && x.p < y.p+y.n && y.p < x.p+x.n }

func overlapError(out string, o span, in string, i span) error {
	return gdnerr.Argf(out, "shares memory with %s (output [%#x, %#x), input [%#x, %#x)): outputs must not overlap inputs (ht may be h0 itself)",
		in, o.p, o.p+o.n, i.p, i.p+i.n)
}

// spanOf is the bytes t's shape covers from its pointer.
func spanOf(t Tensor) span { return span{t.Ptr, uintptr(t.Elems() * t.Dtype.Size())} }
