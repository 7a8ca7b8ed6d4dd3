package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/tuning"
)

// decodeCase is one shape of the decode suite: N sequences of T tokens
// each, from a pool of N slots.
type decodeCase struct {
	Name   string
	N, T   int
	Hq, Hv int
}

// decodeSuite is what `gdn bench --decode` times: Qwen3.5's 16 query/key
// and 32 value heads at three batch sizes, a tensor-parallel slice of it
// (2/8 heads on each of 8 GPUs), and four tokens a sequence (speculative
// or multi-token-prediction verification). scripts/fla_decode.py times
// FLA on the same list.
var decodeSuite = []decodeCase{
	{Name: "q35_b64", N: 64, T: 1, Hq: 16, Hv: 32},
	{Name: "q35_b256", N: 256, T: 1, Hq: 16, Hv: 32},
	{Name: "q35_b1024", N: 1024, T: 1, Hq: 16, Hv: 32},
	{Name: "tp8_b256", N: 256, T: 1, Hq: 2, Hv: 8},
	{Name: "q35_b256_t4", N: 256, T: 4, Hq: 16, Hv: 32},
}

// stateBytes is the bytes of the states a call reads (and writes as much).
func (c decodeCase) stateBytes(poolDtype gdn.Dtype) int {
	return c.N * c.Hv * gdn.HeadDim * gdn.HeadDim * poolDtype.Size()
}

// decodeBenchOptions are the flags of `gdn bench --decode`.
type decodeBenchOptions struct {
	cases     []decodeCase
	reps      int
	calls     int
	poolDtype gdn.Dtype
	layout    gdn.StateLayout
	seed      uint64
}

const decodeBenchSynopsis = "--decode [--cases a,b,...] [--reps N] [--calls N] [--pool fp32|bf16] [--layout kv|vk] [--seed N]"

func decodeCaseNames() []string {
	names := make([]string, len(decodeSuite))
	for i, c := range decodeSuite {
		names[i] = c.Name
	}
	return names
}

// parseDecodeBenchArgs reads the command line of `gdn bench --decode`.
func parseDecodeBenchArgs(args []string) (decodeBenchOptions, error) {
	fs := newFlags("bench", decodeBenchSynopsis)
	fs.Bool("decode", true, "time the decode step (Runtime.Decode) on the decode suite, beside a device-to-device copy of the same state bytes")
	cases := fs.String("cases", "", "comma-separated case names (default: all): "+strings.Join(decodeCaseNames(), ", "))
	reps := fs.Int("reps", 30, "timed replays; the median is reported")
	calls := fs.Int("calls", 20, "Decode calls captured per graph")
	pool := fs.String("pool", "fp32", "the state pool's dtype: fp32 or bf16")
	layout := fs.String("layout", "kv", "the states' layout: kv ([K,V], FLA's default) or vk ([V,K])")
	seed := fs.Uint64("seed", 1, "seed of the inputs")
	if err := parseFlags(fs, args); err != nil {
		return decodeBenchOptions{}, err
	}
	o := decodeBenchOptions{reps: *reps, calls: *calls, seed: *seed}
	switch strings.ToLower(*pool) {
	case "fp32":
		o.poolDtype = gdn.FP32
	case "bf16":
		o.poolDtype = gdn.BF16
	default:
		return o, fmt.Errorf("--pool %s: want fp32 or bf16", *pool)
	}
	switch strings.ToLower(*layout) {
	case "kv":
		o.layout = gdn.StateKV
	case "vk":
		o.layout = gdn.StateVK
	default:
		return o, fmt.Errorf("--layout %s: want kv or vk", *layout)
	}
	if o.reps < 1 || o.calls < 1 {
		return o, fmt.Errorf("--reps %d --calls %d: want at least 1 each", o.reps, o.calls)
	}
	if strings.TrimSpace(*cases) == "" {
		o.cases = slices.Clone(decodeSuite)
		return o, nil
	}
	for _, name := range strings.Split(*cases, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(decodeSuite, func(c decodeCase) bool { return c.Name == name })
		if i < 0 {
			return o, fmt.Errorf("--cases: unknown decode case %q; the decode suite has %s", name, strings.Join(decodeCaseNames(), ", "))
		}
		o.cases = append(o.cases, decodeSuite[i])
	}
	return o, nil
}

// decodeResult is one timed case.
type decodeResult struct {
	Case       decodeCase
	Ms, CopyMs float64
	Bytes      int // the state bytes read (written: as many)
	NonFinite  int
}

// GBs is the state traffic's bandwidth: bytes read and written.
func (r decodeResult) GBs(ms float64) float64 { return 2 * float64(r.Bytes) / (ms * 1e6) }

