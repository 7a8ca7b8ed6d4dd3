//go:build cuda

package gdn_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

// Checkpoints (docs/SPEC.md, "Checkpoints") against ref: from a pool and
// from h0 and ht, the core and the full forward, unsplit, split and early;
// sequences shorter than E, empty, and of lengths that are multiples of E
// (whose last checkpoint must be their final state, bit for bit).

// ckptShape: sequences of 0, 300, 256 (a multiple of E = 128), 1 and 384
// tokens.
var ckptShape = ref.Shape{B: 1, T: 941, Hq: 2, Hv: 4, CuSeqlens: []int{0, 0, 300, 556, 557, 941}}

func TestCheckpointsFromPool(t *testing.T) {
	runtimes := []struct {
		name string
		r    *gdn.Runtime
	}{
		{"unsplit", testRuntime(t)},
		{"split", splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 2}))},
		{"split3", splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 3}))},
		{"bv64", variantRuntime(t, "gdn_hopper_bf16_bv64")},
		{"bv128", variantRuntime(t, "gdn_hopper_bf16_bv128")},
	}
	for _, rt := range runtimes {
		for _, every := range []int{128, 64, 192} {
			for _, bf16 := range []bool{false, true} {
				name := fmt.Sprintf("%s_E%d_bf16=%v", rt.name, every, bf16)
				t.Run(name, func(t *testing.T) {
					spec := poolSpec{shape: ckptShape, layout: gdn.StateVK, bf16: bf16, S: 6, slots: []int{1, 4, 0, -1, 5}, every: every}
					c := newPooledCall(t, rt.r, spec, 71)
					defer c.free()
					o, pool := c.run(t, tuning.Context(rt.r).WrapStream(0))
					c.check(t, o, pool)
				})
			}
		}
	}
}

// An early split plan's first segments write their checkpoints in the
// early pass.
func TestCheckpointsSplitEarly(t *testing.T) {
	r := splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 2, EarlyFirstSegment: 1}))
	s := ref.Shape{B: 1, T: 813, Hq: 1, Hv: 2, CuSeqlens: []int{0, 300, 556, 813}}
	c := newPooledCall(t, r, poolSpec{shape: s, S: 3, slots: []int{2, 0, -1}, every: 64}, 73)
	defer c.free()
	if pl, err := r.PlanOf(c.argsForPlan()); err != nil || !pl.EarlyFirstSegment {
		t.Fatalf("plan %v (%v), want an early split plan", pl, err)
	}
	o, pool := c.run(t, tuning.Context(r).WrapStream(0))
	c.check(t, o, pool)
}

// The full forward keeps checkpoints too (through its preparation kernel,
// also where it would otherwise prepare inside the core).
func TestCheckpointsFull(t *testing.T) {
	byName := map[string]fullCase{}
	for _, c := range fullCases() {
		byName[c.name] = c
	}
	for _, name := range []string{"plain", "l2norm_gate_G2_varlen", "l2norm_gate_G2_varlen/bv128"} {
		fc := byName[strings.TrimSuffix(name, "/bv128")]
		t.Run(name, func(t *testing.T) {
			r := testRuntime(t)
			if strings.HasSuffix(name, "/bv128") {
				// BV 128: where the core would prepare (or normalise) inside.
				r = variantRuntime(t, "gdn_hopper_bf16_bv128")
			}
			spec := poolSpec{shape: ckptShape, full: &fc, S: 5, slots: []int{0, 1, 2, 3, 4}, every: 128}
			c := newPooledCall(t, r, spec, 79)
			defer c.free()
			o, pool := c.run(t, tuning.Context(r).WrapStream(0))
			c.check(t, o, pool)
		})
	}
}

// With h0 and ht instead of a pool: checkpoints in fp32 [K,V] against
// ref.Checkpoints, and a sequence's last one equal to its ht.
func TestCheckpointsWithStates(t *testing.T) {
	for _, r := range []*gdn.Runtime{testRuntime(t), splitRuntime(t, withKnobs(gdn.Options{}, tuning.Knobs{SegmentChunks: 2}))} {
		s := ckptShape
		in, _ := ref.Recipe(s, 83, ref.RecipeOptions{WithH0: true})
		gcum, _ := ref.ChunkCumsum(s, in.G)
		A, _ := ref.SolveA(s, in.K, in.Beta, gcum)
		up, err := r.UploadCore(&gdn.HostCoreArgs{B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: gdn.BF16,
			Q: f32(in.Q), K: f32(in.K), V: f32(in.V), G: f32(gcum), Beta: f32(in.Beta), A: f32(A), H0: f32(in.H0), FinalState: true})
		if err != nil {
			t.Fatal(err)
		}
		starts, _ := ref.CheckpointStarts(s, 128)
		c := &pooledCall{r: r, spec: poolSpec{shape: s, every: 128}, rows: starts[len(starts)-1]}
		ctx := tuning.Context(r)
		per := s.Hv * gdn.HeadDim * gdn.HeadDim
		if c.ckpt, err = ctx.Alloc(4 * c.rows * per); err != nil {
			t.Fatal(err)
		}
		if err := ctx.MemsetD32(c.ckpt, 0x7fc00000, c.rows*per, nil); err != nil {
			t.Fatal(err)
		}
		a := *up.Args
		a.CheckpointEvery, a.Checkpoints = 128, c.checkpoints()
		if err := r.Forward(&a, 0); err != nil {
			t.Fatal(err)
		}
		res, err := up.Download()
		if err != nil {
			t.Fatal(err)
		}
		got := c.readStates(t, c.ckpt, c.rows*per)
		want, err := ref.Checkpoints(in, 128)
		if err != nil {
			t.Fatal(err)
		}
		gotF := make([]float32, len(got))
		for i, b := range got {
			gotF[i] = math.Float32frombits(b)
		}
		if err := ref.Compare32(gotF, want).Within(ref.PassHt); err != nil {
			t.Errorf("checkpoints: %v", err)
		}
		// Sequence 2 (256 tokens): its last checkpoint is its ht.
		row := starts[3] - 1
		for i := 0; i < per; i++ {
			if got[row*per+i] != math.Float32bits(res.Ht[2*per+i]) {
				t.Fatalf("sequence 2's last checkpoint differs from its ht at element %d: %v, %v", i, gotF[row*per+i], res.Ht[2*per+i])
			}
		}
		ctx.Free(c.ckpt)
		up.Free()
	}
}
