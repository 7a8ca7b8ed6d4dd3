package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/ref"
)

// How the benchmark measures (docs/BENCH.md, "How a case is timed").
const (
	// rotateBelowBytes: a case whose inputs are smaller than about twice the
	// H200's 60 MB L2 gets three input sets, used in turn, so that a call
	// does not find its inputs left in L2 by the previous one.
	rotateBelowBytes = 120 << 20
	rotateSets       = 3
	// shortCallMs: calls faster than this are timed 20 to a graph, slower
	// ones 5 to a graph, so that one timed replay is never shorter than a
	// few milliseconds' worth of event resolution and launch jitter.
	shortCallMs     = 0.2
	shortGraphCalls = 20
	longGraphCalls  = 5
)

// bencher runs cases on one Runtime and stream.
type bencher struct {
	rt     *gdn.Runtime
	stream *driver.Stream
	opts   benchOptions
}

// benchSet is one uploaded input set of a case: the call the bench times
// (Forward or ForwardFull) and its outputs.
type benchSet interface {
	call(rt *gdn.Runtime, s gdn.Stream) error
	plan(rt *gdn.Runtime) (gdn.Plan, error)
	download() (*gdn.HostCoreResult, error)
	free()
}

// coreSet is an input set of the core forward.
type coreSet struct{ d *gdn.DeviceCoreArgs }

func (c coreSet) call(rt *gdn.Runtime, s gdn.Stream) error { return rt.Forward(c.d.Args, s) }

func (c coreSet) plan(rt *gdn.Runtime) (gdn.Plan, error) { return rt.PlanOf(c.d.Args) }

func (c coreSet) download() (*gdn.HostCoreResult, error) { return c.d.Download() }

func (c coreSet) free() { c.d.Free() }

// fullSet is an input set of the full forward.
type fullSet struct{ d *gdn.DeviceFullArgs }

func (f fullSet) call(rt *gdn.Runtime, s gdn.Stream) error { return rt.ForwardFull(f.d.Args, s) }

func (f fullSet) plan(rt *gdn.Runtime) (gdn.Plan, error) { return rt.PlanOfFull(f.d.Args) }

func (f fullSet) download() (*gdn.HostCoreResult, error) { return f.d.Download() }

func (f fullSet) free() { f.d.Free() }

// runCase draws, uploads, plans, times and checks one case.
func (b *bencher) runCase(c ref.Case) (benchResult, error) {
	res := benchResult{Case: c, Dtype: b.opts.dtype, Reps: b.opts.reps, Sets: 1, Full: b.opts.full, L2Norm: b.opts.l2norm,
		Device: b.rt.Device().Name}
	if !b.opts.full {
		res.ADtype = b.opts.aDtype
	}
	s := c.Shape()
	bytes := inputBytes(s, b.opts.dtype.Size())
	if b.opts.full {
		bytes = fullInputBytes(s, b.opts.dtype.Size())
	}
	if bytes < rotateBelowBytes {
		res.Sets = rotateSets
	}
	sets, err := b.uploadSets(s, res.Sets)
	defer func() {
		for _, u := range sets {
			u.free()
		}
	}()
	if err != nil {
		return res, err
	}
	// The plan the Runtime prepared for these arguments: the one timed.
	res.Plan, err = sets[0].plan(b.rt)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(stderr, "  plan %v\n", res.Plan)
	if err := b.measure(sets, &res); err != nil {
		return res, err
	}
	res.OutHash = digestSeed
	for _, u := range sets {
		out, err := u.download()
		if err != nil {
			return res, err
		}
		res.NonFinite += nonFinite(out.O) + nonFinite(out.Ht)
		res.OutHash = outputDigest(outputDigest(res.OutHash, out.O), out.Ht)
	}
	fmt.Fprintf(stderr, "  %.4f ms median (%s of %d calls, %d input sets)\n", res.MedianMs, res.Timing, res.Calls, res.Sets)
	return res, nil
}

// uploadSets draws n input sets (seeds seed, seed+1, ...) and copies them
// to the device with their outputs; it returns the sets uploaded so far
// with an error. The core forward gets the recipe with g_cumsum and A; the
// full forward the raw g, and with L2Norm q and k as drawn, before the
// recipe's normalisation, which the full forward does inside.
func (b *bencher) uploadSets(s ref.Shape, n int) ([]benchSet, error) {
	var sets []benchSet
	for i := range n {
		start := time.Now()
		seed := b.opts.seed + uint64(i)
		drawn := func(h *hostInputs) {
			fmt.Fprintf(stderr, "  input set %d: %d tokens, %.1f MB, drawn in %.2f s\n",
				i+1, s.Tokens(), float64(h.Bytes())/1e6, time.Since(start).Seconds())
		}
		if b.opts.full {
			h := genRecipe(s, b.opts.dtype, seed, !b.opts.l2norm)
			drawn(h)
			d, err := b.rt.UploadFull(h.hostFullArgs(b.opts.l2norm))
			if err != nil {
				return sets, err
			}
			sets = append(sets, fullSet{d})
			continue
		}
		h := genInputs(s, b.opts.dtype, seed)
		drawn(h)
		d, err := b.rt.UploadCore(h.hostArgs(b.opts.aDtype))
		if err != nil {
			return sets, err
		}
		sets = append(sets, coreSet{d})
	}
	return sets, nil
}

