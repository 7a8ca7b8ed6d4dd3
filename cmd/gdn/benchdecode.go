package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"unsafe"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/dtype"
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
	tok := c.N * c.T
	var bufs []driver.DevicePtr
	defer func() {
		for _, p := range bufs {
			_ = ctx.Free(p)
		}
	}()
	alloc := func(bytes int) (driver.DevicePtr, error) {
		p, err := ctx.Alloc(bytes)
		if err == nil {
			bufs = append(bufs, p)
		}
		return p, err
	}
	r := rand.New(rand.NewPCG(o.seed, uint64(c.N)))
	upload := func(host []byte) (gdn.Tensor, error) {
		p, err := alloc(len(host))
		if err != nil {
			return gdn.Tensor{}, err
		}
		return gdn.Tensor{Ptr: uintptr(p), Bytes: len(host)}, ctx.CopyToDevice(p, unsafe.Pointer(&host[0]), len(host))
	}
	bf16s := func(n int, f func() float64) []byte {
		b := make([]byte, 2*n)
		for i := range n {
			h := dtype.RoundBF16(float32(f()))
			b[2*i], b[2*i+1] = byte(h), byte(h>>8)
		}
		return b
	}
	f32s := func(n int, f func() float64) []byte {
		b := make([]byte, 4*n)
		for i := range n {
			u := math.Float32bits(float32(f()))
			b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		}
		return b
	}
	qk := []int{c.N, c.T, c.Hq, gdn.HeadDim}
	vo := []int{c.N, c.T, c.Hv, gdn.HeadDim}
	gb := []int{c.N, c.T, c.Hv}
	var a gdn.DecodeArgs
	var err error
	for _, x := range []struct {
		t     *gdn.Tensor
		data  []byte
		dt    gdn.Dtype
		shape []int
	}{
		{&a.Q, bf16s(tok*c.Hq*gdn.HeadDim, r.NormFloat64), gdn.BF16, qk},
		{&a.K, bf16s(tok*c.Hq*gdn.HeadDim, r.NormFloat64), gdn.BF16, qk},
		{&a.V, bf16s(tok*c.Hv*gdn.HeadDim, r.NormFloat64), gdn.BF16, vo},
		{&a.G, f32s(tok*c.Hv, func() float64 { return -math.Log1p(math.Exp(-r.NormFloat64())) / 16 }), gdn.FP32, gb},
		{&a.Beta, f32s(tok*c.Hv, func() float64 { return 1 / (1 + math.Exp(-r.NormFloat64())) }), gdn.FP32, gb},
	} {
		if *x.t, err = upload(x.data); err != nil {
			return res, err
		}
		x.t.Dtype, x.t.Shape = x.dt, x.shape
	}
	// The pool: N slots of states drawn N(0, 1), tiled from one drawn
	// block (the values do not change the time; drawing 2 GB would).
	pool, err := alloc(res.Bytes)
	if err != nil {
		return res, err
	}
	block := f32s(1<<20, r.NormFloat64)
	if o.poolDtype == gdn.BF16 {
		block = bf16s(1<<21, r.NormFloat64)
	}
	for off := 0; off < res.Bytes; off += len(block) {
		n := min(len(block), res.Bytes-off)
		if err := ctx.CopyToDevice(pool.Offset(off), unsafe.Pointer(&block[0]), n); err != nil {
			return res, err
		}
	}
	a.Pool.States = gdn.Tensor{Ptr: uintptr(pool), Bytes: res.Bytes, Dtype: o.poolDtype, Shape: []int{c.N, c.Hv, gdn.HeadDim, gdn.HeadDim}}
	// Each sequence a distinct slot, in a shuffled order, as a scheduler
	// hands them out.
	a.Pool.Slots = r.Perm(c.N)
	slots := make([]byte, 4*c.N)
	for i, x := range a.Pool.Slots {
		slots[4*i], slots[4*i+1], slots[4*i+2], slots[4*i+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
	}
	if a.Pool.SlotsDevice, err = upload(slots); err != nil {
		return res, err
	}
	a.Pool.SlotsDevice.Dtype, a.Pool.SlotsDevice.Shape = gdn.Int32, []int{c.N}
	oPtr, err := alloc(tok * c.Hv * gdn.HeadDim * 2)
	if err != nil {
		return res, err
	}
	a.O = gdn.Tensor{Ptr: uintptr(oPtr), Bytes: tok * c.Hv * gdn.HeadDim * 2, Dtype: gdn.BF16, Shape: vo}
	a.L2Norm, a.Layout = true, o.layout
	copyDst, err := alloc(res.Bytes)
	if err != nil {
		return res, err
	}

	hs := gdn.Stream(s.Handle())
	if err := rt.Decode(&a, hs); err != nil {
		return res, err
	}
	if err := s.Synchronize(); err != nil {
		return res, err
	}
	timeGraph := func(call func() error) (float64, error) {
		exec, err := captureCalls(s, o.calls, func(int) error { return call() })
		if err != nil {
			return 0, err
		}
		defer exec.Destroy()
		times := make([]float64, o.reps)
		for i := range times {
			ms, err := rt.TimeMs(hs, func() error { return exec.Launch(s) })
			if err != nil {
				return 0, err
			}
			times[i] = ms / float64(o.calls)
		}
		return median(times), nil
	}
	if res.Ms, err = timeGraph(func() error { return rt.Decode(&a, hs) }); err != nil {
		return res, err
	}
	if res.CopyMs, err = timeGraph(func() error { return ctx.CopyDeviceAsync(copyDst, pool, res.Bytes, s) }); err != nil {
		return res, fmt.Errorf("the copy's timing: %w", err)
	}
	if err := s.Synchronize(); err != nil {
		return res, err
	}
	out := make([]uint16, tok*c.Hv*gdn.HeadDim)
	if err := ctx.CopyToHost(unsafe.Pointer(&out[0]), oPtr, 2*len(out)); err != nil {
		return res, err
	}
	for _, h := range out {
		if x := dtype.BF16ToFloat32(h); math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			res.NonFinite++
		}
	}
	fmt.Fprintf(stderr, "  %.4f ms (copy of the state bytes %.4f ms)\n", res.Ms, res.CopyMs)
	return res, nil
}
