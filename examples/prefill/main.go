// Command prefill runs one realistic Gated DeltaNet prefill batch through
// gdn and checks it against the float64 reference.
//
// The batch has Qwen3.5's head layout (16 query/key heads, 32 value heads,
// head dimension 128) and four packed sequences of 4096, 1000, 2500 and 300
// tokens, with an initial state h0 and the final state ht returned, in
// bf16. The inputs follow docs/SPEC.md's recipe; g_cumsum and A, which the core
// forward is given, come from the reference package.
//
// The whole batch is too big for the token-by-token reference on a CPU, so
// the check runs it on two query/key heads and the value heads that read
// them (heads 0-1 and 30-31): the recurrence of one value head depends on
// no other head, so the slice is checked exactly as in the full call
// (examples/internal/headcheck).
//
// Without a GPU (a build without -tags cuda), it says so and instead
// checks the reference's chunked form against its recurrence on a small
// case, then exits 0.
//
//	make run        # picks -tags cuda where /dev/nvidia* exists
//	go run ./examples/prefill
package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/examples/internal/headcheck"
	"github.com/gdnjit/gdn/ref"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "prefill:", err)
		os.Exit(1)
	}
}

func run() error {
	rt, err := gdn.Open(gdn.Options{})
	if errors.Is(err, gdn.ErrNoCUDA) {
		fmt.Println("no GPU: this build has no CUDA support (build with -tags cuda on a GPU machine); checking the CPU reference on a small case instead")
		return cpuReference()
	}
	if err != nil {
		return err
	}
	defer rt.Close()
	return gpuBatch(rt)
}

// The batch: Qwen3.5's layout, four packed sequences.
var (
	batchLens      = []int{4096, 1000, 2500, 300}
	batchHq        = 16
	batchHv        = 32
	batchSeed      = uint64(2026)
	checkedKeyHead = []int{0, 15} // value heads 0-1 and 30-31
)

// gpuBatch runs the batch on the GPU, checks a slice of it and times it.
func gpuBatch(rt *gdn.Runtime) error {
	info := rt.Device()
	fmt.Printf("GPU: %s, %d SMs, kernels for %s\n", info.Name, info.SMs, rt.Target())
	c := ref.Case{Name: "prefill", Hq: batchHq, Hv: batchHv, Lens: batchLens}
	s := c.Shape()

	start := time.Now()
	in, gcum, A, err := prepare(s)
	if err != nil {
		return err
	}
	fmt.Printf("batch: %d sequences %v, %d tokens, Hq=%d Hv=%d, bf16, h0 and ht; inputs, g_cumsum and A prepared in %.1f s\n",
		s.N(), batchLens, s.T, s.Hq, s.Hv, time.Since(start).Seconds())

	args := hostArgs(in, gcum, A)
	var res *gdn.HostCoreResult
	for _, label := range []string{"first call: compiles or loads the kernel, allocates its buffers", "second call: buffers reused"} {
		start = time.Now()
		if res, err = rt.ForwardHost(args); err != nil {
			return err
		}
		fmt.Printf("ForwardHost: %7.1f ms wall (%s; with conversion, upload and download)\n",
			float64(time.Since(start).Microseconds())/1e3, label)
	}

	if err := timeOnDevice(rt, args, c); err != nil {
		return err
	}
	return checkSlice(in, res)
}

// prepare draws the recipe inputs (q, k, v rounded to bf16) and computes
// the chunk-local cumulative gates and A.
func prepare(s ref.Shape) (in ref.Inputs, gcum, A []float64, err error) {
	in, err = ref.Recipe(s, batchSeed, ref.RecipeOptions{Dtype: dtype.BF16, WithH0: true})
	if err != nil {
		return in, nil, nil, err
	}
	if gcum, err = ref.ChunkCumsum(s, in.G); err != nil {
		return in, nil, nil, err
	}
	A, err = ref.SolveA(s, in.K, in.Beta, gcum)
	return in, gcum, A, err
}

// hostArgs packs reference inputs into ForwardHost's arguments. The values
// of q, k and v are already bf16, so rounding them again changes nothing.
func hostArgs(in ref.Inputs, gcum, A []float64) *gdn.HostCoreArgs {
	s := in.Shape
	return &gdn.HostCoreArgs{
		B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: gdn.BF16,
		Q: ref.Float32s(in.Q), K: ref.Float32s(in.K), V: ref.Float32s(in.V), G: ref.Float32s(gcum), Beta: ref.Float32s(in.Beta), A: ref.Float32s(A), H0: ref.Float32s(in.H0),
		FinalState: true,
	}
}

