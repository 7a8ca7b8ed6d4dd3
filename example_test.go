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

// Validation and planning need no GPU: a bad argument is an ArgError naming
// it, and the plan says which kernel variant a problem runs on.
func ExampleValidateCore() {
	tensor := func(p uintptr, dt gdn.Dtype, shape ...int) gdn.Tensor {
		t := gdn.Tensor{Ptr: p, Dtype: dt, Shape: shape}
		t.Bytes = t.Elems() * dt.Size()
		return t
	}
	a := &gdn.CoreArgs{
		Q: tensor(0x10000000, gdn.BF16, 1, 8192, 2, 128), K: tensor(0x20000000, gdn.BF16, 1, 8192, 2, 128),
		V: tensor(0x30000000, gdn.BF16, 1, 8192, 8, 128), G: tensor(0x40000000, gdn.FP32, 1, 8192, 8),
		Beta: tensor(0x50000000, gdn.FP32, 1, 8192, 8), A: tensor(0x60000000, gdn.FP32, 1, 8192, 8, 64),
		O: tensor(0x70000000, gdn.BF16, 1, 8192, 8, 128),
	}
	p, err := gdn.ValidateCore(a)
	if err != nil {
		panic(err)
	}
	plan, _ := gdn.PlanCore(p, 132)
	fmt.Println(p, "->", plan.Variant.Name, plan.Grid)

	a.V.Shape = []int{1, 8192, 3, 128}
	_, err = gdn.ValidateCore(a)
	fmt.Println(err)
	// Output:
	// B=1 T=8192 Hq=2 Hv=8 N=1 bf16 -> gdn_hopper_bf16_bv64 [16 1 1]
	// gdn: v: Hv = 3 value heads must be a multiple of Hq = 2 query/key heads (shape [1 8192 3 128])
}

// The kernels are written for sm_90a (Hopper): KernelTarget reads a target
// as a command line gives it, and refuses any other in one line.
func ExampleKernelTarget() {
	t, note, _ := gdn.KernelTarget("sm_90")
	fmt.Println(t, "-", note)
	_, _, err := gdn.KernelTarget("sm_80")
	fmt.Println(err)
	// Output:
	// sm_90a - sm_90 taken as sm_90a: the kernels use wgmma and TMA instructions, which only arch-specific sm_90a code contains
	// gdn: sm_80: unsupported GPU: the kernels need sm_90a (compute capability 9.0: H100, H200, H20, GH200 or a MIG slice of one)
}
