package main

import (
	"slices"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/problem"
)

// FuzzParseShape feeds --shapes entries to parseShape: an accepted shape is
// a valid problem size, and the planner takes it.
func FuzzParseShape(f *testing.F) {
	for _, s := range []string{"tp8_32k", "Hq=2, Hv=6, T=300, B=3", "Hq=16,Hv=32,lens=4096x8", "Hq=1,Hv=1,lens=7000+33+0+1",
		"Hq=2,Hv=8,lens=0x3", "Hq=4,Hv=4,T=1", "B=2,T=5,Hq=1,Hv=3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseShape(s)
		if err != nil {
			return
		}
		if p.Hq < 1 || p.Hv < 1 || p.Hv%p.Hq != 0 || p.B < 1 || p.T < 0 || p.N < 1 {
			t.Fatalf("%q accepted as %+v", s, p)
		}
		if p.Seqs != nil {
			if len(p.Seqs) != p.N+1 || p.Seqs[0] != 0 || p.Seqs[p.N] != p.T || !slices.IsSorted(p.Seqs) || p.B != 1 {
				t.Fatalf("%q: cu_seqlens %v for N=%d T=%d B=%d", s, p.Seqs, p.N, p.T, p.B)
			}
		}
		if _, err := variantsForShapes([]problem.Problem{p}, []gdn.Dtype{gdn.BF16, gdn.FP16}, 132, true); err != nil {
			t.Fatalf("%q accepted but not planned: %v", s, err)
		}
	})
}

// FuzzParseLens feeds lens= values to parseLens: what it accepts is a list
// of lengths gdn can run (at most 65535 sequences, none negative).
func FuzzParseLens(f *testing.F) {
	for _, s := range []string{"4096x8", "7000+33+1", "0", "0+0+1", "1x65535", "12x", "+"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lens, err := parseLens(s)
		if err != nil {
			return
		}
		if len(lens) == 0 || len(lens) > 65535 || slices.Min(lens) < 0 {
			t.Fatalf("%q accepted as %d lengths (min %d)", s, len(lens), slices.Min(lens))
		}
	})
}