// checkSlice compares o and ht of the checked heads with ref.Recurrent and
// fails when either misses docs/SPEC.md's pass line.
func checkSlice(in ref.Inputs, res *gdn.HostCoreResult) error {
	start := time.Now()
	eo, eht, err := headcheck.Compare(in.Shape, res, checkedKeyHead, func(kh int) (o, ht []float64, err error) {
		return ref.Recurrent(headcheck.Inputs(in, kh))
	})
	if err != nil {
		return err
	}
	fmt.Printf("check: value heads %s of all %d tokens against the float64 recurrence (%.1f s)\n",
		headcheck.ValueHeads(in.Shape, checkedKeyHead), in.Shape.T, time.Since(start).Seconds())
	return headcheck.Report(eo, eht)
}

// timeOnDevice shows the fast path: inputs stay on the device and Forward
// is called on a stream, here timed with CUDA events over repeated calls
// (the Runtime captures a CUDA graph at the second identical call and replays it from then on).
func timeOnDevice(rt *gdn.Runtime, h *gdn.HostCoreArgs, c ref.Case) error {
	// UploadCore returns once the data is on the device, so a stream of our
	// own can use it at once.
	d, err := rt.UploadCore(h)
	if err != nil {
		return err
	}
	defer d.Free()
	a := d.Args
	stream, err := rt.NewStream()
	if err != nil {
		return err
	}
	defer rt.DestroyStream(stream)
	const warm, calls = 3, 20
	for i := 0; i < warm; i++ {
		if err := rt.Forward(a, stream); err != nil {
			return err
		}
	}
	total, err := rt.TimeMs(stream, func() error {
		for i := 0; i < calls; i++ {
			if err := rt.Forward(a, stream); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	ms := float64(total) / calls
	fmt.Printf("Forward on device buffers: %.4f ms per call (CUDA events, mean of %d calls), %.0f TFLOP/s, %.1fx the roofline floor\n",
		ms, calls, c.FLOPs()/(ms*1e-3)/1e12, ms/c.FloorMs())
	return nil
}

// cpuReference is the no-GPU path: the reference's chunked form (what the
// kernels compute) against its token-by-token recurrence on a small case
// with two chunks, a tail chunk and G = 2.
func cpuReference() error {
	s := ref.Shape{B: 1, T: 200, Hq: 2, Hv: 4}
	in, err := ref.Recipe(s, batchSeed, ref.RecipeOptions{Dtype: dtype.BF16, WithH0: true})
	if err != nil {
		return err
	}
	start := time.Now()
	oRef, htRef, err := ref.Recurrent(in)
	if err != nil {
		return err
	}
	gcum, err := ref.ChunkCumsum(s, in.G)
	if err != nil {
		return err
	}
	A, err := ref.SolveA(s, in.K, in.Beta, gcum)
	if err != nil {
		return err
	}
	o, ht, err := ref.Chunked(in, gcum, A)
	if err != nil {
		return err
	}
	fmt.Printf("CPU reference: T=%d Hq=%d Hv=%d, bf16 inputs, h0 ~ N(0,1), float64 (%.0f ms)\n",
		s.T, s.Hq, s.Hv, float64(time.Since(start).Microseconds())/1e3)
	fmt.Printf("  o[t=%d, head 3, 0:4] = %.5f (chunked) vs %.5f (recurrent)\n", s.T-1, o[((s.T-1)*s.Hv+3)*ref.D:][:4], oRef[((s.T-1)*s.Hv+3)*ref.D:][:4])
	eo, eht := ref.Compare64(o, oRef), ref.Compare64(ht, htRef)
	errO, errHt := eo.Within(ref.PassO), eht.Within(ref.PassHt)
	fmt.Printf("  chunked vs recurrent: o %v %s, ht %v %s (pass lines of docs/SPEC.md: o %.0e/%.0e, ht %.0e/%.1e)\n",
		eo, headcheck.Verdict(errO), eht, headcheck.Verdict(errHt), ref.PassO.Ratio, ref.PassO.MaxAbs, ref.PassHt.Ratio, ref.PassHt.MaxAbs)
	return errors.Join(errO, errHt)
}
