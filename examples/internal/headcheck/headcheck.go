// Package headcheck checks the examples' GPU results against the float64
// reference on a few query/key heads instead of the whole batch.
//
// The recurrence of a value head depends on no other head: query/key head
// kh and the G = Hv/Hq value heads that read it (kh*G .. kh*G+G-1) are a
// problem of their own, with Hq = 1 and Hv = G. Restricted to it, a
// reference that would take minutes on the whole batch takes about a
// second, and the slice of the GPU's result is checked exactly as in the
// full call.
package headcheck

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/ref"
)

// Inputs returns in restricted to query/key head kh: Hq = 1, the G value
// heads that read it, and their part of h0 when in has one.
func Inputs(in ref.Inputs, kh int) ref.Inputs {
	s := in.Shape
	g := s.G()
	sub := ref.Inputs{Shape: ref.Shape{B: s.B, T: s.T, Hq: 1, Hv: g, CuSeqlens: s.CuSeqlens}, Scale: in.Scale}
	for t := range s.Tokens() {
		sub.Q = append(sub.Q, in.Q[(t*s.Hq+kh)*ref.D:][:ref.D]...)
		sub.K = append(sub.K, in.K[(t*s.Hq+kh)*ref.D:][:ref.D]...)
		sub.V = append(sub.V, in.V[(t*s.Hv+kh*g)*ref.D:][:g*ref.D]...)
		sub.G = append(sub.G, in.G[t*s.Hv+kh*g:][:g]...)
		sub.Beta = append(sub.Beta, in.Beta[t*s.Hv+kh*g:][:g]...)
	}
	if in.H0 != nil {
		for n := range s.N() {
			sub.H0 = append(sub.H0, in.H0[(n*s.Hv+kh*g)*ref.D*ref.D:][:g*ref.D*ref.D]...)
		}
	}
	return sub
}

// Outputs cuts the value heads of key head kh out of a result of shape s
// (o [B, T, Hv, 128], ht [N, Hv, 128, 128]), in the layouts of Inputs.
func Outputs(s ref.Shape, res *gdn.HostCoreResult, kh int) (o, ht []float32) {
	g := s.G()
	for t := range s.Tokens() {
		o = append(o, res.O[(t*s.Hv+kh*g)*ref.D:][:g*ref.D]...)
	}
	for n := range s.N() {
		ht = append(ht, res.Ht[(n*s.Hv+kh*g)*ref.D*ref.D:][:g*ref.D*ref.D]...)
	}
	return o, ht
}

// Compare runs reference on each key head of heads, in parallel, and
// compares its o and ht with that key head's part of res (shape s).
func Compare(s ref.Shape, res *gdn.HostCoreResult, heads []int, reference func(kh int) (o, ht []float64, err error)) (eo, eht ref.Errors, err error) {
	var oGot, htGot []float32
	var oRef, htRef []float64
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(heads))
	for i, kh := range heads {
		wg.Go(func() {
			o, ht, err := reference(kh)
			if err != nil {
				errs[i] = err
				return
			}
			og, hg := Outputs(s, res, kh)
			mu.Lock()
			defer mu.Unlock()
			oRef, htRef = append(oRef, o...), append(htRef, ht...)
			oGot, htGot = append(oGot, og...), append(htGot, hg...)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return eo, eht, err
	}
	return ref.Compare32(oGot, oRef), ref.Compare32(htGot, htRef), nil
}

// ValueHeads lists the value heads of key heads for a message: "0-1, 30-31".
func ValueHeads(s ref.Shape, heads []int) string {
	g := s.G()
	out := ""
	for i, kh := range heads {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%d-%d", kh*g, kh*g+g-1)
	}
	return out
}

// Report prints the errors of o and ht beside docs/SPEC.md's pass lines and
// returns the failures.
func Report(eo, eht ref.Errors) error {
	errO, errHt := eo.Within(ref.PassO), eht.Within(ref.PassHt)
	fmt.Printf("  o : %v   (pass line: ratio %.0e, max %.0e) %s\n", eo, ref.PassO.Ratio, ref.PassO.MaxAbs, Verdict(errO))
	fmt.Printf("  ht: %v   (pass line: ratio %.0e, max %.1e) %s\n", eht, ref.PassHt.Ratio, ref.PassHt.MaxAbs, Verdict(errHt))
	return errors.Join(errO, errHt)
}

// Verdict is "ok" or "FAIL".
func Verdict(err error) string {
	if err != nil {
		return "FAIL"
	}
	return "ok"
}
