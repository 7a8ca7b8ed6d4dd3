// Command serving runs one Qwen3.5-shaped Gated DeltaNet layer the way a
// continuous-batching server does, over a pool of cached states, and
// checks a sample of its sequences against the float64 recurrence.
//
// Requests arrive a few a step. Each is given a slot of the state pool
// (fp32, [slots, 32, 128, 128]) while one is free, cleared to the zero
// state. Every step makes at most two calls on the layer:
//
//   - one prefill (ForwardFull with a StatePool) of the prompts still
//     being read, in chunks of at most 2,048 tokens a request and 8,192 a
//     step, packed with cu_seqlens; each chunk continues from its slot's
//     state and leaves its final state there, in place;
//   - one decode (Decode) of one token for every request past its prompt,
//     from and into the same slots.
//
// A request that has decoded its tokens leaves, and its slot goes to the
// next. The inputs are what the layer's projections hand the kernel (q and
// k not normalised, the gate's raw input a with the layer's A_log and
// dt_bias, beta), drawn per request and position so that the check can
// replay a request's whole history: when a sampled request ends, its slot
// and its last o are compared with the float64 recurrence over all its
// tokens, prompt and decoded (ref.Full; the value heads of two query/key
// heads, a value head depending on no other). It prints prompt tokens per
// second and decode steps per second of device time (CUDA events around
// each call).
//
// Without a GPU (a build without -tags cuda) it says so and runs the same
// loop, smaller, with package ref standing in for the GPU: the check then
// proves the loop itself (chunks continuing from slots, slots reused).
//
//	go run -tags cuda ./examples/serving   # on a GPU machine
//	go run ./examples/serving              # anywhere: the loop on the CPU
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/gdnjit/gdn"
)

// gpuConfig is Qwen3.5's layer (16 query/key heads, 32 value heads) under
// a small server's load.
var gpuConfig = config{
	Hq: 16, Hv: 32, Slots: 32, Requests: 48, PromptMin: 200, PromptMax: 6000, DecodeSteps: 64,
	Arrivals: 2, Chunk: 2048, StepTokens: 8192, Checked: 3, KeyHeads: []int{0, 15}, Seed: 35,
}

// cpuConfig is the same loop at a size package ref runs in seconds.
var cpuConfig = config{
	Hq: 1, Hv: 2, Slots: 3, Requests: 7, PromptMin: 1, PromptMax: 300, DecodeSteps: 5,
	Arrivals: 1, Chunk: 128, StepTokens: 200, Checked: 7, KeyHeads: []int{0}, Seed: 35,
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "serving:", err)
		os.Exit(1)
	}
}

func run() error {
	logf := func(format string, args ...any) { fmt.Printf("  "+format+"\n", args...) }
	rt, err := gdn.Open(gdn.Options{})
	if errors.Is(err, gdn.ErrNoCUDA) {
		fmt.Println("no GPU: this build has no CUDA support (build with -tags cuda on a GPU machine); running the serving loop with the float64 reference instead")
		st, err := serve(cpuConfig, newCPUBackend(cpuConfig), logf)
		if err != nil {
			return err
		}
		report(cpuConfig, st, 0, 0)
		return nil
	}
	if err != nil {
		return err
	}
	defer rt.Close()
	c := gpuConfig
	fmt.Printf("%s: %d requests (prompts of %d to %d tokens, %d decoded tokens each), Hq=%d Hv=%d, a pool of %d fp32 slots (%d MB)\n",
		rt.Device().Name, c.Requests, c.PromptMin, c.PromptMax, c.DecodeSteps, c.Hq, c.Hv, c.Slots, c.Slots*c.Hv*128*128*4>>20)
	be, err := newGPUBackend(rt, c)
	if err != nil {
		return err
	}
	defer be.close()
	st, err := serve(c, be, logf)
	if err != nil {
		return err
	}
	pre, dec := be.deviceMs()
	report(c, st, pre, dec)
	return nil
}

func report(c config, st stats, prefillMs, decodeMs float64) {
	fmt.Printf("%d steps in %.1f s: %d prefill calls (%d prompt tokens), %d decode calls (%d tokens)\n",
		st.steps, st.wall.Seconds(), st.prefillCalls, st.prefillTokens, st.decodeCalls, st.decodeTokens)
	if prefillMs > 0 && decodeMs > 0 {
		fmt.Printf("prefill: %.0f prompt tokens/s of device time (%.1f ms in all)\n", float64(st.prefillTokens)/prefillMs*1e3, prefillMs)
		fmt.Printf("decode: %.0f steps/s of device time, %.1f sequences a step (%.1f ms in all)\n",
			float64(st.decodeCalls)/decodeMs*1e3, float64(st.decodeTokens)/float64(max(1, st.decodeCalls)), decodeMs)
	}
	fmt.Printf("checked %d requests against the float64 recurrence over their whole history: worst final state %v, worst last o %v: pass\n",
		st.checked, st.worstState, st.worstO)
}
