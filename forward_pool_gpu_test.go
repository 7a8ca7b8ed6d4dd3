//go:build cuda

package gdn_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

// Pooled prefills (docs/SPEC.md, "State pool", "State layout") against
// ref.PoolRecurrent: the core and the full forward, unsplit and split
// (plain and early), in [K,V] and [V,K], fp32 and bf16 pools; packed
// sequences with an empty one (its slot written back unchanged), negative
// slots, G > 1, and every slot the table does not name untouched to the
// bit (a pattern with NaNs).

// poolShape: five packed sequences (one empty, one of one token), G = 2.
var poolShape = ref.Shape{B: 1, T: 560, Hq: 2, Hv: 4, CuSeqlens: []int{0, 0, 1, 131, 431, 560}}

func TestPoolCoreMatchesReference(t *testing.T) {
	runtimes := map[string]*gdn.Runtime{
		"unsplit": testRuntime(t),
		"split":   splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 2})),
		// Both tiles' states variants, whatever the planner picks here.
		"bv64":  variantRuntime(t, "gdn_hopper_bf16_bv64"),
		"bv128": variantRuntime(t, "gdn_hopper_bf16_bv128"),
	}
	for rname, r := range runtimes {
		for _, layout := range []gdn.StateLayout{gdn.StateKV, gdn.StateVK} {
			for _, bf16 := range []bool{false, true} {
				name := fmt.Sprintf("%s_%v_bf16=%v", rname, layout, bf16)
				t.Run(name, func(t *testing.T) {
					spec := poolSpec{shape: poolShape, layout: layout, bf16: bf16, S: 9, slots: []int{6, -1, 0, -1, 8}}
					c := newPooledCall(t, r, spec, 41)
					defer c.free()
					o, pool := c.run(t, tuning.Context(r).WrapStream(0))
					eo, es := c.check(t, o, pool)
					t.Logf("%s: o %v slots %v", name, eo, es)
				})
			}
		}
	}
}

// An early split plan: each sequence's first segment runs from the pool in
// the early pass, the scan starts from its end states.
func TestPoolSplitEarly(t *testing.T) {
	r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 2, EarlyFirstSegment: 1}))
	s := ref.Shape{B: 1, T: 757, Hq: 1, Hv: 2, CuSeqlens: []int{0, 300, 557, 757}}
	for _, layout := range []gdn.StateLayout{gdn.StateKV, gdn.StateVK} {
		c := newPooledCall(t, r, poolSpec{shape: s, layout: layout, bf16: layout == gdn.StateVK, S: 4, slots: []int{3, -1, 1}}, 43)
		pl, err := r.PlanOf(c.argsForPlan())
		if err != nil || !pl.EarlyFirstSegment {
			t.Fatalf("plan %v (%v), want an early split plan", pl, err)
		}
		o, pool := c.run(t, tuning.Context(r).WrapStream(0))
		eo, es := c.check(t, o, pool)
		t.Logf("early %v: o %v slots %v", layout, eo, es)
		c.free()
	}
}

// The full forward from a pool: its preparation kernel's path (plain) and
// the fused core's (L2 norm and the gate inside), unsplit and split.
func TestPoolFullMatchesReference(t *testing.T) {
	cases := fullCases()
	byName := map[string]fullCase{}
	for _, c := range cases {
		byName[c.name] = c
	}
	runtimes := map[string]*gdn.Runtime{
		"unsplit": testRuntime(t),
		"split":   splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 2})),
		// BV 128 unsplit: the fused core's states variant.
		"bv128": variantRuntime(t, "gdn_hopper_bf16_bv128"),
	}
	for _, name := range []string{"plain", "l2norm_gate_G2_varlen"} {
		for rname, r := range runtimes {
			fc := byName[name]
			t.Run(name+"_"+rname, func(t *testing.T) {
				spec := poolSpec{shape: poolShape, full: &fc, layout: gdn.StateVK, S: 7, slots: []int{2, 5, -1, 0, 6}}
				c := newPooledCall(t, r, spec, 47)
				defer c.free()
				o, pool := c.run(t, tuning.Context(r).WrapStream(0))
				eo, es := c.check(t, o, pool)
				t.Logf("full %s %s: o %v slots %v", name, rname, eo, es)
			})
		}
	}
}

// The slot table is data: a new table in the same device buffer, between
// calls on one stream (the second call captures the graph, the later ones
// replay it), gives each call its own right answer.
func TestPoolTableChangesBetweenCalls(t *testing.T) {
	for rname, r := range map[string]*gdn.Runtime{
		"unsplit": testRuntime(t),
		"split":   splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 2})),
	} {
		stream, err := tuning.Context(r).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		c := newPooledCall(t, r, poolSpec{shape: poolShape, S: 9, slots: []int{6, -1, 0, -1, 8}}, 53)
		for call, slots := range [][]int{{6, -1, 0, -1, 8}, {1, 2, 3, 4, 5}, {-1, 8, -1, 7, 0}, {5, -1, 4, 2, -1}} {
			copy(c.spec.slots, slots)
			c.fill()
			c.upload(t) // the pool afresh (states in the slots now named, the pattern elsewhere), the new table
			o, pool := c.run(t, stream)
			eo, es := c.check(t, o, pool)
			t.Logf("%s call %d slots %v: o %v slots %v", rname, call, slots, eo, es)
		}
		c.free()
		stream.Destroy()
	}
}

