package main

import (
	"testing"
)

// FuzzParseSoakProblem feeds --problem specs to parseSoakProblem: an
// accepted spec prints back to a spec that parses to the same problem.
func FuzzParseSoakProblem(f *testing.F) {
	for k := range 8 {
		f.Add(drawSoakProblem(1, k).String())
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseSoakProblem(s)
		if err != nil {
			return
		}
		back, err := parseSoakProblem(p.String())
		if err != nil {
			t.Fatalf("%q accepted, its print %q is not: %v", s, p, err)
		}
		if back.String() != p.String() {
			t.Fatalf("%q: prints %q, reparsed prints %q", s, p, back)
		}
		if err := p.shape().Validate(); err != nil {
			t.Fatalf("%q accepted, but its shape is not valid: %v", s, err)
		}
	})
}
