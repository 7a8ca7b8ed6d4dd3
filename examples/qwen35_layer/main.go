// Command qwen35_layer runs the prefill of one Qwen3.5-shaped Gated DeltaNet
// layer through gdn the way a serving stack calls it, and checks it against
// the float64 reference.
//
// A serving stack hands the linear-attention kernel what the layer's input
// projections produce, nothing precomputed: q and k not yet normalised, v,
// the gate's raw input a and beta = sigmoid(b) per token and value head,
// and the layer's own per-head parameters A_log and dt_bias. gdn's full
// forward (ForwardFull, FLA's chunk_gated_delta_rule with
// use_qk_l2norm_in_kernel and use_gate_in_kernel) takes exactly that: it
// normalises q and k, computes g = -exp(A_log) softplus(a + dt_bias), the
// chunk-local cumulative gate and A, then runs the chunked recurrence.
//
// The batch is a prefill of five prompts of different lengths packed with
// cu_seqlens (one of a single token), Qwen3.5's head layout (16 query/key
// heads, 32 value heads, head dimension 128) in bf16, starting from a zero
// state (fresh prompts) and returning the final state that decoding
// continues from. The program
//
//   - runs it from host slices (ForwardFullHost) twice, the first call
//     compiling or loading the kernels;
//   - times ForwardFull on device buffers, inputs uploaded once, on a
//     stream of its own (CUDA events over repeated calls: what a serving
//     loop sees, the Runtime launching the preparation kernels and, from
//     the second call on, replaying the core's cached CUDA graph);
//   - checks o and ht of four query/key heads and the value heads that
//     read them (0-1, 10-11, 20-21 and 30-31: the gates' weakest to
//     strongest decay) against ref.Full at docs/SPEC.md's pass lines: a
//     value head depends on no other head, so the slice is checked exactly
//     as in the full call, in about a second instead of the minutes the
//     whole batch would take in float64 (examples/internal/headcheck).
//
// Without a GPU (a build without -tags cuda) it says so and checks instead,
// on a small case, that the full forward's steps as gdn's kernels take them
// (the gate and the L2 norm, then g_cumsum, A and the chunked form) give
// the reference's token-by-token result, then exits 0.
//
//	go run -tags cuda ./examples/qwen35_layer   # on a GPU machine
//	go run ./examples/qwen35_layer              # anywhere: the CPU check
package main

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/examples/internal/headcheck"
	"github.com/gdnjit/gdn/ref"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "qwen35_layer:", err)
		os.Exit(1)
	}
}

func run() error {
	rt, err := gdn.Open(gdn.Options{})
	if errors.Is(err, gdn.ErrNoCUDA) {
		fmt.Println("no GPU: this build has no CUDA support (build with -tags cuda on a GPU machine); checking the full forward's steps on the CPU reference instead")
		return cpuReference()
	}
	if err != nil {
		return err
	}
	defer rt.Close()
	return gpuLayer(rt)
}

// The layer and the batch.
var (
	layerHq, layerHv = 16, 32
	promptLens       = []int{3000, 1200, 517, 64, 1}
	layerSeed        = uint64(35)
	checkedKeyHeads  = []int{0, 5, 10, 15} // value heads 0-1, 10-11, 20-21, 30-31
)

// layer holds one call's inputs as the reference takes them (values already
// rounded to what the device reads: q, k, v to bf16, the rest to float32)
// with the gate's parameters.
type layer struct {
	in           ref.Inputs // G holds the gate's raw input a
	aLog, dtBias []float64  // [Hv]
}

