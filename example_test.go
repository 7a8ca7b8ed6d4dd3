package gdn_test

import (
	"errors"
	"fmt"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/ref"
)

// The whole flow on host slices: draw inputs of the docs/SPEC.md recipe,
// derive g_cumsum and A with the reference package, check the chunked form
// the kernels compute against the token-by-token recurrence (in float64, no
// GPU needed), then run the core forward on the GPU when there is one. The
// output is the same with and without a GPU: the GPU part prints only when
// its result misses a pass line.
func Example() {
	s := ref.Shape{B: 1, T: 300, Hq: 2, Hv: 4} // four full chunks and a tail of 44 tokens
	in, err := ref.Recipe(s, 1, ref.RecipeOptions{WithH0: true})
	if err != nil {
		panic(err)
	}
	gcum, _ := ref.ChunkCumsum(s, in.G)
	A, _ := ref.SolveA(s, in.K, in.Beta, gcum)
	wantO, wantHt, _ := ref.Recurrent(in)

	o, ht, _ := ref.Chunked(in, gcum, A)
	fmt.Println("chunked form within the pass lines: o", ref.Compare64(o, wantO).Within(ref.PassO) == nil,
		"ht", ref.Compare64(ht, wantHt).Within(ref.PassHt) == nil)

	rt, err := gdn.Open(gdn.Options{})
	switch {
	case errors.Is(err, gdn.ErrNoCUDA), errors.Is(err, gdn.ErrUnsupportedGPU):
		return // no GPU, a build without -tags cuda, or a GPU the kernels do not run on
	case err != nil:
		fmt.Println(err)
		return
	}
	defer rt.Close()
	f32 := ref.Float32s
	res, err := rt.ForwardHost(&gdn.HostCoreArgs{
		B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, Dtype: gdn.BF16,
		Q: f32(in.Q), K: f32(in.K), V: f32(in.V), G: f32(gcum), Beta: f32(in.Beta), A: f32(A),
		H0: f32(in.H0), FinalState: true,
	})
	if err == nil {
		err = errors.Join(ref.Compare32(res.O, wantO).Within(ref.PassO), ref.Compare32(res.Ht, wantHt).Within(ref.PassHt))
	}
	if err != nil {
		fmt.Println("GPU:", err)
	}
	// Output:
	// chunked form within the pass lines: o true ht true
}

// Planning needs no GPU: PlanFor says which kernel a call of a given shape
// runs, and how, on a GPU of a given size. Here a Qwen3.5 layer's prefill
// (16 key and 32 value heads) of 8 prompts of 4096 tokens on an H200's 132
// SMs, as the core forward and as the full forward with its L2 norm (whose
// whole preparation the core kernel then does); a long prompt on few heads
// (tensor parallelism over 8 GPUs), cut into segments that run in
// parallel; and a shape gdn cannot run.
func Example_plan() {
	for _, r := range []gdn.PlanRequest{
		{B: 8, T: 4096, Hq: 16, Hv: 32, Dtype: gdn.BF16, SMs: 132},
		{B: 8, T: 4096, Hq: 16, Hv: 32, Dtype: gdn.BF16, SMs: 132, Full: true, L2Norm: true},
		{B: 1, T: 32768, Hq: 2, Hv: 8, Dtype: gdn.BF16, SMs: 132},
	} {
		plan, err := gdn.PlanFor(r)
		if err != nil {
			panic(err)
		}
		fmt.Println(plan)
	}
	_, err := gdn.PlanFor(gdn.PlanRequest{B: 1, T: 8192, Hq: 2, Hv: 3, Dtype: gdn.BF16, SMs: 132})
	var ae *gdn.ArgError
	fmt.Println(errors.As(err, &ae), ae.Arg, "-", err)
	// Output:
	// gdn_hopper_bf16_bv128 grid=[32 8 1] block=[512 1 1] smem=221184
	// gdn_hopper_bf16_fused_bv128 grid=[32 8 1] block=[512 1 1] smem=227328
	// gdn_hopper_bf16_bv128 grid=[8 1 1] block=[512 1 1] smem=221184 split=15x31 scan-columns=8 early-first
	// true Hv - gdn: Hv: Hv = 3 value heads must be a multiple of Hq = 2 query/key heads
}