// [V,K] is an address change only: the same call with its pool transposed
// gives o to the bit and slots that are the exact transposes; so do h0 and
// ht without a pool.
func TestPoolLayoutsTranspose(t *testing.T) {
	for rname, r := range map[string]*gdn.Runtime{
		"unsplit": testRuntime(t),
		"split":   splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 2})),
	} {
		kv := newPooledCall(t, r, poolSpec{shape: poolShape, S: 6, slots: []int{4, -1, 0, 1, -1}}, 59)
		vk := newPooledCall(t, r, poolSpec{shape: poolShape, layout: gdn.StateVK, S: 6, slots: []int{4, -1, 0, 1, -1}}, 59)
		vk.bits = transposeBits(t, kv.bits)
		vk.upload(t)
		oKV, pKV := kv.run(t, tuning.Context(r).WrapStream(0))
		oVK, pVK := vk.run(t, tuning.Context(r).WrapStream(0))
		for i := range oKV {
			if math.Float32bits(oKV[i]) != math.Float32bits(oVK[i]) {
				t.Fatalf("%s: o element %d: %v in [V,K], %v in [K,V]", rname, i, oVK[i], oKV[i])
			}
		}
		if want := transposeBits(t, pKV); !equalBits(want, pVK) {
			t.Errorf("%s: the [V,K] pool is not the [K,V] pool transposed", rname)
		}
		kv.free()
		vk.free()
		testStatesTranspose(t, r, rname)
	}
}

// testStatesTranspose runs one call with h0 and ht in [K,V], then in [V,K]
// with h0 transposed.
func testStatesTranspose(t *testing.T, r *gdn.Runtime, rname string) {
	s := poolShape
	in, _ := ref.Recipe(s, 61, ref.RecipeOptions{WithH0: true})
	gcum, _ := ref.ChunkCumsum(s, in.G)
	A, _ := ref.SolveA(s, in.K, in.Beta, gcum)
	h0VK, _ := ref.ConvertStates(in.H0, ref.LayoutKV, ref.LayoutVK)
	var outO [2][]float32
	var outHt [2][]float32
	for i, h0 := range [][]float64{in.H0, h0VK} {
		up, err := r.UploadCore(&gdn.HostCoreArgs{B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: gdn.BF16,
			Q: f32(in.Q), K: f32(in.K), V: f32(in.V), G: f32(gcum), Beta: f32(in.Beta), A: f32(A), H0: f32(h0), FinalState: true})
		if err != nil {
			t.Fatal(err)
		}
		a := *up.Args
		a.Layout = gdn.StateLayout(i)
		if err := r.Forward(&a, 0); err != nil {
			t.Fatal(err)
		}
		res, err := up.Download()
		if err != nil {
			t.Fatal(err)
		}
		outO[i], outHt[i] = res.O, res.Ht
		up.Free()
	}
	for i := range outO[0] {
		if math.Float32bits(outO[0][i]) != math.Float32bits(outO[1][i]) {
			t.Fatalf("%s: h0 and ht in [V,K]: o element %d: %v, %v in [K,V]", rname, i, outO[1][i], outO[0][i])
		}
	}
	want := make([]float64, len(outHt[0]))
	for i, x := range outHt[0] {
		want[i] = float64(x)
	}
	wantVK, _ := ref.ConvertStates(want, ref.LayoutKV, ref.LayoutVK)
	for i, x := range wantVK {
		if math.Float32bits(float32(x)) != math.Float32bits(outHt[1][i]) {
			t.Fatalf("%s: ht in [V,K] element %d: %v, want %v ([K,V] transposed)", rname, i, outHt[1][i], x)
		}
	}
	if err := ref.Compare32(outHt[0], mustRecurrentHt(t, in)).Within(ref.PassHt); err != nil {
		t.Errorf("%s: ht: %v", rname, err)
	}
}

func mustRecurrentHt(t *testing.T, in ref.Inputs) []float64 {
	_, ht, err := ref.Recurrent(in)
	if err != nil {
		t.Fatal(err)
	}
	return ht
}

// transposeBits transposes every 128 x 128 state of x.
func transposeBits(t *testing.T, x []uint32) []uint32 {
	t.Helper()
	out := make([]uint32, len(x))
	const d = gdn.HeadDim
	for base := 0; base < len(x); base += d * d {
		for k := 0; k < d; k++ {
			for v := 0; v < d; v++ {
				out[base+v*d+k] = x[base+k*d+v]
			}
		}
	}
	return out
}

func equalBits(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
