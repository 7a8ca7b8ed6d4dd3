//go:build cuda

package gdn_test

import (
	"fmt"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/kernsrc"
	"github.com/gdnjit/gdn/ref"
)

// TestEveryVariant runs every kernel variant of the catalogue that can run
// a problem, forced through the Variant knob (one Runtime per variant), on
// small and tail shapes (one token, a chunk less one, one chunk, a chunk and
// one, two chunks and two; packed sequences with empty and one-token ones;
// G = 1, 2, 3), checked against the reference; each variant runs unsplit and
// as a split plan with one-chunk segments (its transfer pass and the scan
// kernel with it). It is short on purpose:
// scripts/device-run.sh runs it under compute-sanitizer's memcheck,
// racecheck, synccheck and initcheck.
func TestEveryVariant(t *testing.T) {
	rts := map[string]*gdn.Runtime{}
	defer func() {
		for _, r := range rts {
			r.Close()
		}
	}()
	shapes := []ref.Shape{
		{B: 1, T: 1, Hq: 1, Hv: 1},
		{B: 1, T: 63, Hq: 1, Hv: 2},
		{B: 2, T: 64, Hq: 1, Hv: 1},
		{B: 1, T: 65, Hq: 2, Hv: 6},
		{B: 1, T: 130, Hq: 1, Hv: 2},
		{B: 1, T: 131, Hq: 1, Hv: 2, CuSeqlens: []int{0, 0, 1, 65, 65, 129, 131}},
	}
	ran := 0
	for _, dt := range []gdn.Dtype{gdn.BF16, gdn.FP16} {
		for _, s := range shapes {
			p := problem.Problem{B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, N: s.N(), Seqs: s.CuSeqlens, Dtype: dt}
			for _, v := range kernsrc.Catalogue() {
				if _, err := plan.Variant(p, v.Name); err != nil {
					continue // another dtype, or not a core-forward kernel
				}
				for _, seg := range []int{-1, 1} {
					ran++
					name := fmt.Sprintf("%s/seg%d/T%d_Hq%d_Hv%d_B%d_N%d", v.Name, seg, s.T, s.Hq, s.Hv, s.B, s.N())
					t.Run(name, func(t *testing.T) {
						key := fmt.Sprintf("%s/%d", v.Name, seg)
						r, ok := rts[key]
						if !ok {
							var err error
							if r, err = gdn.Open(withKnobs(gdn.Options{}, tuning.Knobs{Variant: v.Name, SegmentChunks: seg})); err != nil {
								t.Fatal(err)
							}
							rts[key] = r
						}
						in, err := ref.Recipe(s, uint64(len(name)*131+s.T), ref.RecipeOptions{Dtype: dt, WithH0: true})
						if err != nil {
							t.Fatal(err)
						}
						gcum, _ := ref.ChunkCumsum(s, in.G)
						A, _ := ref.SolveA(s, in.K, in.Beta, gcum)
						h := &gdn.HostCoreArgs{B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: dt,
							Q: f32(in.Q), K: f32(in.K), V: f32(in.V), G: f32(gcum), Beta: f32(in.Beta), A: f32(A),
							H0: f32(in.H0), FinalState: true, SeqlensDtype: gdn.Int64}
						res, err := r.ForwardHost(h)
						if err != nil {
							t.Fatal(err)
						}
						wantO, wantHt, _ := ref.Recurrent(in)
						if err := ref.Compare32(res.O, wantO).Within(ref.PassO); err != nil {
							t.Errorf("o: %v", err)
						}
						if err := ref.Compare32(res.Ht, wantHt).Within(ref.PassHt); err != nil {
							t.Errorf("ht: %v", err)
						}
					})
				}
			}
		}
	}
	if ran < 4*len(shapes) {
		t.Fatalf("%d (variant, shape) runs, want at least one per dtype and shape", ran)
	}
}