func runDecodeBench(args []string) error {
	o, err := parseDecodeBenchArgs(args)
	if err != nil {
		return err
	}
	rt, err := openRuntime(gdn.Options{NoGraphs: true})
	if err != nil {
		return err
	}
	defer rt.Close()
	info := rt.Device()
	fmt.Fprintf(stdout, "device: %s, %d SMs; decode from a %v pool in %v, bf16 q/k/v, q and k L2-normalised inside, median of %d graphs of %d calls\n",
		info.Name, info.SMs, o.poolDtype, o.layout, o.reps, o.calls)
	ctx := tuning.Context(rt)
	stream, err := ctx.NewStream()
	if err != nil {
		return err
	}
	defer stream.Destroy()
	var results []decodeResult
	var runErr error
	for i, c := range o.cases {
		fmt.Fprintf(stderr, "[%d/%d] %s: %d sequences of %d token(s), Hq=%d Hv=%d\n", i+1, len(o.cases), c.Name, c.N, c.T, c.Hq, c.Hv)
		r, err := benchDecodeCase(rt, ctx, stream, c, o)
		if err != nil {
			runErr = fmt.Errorf("case %s: %w", c.Name, err)
			break
		}
		if r.NonFinite > 0 {
			runErr = errors.Join(runErr, fmt.Errorf("case %s: %d NaN/Inf output elements", c.Name, r.NonFinite))
		}
		results = append(results, r)
	}
	printDecodeTable(stdout, results)
	return runErr
}

// printDecodeTable prints each case's time, its state bandwidth and the
// copy's, and the share of the copy's bandwidth decode reaches.
func printDecodeTable(w io.Writer, rs []decodeResult) {
	fmt.Fprintf(w, "%-12s %9s %9s %9s %9s %9s %7s\n", "case", "state_MB", "ms", "GB/s", "copy_ms", "copy_GB/s", "of_copy")
	for _, r := range rs {
		fmt.Fprintf(w, "%-12s %9.1f %9.4f %9.0f %9.4f %9.0f %6.1f%%\n", r.Case.Name, float64(r.Bytes)/1e6, r.Ms, r.GBs(r.Ms),
			r.CopyMs, r.GBs(r.CopyMs), 100*r.CopyMs/r.Ms)
	}
}

// benchDecodeCase uploads a case's inputs, times o.calls Decode calls in a
// graph and a device-to-device copy of the pool's bytes the same way, and
// checks o for NaN and Inf.
func benchDecodeCase(rt *gdn.Runtime, ctx *driver.Context, s *driver.Stream, c decodeCase, o decodeBenchOptions) (decodeResult, error) {
	res := decodeResult{Case: c, Bytes: c.stateBytes(o.poolDtype)}
	m := newBenchMem(ctx, o.seed, uint64(c.N))
	defer m.free()
	in, err := m.tokens(c.N*c.T, c.Hq, c.Hv)
	if err != nil {
		return res, err
	}
	a := in.decodeArgs(c.N, c.T)
	if a.Pool, err = m.pool(c.N, c.Hv, o.poolDtype, m.r.Perm(c.N)); err != nil {
		return res, err
	}
	a.L2Norm, a.Layout = true, o.layout
	copyDst, err := m.alloc(res.Bytes)
	if err != nil {
		return res, err
	}
	hs := gdn.Stream(s.Handle())
	if res.Ms, err = timeGraph(rt, s, o.calls, o.reps, func() error { return rt.Decode(&a, hs) }); err != nil {
		return res, err
	}
	pool := driver.DevicePtr(a.Pool.States.Ptr)
	if res.CopyMs, err = timeGraph(rt, s, o.calls, o.reps, func() error { return ctx.CopyDeviceAsync(copyDst, pool, res.Bytes, s) }); err != nil {
		return res, fmt.Errorf("the copy's timing: %w", err)
	}
	if res.NonFinite, err = m.nonFiniteBF16(in.O); err != nil {
		return res, err
	}
	fmt.Fprintf(stderr, "  %.4f ms (copy of the state bytes %.4f ms)\n", res.Ms, res.CopyMs)
	return res, nil
}

// timeGraph makes a first call (kernels compiled or loaded), captures
// calls of call into a graph and returns the median over reps replays of
// the time per call.
func timeGraph(rt *gdn.Runtime, s *driver.Stream, calls, reps int, call func() error) (float64, error) {
	if err := call(); err != nil {
		return 0, err
	}
	if err := s.Synchronize(); err != nil {
		return 0, err
	}
	exec, err := captureCalls(s, calls, func(int) error { return call() })
	if err != nil {
		return 0, err
	}
	defer exec.Destroy()
	times := make([]float64, reps)
	for i := range times {
		ms, err := rt.TimeMs(gdn.Stream(s.Handle()), func() error { return exec.Launch(s) })
		if err != nil {
			return 0, err
		}
		times[i] = ms / float64(calls)
	}
	return median(times), nil
}