// newLayer draws the inputs of a layer with hq query/key heads and hv value
// heads over the packed prompts lens.
//
// The projections' outputs are N(0, 1): q and k at whatever norm they
// come out with (the full forward normalises them), v, the gate's input a,
// and b with beta = sigmoid(b). The per-head gate parameters follow how a
// Mamba-style gate (Qwen3-Next's and Qwen3.5's) is initialised: A spread
// over [1, 16], A_log = log(A), and dt_bias the inverse softplus of a time
// step between 0.001 and 0.1 (log-spaced), so the gates decay from barely
// to strongly across the heads, as in a trained layer.
func newLayer(hq, hv int, lens []int, seed uint64) (*layer, error) {
	c := ref.Case{Hq: hq, Hv: hv, Lens: lens}
	s := c.Shape()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	normals := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		return x
	}
	l := &layer{in: ref.Inputs{Shape: s}}
	l.in.Q = ref.QuantizeBF16(normals(s.QKLen()))
	l.in.K = ref.QuantizeBF16(normals(s.QKLen()))
	l.in.V = ref.QuantizeBF16(normals(s.VLen()))
	l.in.G = ref.QuantizeF32(normals(s.GateLen())) // a
	l.in.Beta = make([]float64, s.GateLen())
	for i := range l.in.Beta {
		l.in.Beta[i] = float64(float32(ref.Sigmoid(rng.NormFloat64())))
	}
	l.aLog, l.dtBias = make([]float64, hv), make([]float64, hv)
	for h := range hv {
		frac := float64(h) / float64(max(hv-1, 1))
		l.aLog[h] = float64(float32(math.Log(1 + 15*frac)))
		dt := 0.001 * math.Pow(100, frac)
		l.dtBias[h] = float64(float32(dt + math.Log(-math.Expm1(-dt)))) // softplus(dtBias) = dt
	}
	return l, nil
}

// options are the reference's in-kernel steps of the layer's call.
func (l *layer) options() ref.FullOptions {
	return ref.FullOptions{L2Norm: true, ALog: l.aLog, DtBias: l.dtBias}
}

// hostArgs is the call as a serving stack makes it: bf16, packed prompts,
// the gate and the L2 norm inside, a zero initial state, the final state
// returned.
func (l *layer) hostArgs() *gdn.HostFullArgs {
	s := l.in.Shape
	return &gdn.HostFullArgs{B: s.B, T: s.T, Hq: s.Hq, Hv: s.Hv, CuSeqlens: s.CuSeqlens, Dtype: gdn.BF16,
		Q: ref.Float32s(l.in.Q), K: ref.Float32s(l.in.K), V: ref.Float32s(l.in.V), G: ref.Float32s(l.in.G),
		Beta: ref.Float32s(l.in.Beta), ALog: ref.Float32s(l.aLog), DtBias: ref.Float32s(l.dtBias),
		FinalState: true, L2Norm: true, GateInKernel: true}
}

// gpuLayer runs the layer on the GPU, times it and checks a slice of it.
func gpuLayer(rt *gdn.Runtime) error {
	info := rt.Device()
	fmt.Printf("GPU: %s, %d SMs, kernels for %s\n", info.Name, info.SMs, rt.Target())
	l, err := newLayer(layerHq, layerHv, promptLens, layerSeed)
	if err != nil {
		return err
	}
	s := l.in.Shape
	fmt.Printf("layer: Hq=%d Hv=%d, head dimension %d, bf16; %d prompts %v packed (%d tokens); gate from A_log, dt_bias and a, q and k L2-normalised inside; h0 zero, ht returned\n",
		s.Hq, s.Hv, gdn.HeadDim, s.N(), promptLens, s.T)

	args := l.hostArgs()
	var res *gdn.HostCoreResult
	for _, label := range []string{"first call: compiles or loads the kernels, allocates buffers and scratch", "second call: all reused"} {
		start := time.Now()
		if res, err = rt.ForwardFullHost(args); err != nil {
			return err
		}
		fmt.Printf("ForwardFullHost: %7.1f ms wall (%s; with conversion, upload and download)\n",
			float64(time.Since(start).Microseconds())/1e3, label)
	}
	if err := timeOnDevice(rt, args, ref.Case{Name: "qwen35_layer", Hq: s.Hq, Hv: s.Hv, Lens: promptLens}); err != nil {
		return err
	}
	return checkSlice(l, res)
}