// warmupCalls is how many untimed warm-up calls measure makes: the
// --warmup asked for, and at least one a set, so that every input set has
// been computed before its outputs are checked for NaN and digested
// (with --warmup 1 --calls 1 two of three rotated sets were never called,
// and their poisoned outputs read as 17 M NaN on tp8_8k: docs/PERF.md v31).
func warmupCalls(warmup, sets int) int { return max(warmup, sets) }

// measure times one call (Forward, or ForwardFull with its preparation
// kernels): a first call that compiles (or loads) the kernels, warm-up
// calls timed together to size the graph, then the median over replays of a
// graph of res.Calls calls, divided by res.Calls. Calls cycle through the
// input sets.
func (b *bencher) measure(sets []benchSet, res *benchResult) error {
	call := func(i int) error { return sets[i%len(sets)].call(b.rt, gdn.Stream(b.stream.Handle())) }
	timed := func(region func() error) (float64, error) {
		return b.rt.TimeMs(gdn.Stream(b.stream.Handle()), region)
	}
	calls := func(n int) func() error {
		return func() error {
			for i := range n {
				if err := call(i); err != nil {
					return err
				}
			}
			return nil
		}
	}

	compileStart := time.Now()
	if err := call(0); err != nil {
		return err
	}
	if err := b.stream.Synchronize(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "  first call (kernel compile or load) %.0f ms\n", time.Since(compileStart).Seconds()*1e3)
	nw := warmupCalls(b.opts.warmup, len(sets))
	warm, err := timed(calls(nw))
	if err != nil {
		return err
	}
	res.Calls = graphCalls(b.opts.calls, warm/float64(nw))

	region := calls(res.Calls)
	res.Timing = "stream"
	if exec, err := captureCalls(b.stream, res.Calls, call); err != nil {
		fmt.Fprintf(stderr, "  graph capture failed, timing plain calls instead: %v\n", err)
	} else {
		defer exec.Destroy()
		region = func() error { return exec.Launch(b.stream) }
		res.Timing = "graph"
	}
	times := make([]float64, b.opts.reps)
	for i := range times {
		ms, err := timed(region)
		if err != nil {
			return err
		}
		times[i] = ms / float64(res.Calls)
	}
	res.MedianMs, res.MinMs = median(times), slices.Min(times)
	return nil
}

// graphCalls is the number of calls per graph: the --calls flag, else 20
// for calls under shortCallMs and 5 for longer ones.
func graphCalls(flag int, estimateMs float64) int {
	switch {
	case flag > 0:
		return flag
	case estimateMs < shortCallMs:
		return shortGraphCalls
	default:
		return longGraphCalls
	}
}

// captureCalls records calls 0..n-1 on s into a graph and instantiates it.
// The capture always ends, so s is usable after a failure.
func captureCalls(s *driver.Stream, n int, call func(int) error) (*driver.GraphExec, error) {
	if err := s.BeginCapture(); err != nil {
		return nil, err
	}
	var callErr error
	for i := range n {
		if callErr = call(i); callErr != nil {
			break
		}
	}
	g, err := s.EndCapture()
	if callErr != nil || err != nil {
		if g != nil {
			g.Destroy()
		}
		return nil, errors.Join(callErr, err)
	}
	defer g.Destroy()
	return g.Instantiate()
}

// median returns the middle of x (the mean of the two middles for an even
// count).
func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// digestSeed starts an outputDigest chain (FNV-1a's 64-bit offset basis).
const digestSeed uint64 = 14695981039346656037

// outputDigest folds x's bits into h, FNV-1a over 32-bit words (a word at
// a time: a byte at a time would cost about a second on a large case's
// half a gigabyte of o). The kernels are deterministic, so every run of
// the same case, seed and plan must give the same digest: the device
// script's stress step compares them across processes to catch a race
// that leaves finite but wrong outputs. The digest sees each input set's
// last call only; a fault or a hang in any call fails the run.
func outputDigest(h uint64, x []float32) uint64 {
	const prime = 1099511628211
	for _, v := range x {
		h = (h ^ uint64(math.Float32bits(v))) * prime
	}
	return h
}
