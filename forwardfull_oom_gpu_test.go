//go:build cuda

package gdn_test

import (
	"math"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

// A Runtime that finds the device out of memory gives back what it keeps
// for repeated calls. Call A's prepared call (working buffers of a few
// tens of MB, kept for its next repeat) sits idle; the device is then
// filled until call B's buffers (the same inputs, other outputs) no
// longer fit. B drops A's idle call, takes its memory and runs, with A's
// outputs bit for bit. Before, B failed out of memory. A runs again
// afterwards, prepared anew.
func TestFullOutOfMemoryDropsIdleCalls(t *testing.T) {
	r, err := gdn.Open(gdn.Options{NoGraphs: true}) // its own Runtime: the slab counts are this test's
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Few heads and a long sequence: the preparation kernel with its
	// working buffers (beta's logits keep the call out of the fused
	// kernel, which has none), 65,536 x 4 x 132 bytes, about 35 MB.
	c := fullCase{"oom", ref.Shape{B: 1, T: 1 << 16, Hq: 2, Hv: 4}, ref.RecipeOptions{WithH0: true}, false, false, false}
	_, _, h := fullCaseInputs(t, c, 11)
	var ups [2]*gdn.DeviceFullArgs
	for i := range ups {
		if ups[i], err = r.UploadFull(h); err != nil {
			t.Fatal(err)
		}
		defer ups[i].Free()
		ups[i].Args.BetaLogits = true
	}
	ctx := tuning.Context(r)
	run := func(i int) error {
		if err := r.ForwardFull(ups[i].Args, 0); err != nil {
			return err
		}
		return ctx.WrapStream(0).Synchronize()
	}
	if err := run(0); err != nil {
		t.Fatal(err)
	}
	if live, _ := gdn.FullSlabCounts(r); live != 1 {
		t.Fatalf("%d slabs after call A, want 1", live)
	}

	// Fill the device until less than half of A's slab is free.
	release := hogMemory(t, ctx, uint64(h.T*h.Hv*132/2))
	defer release()
	if err := run(1); err != nil {
		t.Fatalf("call B with A's call idle: %v", err)
	}
	if live, allocs := gdn.FullSlabCounts(r); live != 1 || allocs != 2 {
		t.Errorf("after B: %d slabs in use, %d allocated; want 1 (A's dropped), 2", live, allocs)
	}
	release()
	if err := run(0); err != nil {
		t.Fatalf("call A again: %v", err)
	}
	var res [2]*gdn.HostCoreResult
	for i := range res {
		if res[i], err = ups[i].Download(); err != nil {
			t.Fatal(err)
		}
	}
	// B's outputs are A's on the same inputs.
	sameBits(t, "B's o", res[1].O, res[0].O)
	sameBits(t, "B's ht", res[1].Ht, res[0].Ht)
	for _, x := range res[1].O {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatal("B's o holds NaN or Inf")
		}
	}
}