// timeOnDevice times ForwardFull on device buffers, as a serving loop
// calls it: inputs uploaded once, calls on a stream of the Runtime's
// context, CUDA events around repeated calls.
func timeOnDevice(rt *gdn.Runtime, h *gdn.HostFullArgs, c ref.Case) error {
	// UploadFull returns once the data is on the device, so a stream of our
	// own can use it at once.
	d, err := rt.UploadFull(h)
	if err != nil {
		return err
	}
	defer d.Free()
	stream, err := rt.NewStream()
	if err != nil {
		return err
	}
	defer rt.DestroyStream(stream)
	plan, err := rt.PlanOfFull(d.Args)
	if err != nil {
		return err
	}
	const warm, calls = 3, 20
	for range warm {
		if err := rt.ForwardFull(d.Args, stream); err != nil {
			return err
		}
	}
	total, err := rt.TimeMs(stream, func() error {
		for range calls {
			if err := rt.ForwardFull(d.Args, stream); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	ms := total / calls
	fmt.Printf("ForwardFull on device buffers: %.4f ms per call (CUDA events, mean of %d calls), %.0f TFLOP/s, %.1fx the roofline floor; core plan %v\n",
		ms, calls, c.FLOPs()/(ms*1e-3)/1e12, ms/c.FloorMs(), plan)
	return nil
}

// checkSlice compares o and ht of the checked key heads with ref.Full and
// fails when either misses docs/SPEC.md's pass line.
func checkSlice(l *layer, res *gdn.HostCoreResult) error {
	start := time.Now()
	s := l.in.Shape
	eo, eht, err := headcheck.Compare(s, res, checkedKeyHeads, func(kh int) (o, ht []float64, err error) {
		sub := l.keyHeadSlice(kh)
		return ref.Full(sub.in, sub.options())
	})
	if err != nil {
		return err
	}
	fmt.Printf("check: value heads %s of all %d tokens against ref.Full, float64 (%.1f s)\n",
		headcheck.ValueHeads(s, checkedKeyHeads), s.T, time.Since(start).Seconds())
	return headcheck.Report(eo, eht)
}

// keyHeadSlice returns the layer restricted to query/key head kh: Hq = 1,
// the G value heads that read it and their gate parameters.
func (l *layer) keyHeadSlice(kh int) *layer {
	g := l.in.Shape.G()
	return &layer{in: headcheck.Inputs(l.in, kh), aLog: l.aLog[kh*g : (kh+1)*g], dtBias: l.dtBias[kh*g : (kh+1)*g]}
}

// cpuReference is the no-GPU path. On a small layer (two query/key heads,
// four value heads, three prompts with tail chunks) it takes the full
// forward's steps the way gdn's kernels take them: the gate from A_log,
// dt_bias and a, q and k normalised and rounded to fp16 (as the device
// keeps them), the chunk-local cumulative gate, A, then the chunked form;
// and holds the result to ref.Full, the token-by-token float64 definition.
func cpuReference() error {
	l, err := newLayer(2, 4, []int{130, 1, 69}, layerSeed)
	if err != nil {
		return err
	}
	start := time.Now()
	oRef, htRef, err := ref.Full(l.in, l.options())
	if err != nil {
		return err
	}
	in, s := l.in, l.in.Shape
	if in.G, err = ref.GateFromRaw(in.G, l.aLog, l.dtBias); err != nil {
		return err
	}
	for _, x := range []*[]float64{&in.Q, &in.K} {
		n, err := ref.L2Normalize(*x)
		if err != nil {
			return err
		}
		*x = ref.QuantizeFP16(n)
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
	fmt.Printf("CPU reference: prompts %v, Hq=%d Hv=%d, gate from A_log, dt_bias and a, q and k normalised inside, float64 (%.0f ms)\n",
		[]int{130, 1, 69}, s.Hq, s.Hv, float64(time.Since(start).Microseconds())/1e3)
	fmt.Println("chunked steps (as the kernels take them) against ref.Full (token by token); the whole difference is the")
	fmt.Println("fp16 rounding of the normalised q and k, which the device keeps (unrounded, they agree to 1e-15):")
	return headcheck.Report(ref.Compare64(o, oRef), ref.Compare64(ht, htRef))
}
