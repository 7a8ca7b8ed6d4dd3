package main

import (
	"errors"
	"fmt"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/tuning"
)

const mixedBenchSynopsis = "--mixed [--prompts N] [--prompt-len L] [--decodes D] [--heads HQ/HV] [--reps N] [--calls N] [--seed N]"

// mixedBenchOptions are the flags of `gdn bench --mixed`.
type mixedBenchOptions struct {
	prompts, promptLen, decodes int
	hq, hv                      int
	reps, calls                 int
	seed                        uint64
}

func parseMixedBenchArgs(args []string) (mixedBenchOptions, error) {
	fs := newFlags("bench", mixedBenchSynopsis)
	fs.Bool("mixed", true, "time a mixed batch (Runtime.ForwardMixed: prompt chunks and decode sequences in one call) beside its prompts alone and its decodes alone")
	prompts := fs.Int("prompts", 8, "prompt chunks in the batch")
	promptLen := fs.Int("prompt-len", 1024, "tokens of each prompt chunk")
	decodes := fs.Int("decodes", 256, "decode sequences (one token each) in the batch")
	heads := fs.String("heads", "16/32", "query/key and value heads, HQ/HV (Qwen3.5: 16/32)")
	reps := fs.Int("reps", 30, "timed replays; the median is reported")
	calls := fs.Int("calls", 10, "calls captured per graph")
	seed := fs.Uint64("seed", 1, "seed of the inputs")
	if err := parseFlags(fs, args); err != nil {
		return mixedBenchOptions{}, err
	}
	o := mixedBenchOptions{prompts: *prompts, promptLen: *promptLen, decodes: *decodes, reps: *reps, calls: *calls, seed: *seed}
	if _, err := fmt.Sscanf(*heads, "%d/%d", &o.hq, &o.hv); err != nil || o.hq < 1 || o.hv < 1 || o.hv%o.hq != 0 {
		return o, fmt.Errorf("--heads %s: want HQ/HV, HV a multiple of HQ (e.g. 16/32)", *heads)
	}
	switch {
	case o.prompts < 1 || o.decodes < 1:
		return o, fmt.Errorf("--prompts %d --decodes %d: want at least 1 each (a mixed batch has both)", o.prompts, o.decodes)
	case o.promptLen <= gdn.MaxDecodeTokens:
		return o, fmt.Errorf("--prompt-len %d: want more than %d tokens (shorter sequences are decoded)", o.promptLen, gdn.MaxDecodeTokens)
	case o.reps < 1 || o.calls < 1:
		return o, fmt.Errorf("--reps %d --calls %d: want at least 1 each", o.reps, o.calls)
	}
	return o, nil
}

// runMixedBench times one mixed batch: its decode sequences first, then its
// prompt chunks, as serving schedulers pack them, each from its own slot of
// an fp32 pool; then the prompts alone (ForwardFull) and the decodes alone
// (Decode) on the same buffers; and prints the mixed call's time over the
// sum of the two.
func runMixedBench(args []string) error {
	o, err := parseMixedBenchArgs(args)
	if err != nil {
		return err
	}
	rt, err := openRuntime(gdn.Options{NoGraphs: true})
	if err != nil {
		return err
	}
	defer rt.Close()
	ctx := tuning.Context(rt)
	s, err := ctx.NewStream()
	if err != nil {
		return err
	}
	defer s.Destroy()
	info := rt.Device()
	fmt.Fprintf(stdout, "device: %s, %d SMs; a mixed batch of %d decode sequences and %d prompt chunks of %d tokens, Hq=%d Hv=%d, bf16, fp32 pool, q and k L2-normalised inside; median of %d graphs of %d calls\n",
		info.Name, info.SMs, o.decodes, o.prompts, o.promptLen, o.hq, o.hv, o.reps, o.calls)

	m := newBenchMem(ctx, o.seed, 7)
	defer m.free()
	tok := o.decodes + o.prompts*o.promptLen
	in, err := m.tokens(tok, o.hq, o.hv)
	if err != nil {
		return err
	}
	n := o.decodes + o.prompts
	cu := []int{0}
	for i := range n {
		l := 1
		if i >= o.decodes {
			l = o.promptLen
		}
		cu = append(cu, cu[i]+l)
	}
	pool, err := m.pool(n, o.hv, gdn.FP32, m.r.Perm(n))
	if err != nil {
		return err
	}
	cuDev, err := m.upload(int32s(cu), gdn.Int32, len(cu))
	if err != nil {
		return err
	}
	mixed := &gdn.FullArgs{Q: in.Q, K: in.K, V: in.V, G: in.G, Beta: in.Beta, O: in.O, Pool: pool,
		CuSeqlens: cu, CuSeqlensDevice: cuDev, L2Norm: true}

	// The prompts alone: their rows, boundaries and slots.
	pr := in.rows(o.decodes, 1, o.prompts*o.promptLen)
	pcu := make([]int, o.prompts+1)
	for i := range pcu {
		pcu[i] = cu[o.decodes+i] - cu[o.decodes]
	}
	pcuDev, err := m.upload(int32s(pcu), gdn.Int32, len(pcu))
	if err != nil {
		return err
	}
	pPool := pool
	pPool.Slots = pool.Slots[o.decodes:]
	pPool.SlotsDevice = gdn.Tensor{Ptr: pool.SlotsDevice.Ptr + uintptr(4*o.decodes), Bytes: 4 * o.prompts, Dtype: gdn.Int32, Shape: []int{o.prompts}}
	prompts := &gdn.FullArgs{Q: pr.Q, K: pr.K, V: pr.V, G: pr.G, Beta: pr.Beta, O: pr.O, Pool: pPool,
		CuSeqlens: pcu, CuSeqlensDevice: pcuDev, L2Norm: true}

	// The decodes alone: the first rows, B sequences of one token.
	dec := in.decodeArgs(o.decodes, 1)
	dec.Pool = pool
	dec.Pool.Slots = pool.Slots[:o.decodes]
	dec.Pool.SlotsDevice.Shape = []int{o.decodes}
	dec.Pool.SlotsDevice.Bytes = 4 * o.decodes
	dec.L2Norm = true

	hs := gdn.Stream(s.Handle())
	var times [3]float64
	for i, call := range []func() error{
		func() error { return rt.ForwardFull(prompts, hs) },
		func() error { return rt.Decode(&dec, hs) },
		func() error { return rt.ForwardMixed(mixed, hs) },
	} {
		if times[i], err = timeGraph(rt, s, o.calls, o.reps, call); err != nil {
			return fmt.Errorf("%s: %w", [...]string{"the prompts alone", "the decodes alone", "the mixed batch"}[i], err)
		}
	}
	bad, err := m.nonFiniteBF16(in.O)
	if err != nil {
		return err
	}
	sum := times[0] + times[1]
	fmt.Fprintf(stdout, "%-22s %9s\n", "call", "ms")
	fmt.Fprintf(stdout, "%-22s %9.4f\n%-22s %9.4f\n%-22s %9.4f\n%-22s %9.4f\n", "prompts alone", times[0], "decodes alone", times[1],
		"prompts + decodes", sum, "mixed batch", times[2])
	fmt.Fprintf(stdout, "mixed / (prompts + decodes) = %.3f\n", times[2]/sum)
	if bad > 0 {
		return errors.New("bench --mixed: " + fmt.Sprint(bad) + " NaN/Inf output elements")
	}
	return nil
}
