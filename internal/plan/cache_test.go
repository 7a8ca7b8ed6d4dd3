package plan

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/problem/problemtest"
)

// The plan cache keys on the shape class only (dtype, N, Hq, Hv): no other
// field of a problem.Problem may change a plan. This fails when the planner starts
// reading one, which must then join planKey.
func TestPlanDependsOnShapeClass(t *testing.T) {
	for _, sms := range []int{8, 66, 132} {
		for _, class := range []problem.Problem{{B: 1, Hq: 1, Hv: 1, N: 1}, {B: 4, Hq: 16, Hv: 32, N: 4}, {B: 2, Hq: 2, Hv: 64, N: 2}, {B: 1, Hq: 8, Hv: 8, N: 7}} {
			for _, dt := range []dtype.Dtype{dtype.BF16, dtype.FP16} {
				class.Dtype = dt
				want, err := Core(class, sms, Knobs{})
				if err != nil {
					t.Fatal(err)
				}
				for _, vary := range []func(p *problem.Problem){
					// The same chains (in chunks): T within the same chunk count,
					// or packed sequences of the same chunk counts.
					func(p *problem.Problem) { p.T = (p.T+63)/64*64 - 1 + min(1, p.T%64) },
					func(p *problem.Problem) {
						l := (p.T + 63) / 64 * 64
						p.Seqs = make([]int, p.N+1)
						for i := range p.N {
							p.Seqs[i+1] = p.Seqs[i] + l
						}
					},
					func(p *problem.Problem) { p.BetaDtype, p.ADtype, p.SeqlensDtype = dtype.FP32, dtype.BF16, dtype.Int64 },
					func(p *problem.Problem) { p.HasH0, p.HasHt = true, true },
					func(p *problem.Problem) { p.Scale = 3 },
				} {
					p := class
					vary(&p)
					if got, _ := Core(p, sms, Knobs{}); got.String() != want.String() || got.TileWidth != want.TileWidth {
						t.Errorf("%v on %d SMs: plan %v, the shape class's %v", p, sms, got, want)
					}
				}
				pc := NewCache(sms, "")
				for range 2 {
					if got, err := pc.Tile(class); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("cached plan %v (%v), want %v", got, err, want)
					}
				}
			}
		}
	}
}

// BenchmarkPlan is the plan lookup of a shape class already planned, what
// a new argument set of a known shape costs in planning.
func BenchmarkPlan(b *testing.B) {
	p, err := problem.ValidateCore(problemtest.Core(4, 2048, 16, 32))
	if err != nil {
		b.Fatal(err)
	}
	pc := NewCache(132, "")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pc.Tile(p); err != nil {
			b.Fatal(err)
		}
	}
}

// The cache serves the planner's plans (or the forced variant's), caches no
// error, stays bounded, and a hit allocates nothing.
func TestPlanCache(t *testing.T) {
	p := problem.Problem{B: 2, T: 100, Hq: 2, Hv: 8, N: 2, Dtype: dtype.BF16}
	forced := NewCache(132, "gdn_hopper_bf16_bv64")
	if pl, err := forced.Tile(p); err != nil || pl.Variant.Name != "gdn_hopper_bf16_bv64" {
		t.Errorf("forced variant: %v, %v", pl, err)
	}
	p16 := p
	p16.Dtype = dtype.FP16
	var ae *gdnerr.ArgError
	for range 2 {
		if _, err := forced.Tile(p16); !errors.As(err, &ae) || ae.Arg != "variant" {
			t.Errorf("bf16 variant on fp16 inputs: %v", err)
		}
	}
	if len(forced.plans) != 1 {
		t.Errorf("%d cached plans, want 1 (errors are not cached)", len(forced.plans))
	}
	if allocs := testing.AllocsPerRun(100, func() { forced.Tile(p) }); allocs != 0 {
		t.Errorf("cached plan: %v allocs, want 0", allocs)
	}
	pc := NewCache(132, "")
	for n := 1; n <= cacheLimit+10; n++ {
		q := p
		q.N, q.B = n, n
		if _, err := pc.Tile(q); err != nil {
			t.Fatal(err)
		}
		if len(pc.plans) > cacheLimit {
			t.Fatalf("%d cached plans, limit %d", len(pc.plans), cacheLimit)
		}
	}
}
