package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/kernsrc"
	"github.com/gdnjit/gdn/ref"
)

func init() {
	register("bench", "time the core (or, with --full, the full) forward on the benchmark suite (docs/BENCH.md), beside the H200 anchors", runBench)
}

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

// benchOptions are the parsed flags of `gdn bench`.
type benchOptions struct {
	cases         []ref.Case
	reps, warmup  int
	calls         int // Forward calls per graph; 0 chooses from the warm-up
	csvPath       string
	dtype         gdn.Dtype
	aDtype        gdn.Dtype // the core forward's A: FP32 or BF16
	seed          uint64
	runtimeGraphs bool
	variant       string // a kernel variant instead of the planner's choice
	segments      int    // Options.SegmentChunks: 0 planner, > 0 forced split, < 0 never
	transferTile  int    // Options.TransferTile: 0 planner, 64 or 128 forced
	earlyFirst    int    // Options.EarlyFirstSegment: 0 planner, 1 wherever it applies, -1 never
	scanColumns   int    // Options.ScanColumns: 0 planner, 8, 16 or 32 forced
	prepHeads     int    // Options.PrepHeads: 0 by shape, > 0 a cap (--full)
	plotPath      string // --plot: chart of the results (.svg or .png)
	comparePath   string // --compare: an earlier run's CSV
	fromPath      string // --from: a CSV to plot or compare instead of running
	sms           int    // --sms: run on a slice of this many SMs (green context); 0: the whole GPU
	full          bool   // --full: time ForwardFull from raw gates instead of Forward
	l2norm        bool   // with full: q and k normalised inside (--l2norm; off by default)
	l2normInPrep  bool   // with full: Options.L2NormInPrep (the preparation's copies everywhere)
	prepKernel    bool   // with full: Options.PrepKernel (the preparation as a kernel of its own everywhere)
}

const benchSynopsis = "[--cases a,b,...] [--reps N] [--warmup N] [--calls N] [--csv FILE] [--dtype bf16|fp16] [--a-dtype bf16|fp32] [--seed N] [--runtime-graphs] [--variant NAME] [--segments N] [--transfer-tile 64|128] [--scan-columns 8|16|32] [--early-first -1|0|1] [--prep-heads N] [--plot FILE.svg|.png] [--compare OLD.csv] [--sms N] [--full [--l2norm [--l2norm-in-prep]] [--prep-kernel]]\n       gdn bench --from RUN.csv [--plot FILE.svg|.png] [--compare OLD.csv]"

// parseBenchArgs reads the command line of `gdn bench`.
func parseBenchArgs(args []string) (benchOptions, error) {
	fs := newFlags("bench", benchSynopsis)
	cases := fs.String("cases", "", "comma-separated case names (default: the whole suite): "+strings.Join(suiteNames(), ", "))
	reps := fs.Int("reps", 30, "timed replays; the median is reported")
	warmup := fs.Int("warmup", 5, "untimed calls before timing (after the first, compiling call)")
	calls := fs.Int("calls", 0, "Forward calls captured per graph (default: 20 for calls under 0.2 ms, else 5)")
	csvPath := fs.String("csv", "", "also write the results, with every anchor, to this CSV file")
	dtypeName := fs.String("dtype", "bf16", "dtype of q, k, v and o: bf16 or fp16")
	aDtypeName := fs.String("a-dtype", "fp32", "the core forward's A: fp32, or bf16 (as FLA's solve_tril hands it to its core path)")
	seed := fs.Uint64("seed", 1, "seed of the input recipe")
	runtimeGraphs := fs.Bool("runtime-graphs", false, "keep the Runtime's own graph cache on (off: every Forward is a plain launch, captured into the benchmark's graph)")
	plotPath := fs.String("plot", "", "also draw the results beside the anchors and the roofline floor into this .svg or .png file")
	comparePath := fs.String("compare", "", "also print each case's speed-up over the run in this CSV (from an earlier --csv)")
	variant := fs.String("variant", "", "run every case with this kernel variant (see gdn warmup) instead of the planner's choice")
	prepHeads := fs.Int("prep-heads", 0, "with --full: value heads per block of the preparation kernel, at most N (4 or 1, dividing Hv/Hq); 0 lets the shape decide")
	segments := fs.Int("segments", 0, "sequence parallelism: 0 lets the planner decide, N > 0 cuts sequences longer than N chunks into segments of N, -1 never cuts")
	transferTile := fs.Int("transfer-tile", 0, "with a split plan: the value-tile width of its transfer pass, 64 or 128; 0 lets the planner choose")
	earlyFirst := fs.Int("early-first", 0, "Options.EarlyFirstSegment: 1 prefers split plans that run each sequence's first segment beside the transfer pass, -1 weighs only plans without (a call whose only worthwhile split is such a plan then runs unsplit); 0 lets the planner decide")
	scanColumns := fs.Int("scan-columns", 0, "with a split plan: the value columns of one CTA of its scan, 8, 16 or 32; 0 lets the planner choose")
	fromPath := fs.String("from", "", "take the results from this CSV (from an earlier --csv) instead of running: for --plot and --compare, no GPU needed")
	sms := fs.Int("sms", 0, smsFlagHelp)
	full := fs.Bool("full", false, "time the full forward (ForwardFull: raw per-token g; g_cumsum and A computed inside) beside FLA full, FlashQLA, FlashInfer and issue 8's target")
	l2norm := fs.Bool("l2norm", false, "with --full: give q and k as drawn and L2-normalise them inside (FLA's use_qk_l2norm_in_kernel, as Qwen3.5 serving runs it); off by default: the anchors' benchmark gives them normalised and times no norm")
	noL2Norm := fs.Bool("no-l2norm", false, "with --full: q and k given normalised, no L2 norm inside (the default, as the anchors are timed)")
	inPrep := fs.Bool("l2norm-in-prep", false, "with --full --l2norm: the L2 norm always by the preparation's normalised copies of q and k, never in the core kernel (Options.L2NormInPrep)")
	prepKernel := fs.Bool("prep-kernel", false, "with --full: the preparation always as a kernel of its own before the core, never inside it (Options.PrepKernel)")
	if err := parseFlags(fs, args); err != nil {
		return benchOptions{}, err
	}
	o := benchOptions{reps: *reps, warmup: *warmup, calls: *calls, csvPath: *csvPath, seed: *seed, runtimeGraphs: *runtimeGraphs,
		variant: *variant, segments: *segments, transferTile: *transferTile, earlyFirst: *earlyFirst, scanColumns: *scanColumns, prepHeads: *prepHeads, plotPath: *plotPath, comparePath: *comparePath, fromPath: *fromPath, sms: *sms,
		full: *full, l2norm: *full && *l2norm, l2normInPrep: *inPrep, prepKernel: *prepKernel}
	if o.transferTile != 0 && o.transferTile != 64 && o.transferTile != 128 {
		return o, fmt.Errorf("--transfer-tile %d: want 64 or 128 (0: the planner's)", o.transferTile)
	}
	if o.earlyFirst < -1 || o.earlyFirst > 1 {
		return o, fmt.Errorf("--early-first %d: want -1, 0 (the planner's) or 1", o.earlyFirst)
	}
	if o.scanColumns != 0 && !slices.Contains(kernsrc.ScanColumnChoices(), o.scanColumns) {
		return o, fmt.Errorf("--scan-columns %d: want one of %v (0: the planner's)", o.scanColumns, kernsrc.ScanColumnChoices())
	}
	if (*noL2Norm || *l2norm) && !o.full {
		return o, errors.New("--l2norm and --no-l2norm apply to the full forward: add --full")
	}
	if *noL2Norm && *l2norm {
		return o, errors.New("--l2norm and --no-l2norm: give one")
	}
	if o.l2normInPrep && !o.l2norm {
		return o, errors.New("--l2norm-in-prep applies to the full forward's L2 norm: add --full --l2norm")
	}
	if o.prepKernel && !o.full {
		return o, errors.New("--prep-kernel applies to the full forward: add --full")
	}
	if p := strings.ToLower(o.plotPath); p != "" && !strings.HasSuffix(p, ".svg") && !strings.HasSuffix(p, ".png") {
		return o, fmt.Errorf("--plot %s: want a .svg or .png file name", o.plotPath)
	}
	if o.fromPath != "" {
		switch {
		case o.plotPath == "" && o.comparePath == "":
			return o, errors.New("--from needs --plot or --compare: it replaces the run, there is nothing else to do")
		case o.csvPath != "" || *cases != "":
			return o, errors.New("--from replaces the run: --csv and --cases do not apply")
		case o.full:
			return o, errors.New("--from replaces the run: --full does not apply (the CSV says which forward it timed)")
		case flagSet(fs, "a-dtype"):
			return o, errors.New("--from replaces the run: --a-dtype does not apply (the CSV's a_dtype column says what A was)")
		}
	}
	var err error
	if o.dtype, err = parseDataDtype("--dtype", *dtypeName); err != nil {
		return o, err
	}
	switch strings.ToLower(*aDtypeName) {
	case "fp32":
		o.aDtype = gdn.FP32
	case "bf16":
		o.aDtype = gdn.BF16
	default:
		return o, fmt.Errorf("--a-dtype %s: want fp32 or bf16", *aDtypeName)
	}
	if o.full && o.aDtype != gdn.FP32 {
		return o, errors.New("--a-dtype applies to the core forward's given A: the full forward computes A inside")
	}
	if o.cases, err = selectCases(*cases); err != nil {
		return o, err
	}
	switch {
	case o.reps < 1:
		return o, fmt.Errorf("--reps %d: want at least 1", o.reps)
	case o.warmup < 1:
		return o, fmt.Errorf("--warmup %d: want at least 1 (the warm-up also sizes the graph)", o.warmup)
	case o.calls < 0:
		return o, fmt.Errorf("--calls %d: want 0 (automatic) or more", o.calls)
	case o.sms < 0:
		return o, fmt.Errorf("--sms %d: want 0 (the whole GPU) or a count of SMs", o.sms)
	case o.prepHeads < 0:
		return o, fmt.Errorf("--prep-heads %d: want 0 (by shape) or a count of value heads", o.prepHeads)
	case o.prepHeads > 0 && !o.full:
		return o, errors.New("--prep-heads applies to the full forward's preparation: add --full")
	}
	return o, nil
}

// flagSet reports whether the command line set flag name (to its default
// value or not).
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// suiteNames lists the suite's case names in order.
func suiteNames() []string {
	names := make([]string, len(ref.Suite))
	for i, c := range ref.Suite {
		names[i] = c.Name
	}
	return names
}

// selectCases returns the whole suite for an empty list, else the named
// cases in the order given.
func selectCases(list string) ([]ref.Case, error) {
	if strings.TrimSpace(list) == "" {
		return slices.Clone(ref.Suite), nil
	}
	var cases []ref.Case
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		c, ok := ref.CaseByName(name)
		if !ok {
			return nil, fmt.Errorf("--cases: unknown case %q; the suite has %s", name, strings.Join(suiteNames(), ", "))
		}
		cases = append(cases, c)
	}
	return cases, nil
}

// benchResult is the measurement of one case.
type benchResult struct {
	Case            ref.Case
	Dtype           gdn.Dtype
	ADtype          gdn.Dtype // the core forward's A (FP32 or BF16); unset for the full forward
	Plan            gdn.Plan
	MedianMs, MinMs float64
	Timing          string // "graph" (replays of a captured graph) or "stream" (plain calls)
	Calls           int    // Forward calls per timed region
	Sets            int    // input sets used in turn
	Reps            int
	NonFinite       int    // NaN/Inf elements in o and ht after the run
	OutHash         uint64 // outputDigest of every input set's o and ht after the run, in order
	Full            bool   // the full forward (ForwardFull) was timed, not the core
	L2Norm          bool   // with Full: q and k normalised inside
}

func runBench(args []string) error {
	o, err := parseBenchArgs(args)
	if err != nil {
		return err
	}
	if o.fromPath != "" {
		rows, err := readBenchCSVFile(o.fromPath)
		if err != nil {
			return err
		}
		return reportRows(o, rows)
	}
	// Without the Runtime's graph cache every Forward is a plain kernel
	// launch, which the benchmark's own capture records as it is.
	rt, err := openRuntime(gdn.Options{NoGraphs: !o.runtimeGraphs, Variant: o.variant, SegmentChunks: o.segments, TransferTile: o.transferTile, EarlyFirstSegment: o.earlyFirst, ScanColumns: o.scanColumns, PrepHeads: o.prepHeads, SMs: o.sms, L2NormInPrep: o.l2normInPrep, PrepKernel: o.prepKernel})
	if err != nil {
		return err
	}
	defer rt.Close()
	info := rt.Device()
	fmt.Fprintf(stdout, "device: %s, %d SMs, compute capability %d.%d, kernels for %s; %v inputs, median of %d; %s\n",
		info.Name, info.SMs, info.Major, info.Minor, rt.Target(), o.dtype, o.reps, o.forwardText())
	if line := smsLine(info); line != "" {
		fmt.Fprintf(stdout, "SMs: %s\n", line)
	}

	stream, err := rt.Context().NewStream()
	if err != nil {
		return err
	}
	defer stream.Destroy()
	b := &bencher{rt: rt, stream: stream, opts: o}

	var results []benchResult
	var runErr error
	for i, c := range o.cases {
		fmt.Fprintf(stderr, "[%d/%d] %s: Hq=%d Hv=%d, sequences %s\n", i+1, len(o.cases), c.Name, c.Hq, c.Hv, lensSummary(c.Lens))
		r, err := b.runCase(c)
		if err != nil {
			// A failed launch can leave the context unusable: stop, but
			// report what was measured.
			runErr = fmt.Errorf("case %s: %w", c.Name, err)
			break
		}
		results = append(results, r)
	}
	printBenchTable(stdout, results)
	if o.csvPath != "" {
		if err := writeBenchCSVFile(o.csvPath, results); err != nil {
			return errors.Join(runErr, err)
		}
		fmt.Fprintf(stderr, "bench: wrote %s\n", o.csvPath)
	}
	if runErr == nil {
		for _, r := range results {
			if r.NonFinite > 0 {
				runErr = errors.Join(runErr, fmt.Errorf("case %s: %d NaN/Inf output elements", r.Case.Name, r.NonFinite))
			}
		}
	}
	if len(results) > 0 && (o.plotPath != "" || o.comparePath != "") {
		rows, err := benchRowsOf(results)
		if err == nil {
			err = reportRows(o, rows)
		}
		runErr = errors.Join(runErr, err)
	}
	return runErr
}

// forwardText says which forward a run times.
func (o benchOptions) forwardText() string {
	switch {
	case !o.full:
		return fmt.Sprintf("core forward (Forward: g_cumsum and A given, A in %v)", o.aDtype)
	case o.l2norm && o.l2normInPrep:
		return "full forward (ForwardFull: raw g; q and k L2-normalised inside, by the preparation's copies)"
	case o.l2norm && o.prepKernel:
		return "full forward (ForwardFull: raw g; q and k L2-normalised inside, by a preparation kernel of its own)"
	case o.prepKernel:
		return "full forward (ForwardFull: raw g; q and k given normalised; by a preparation kernel of its own)"
	case o.l2norm:
		return "full forward (ForwardFull: raw g; q and k L2-normalised inside)"
	}
	return "full forward (ForwardFull: raw g; q and k given normalised)"
}

// reportRows draws the chart (--plot) and prints the comparison with an
// earlier run (--compare) of a run's rows.
func reportRows(o benchOptions, rows []benchRow) error {
	if o.comparePath != "" {
		old, err := readBenchCSVFile(o.comparePath)
		if err != nil {
			return fmt.Errorf("--compare: %w", err)
		}
		if err := printCompare(stdout, old, rows, o.comparePath); err != nil {
			return err
		}
	}
	if o.plotPath != "" {
		if err := writeBenchPlot(o.plotPath, rows); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench: wrote %s\n", o.plotPath)
	}
	return nil
}

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
func (c coreSet) plan(rt *gdn.Runtime) (gdn.Plan, error)   { return rt.PlanOf(c.d.Args) }
func (c coreSet) download() (*gdn.HostCoreResult, error)   { return c.d.Download() }
func (c coreSet) free()                                    { c.d.Free() }

// fullSet is an input set of the full forward.
type fullSet struct{ d *gdn.DeviceFullArgs }

func (f fullSet) call(rt *gdn.Runtime, s gdn.Stream) error { return rt.ForwardFull(f.d.Args, s) }
func (f fullSet) plan(rt *gdn.Runtime) (gdn.Plan, error)   { return rt.PlanOfFull(f.d.Args) }
func (f fullSet) download() (*gdn.HostCoreResult, error)   { return f.d.Download() }
func (f fullSet) free()                                    { f.d.Free() }

// runCase draws, uploads, plans, times and checks one case.
func (b *bencher) runCase(c ref.Case) (benchResult, error) {
	res := benchResult{Case: c, Dtype: b.opts.dtype, Reps: b.opts.reps, Sets: 1, Full: b.opts.full, L2Norm: b.opts.l2norm}
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

// Derived figures of a result.

func (r benchResult) tflops() float64 { return r.Case.FLOPs() / (r.MedianMs * 1e-3) / 1e12 }
func (r benchResult) gbps() float64 {
	return r.Case.MinBytes(r.Dtype.Size()) / (r.MedianMs * 1e-3) / 1e9
}
func (r benchResult) overFloor() float64 { return r.MedianMs / r.Case.FloorMs() }
func (r benchResult) anchor() anchor     { return anchorFor(r.Case.Hq, r.Case.Hv, r.Case.Lens) }

// vsFLACore is FLA's core time over ours (> 1: gdn is faster), 0 without
// an anchor row or for a full-forward run (not the same work).
func (r benchResult) vsFLACore() float64 {
	if a := r.anchor(); a.FLACoreMs > 0 && !r.Full {
		return a.FLACoreMs / r.MedianMs
	}
	return 0
}

// vsFLAFull is FLA's full-forward time over ours (> 1: gdn is faster), 0
// without an anchor row or for a core run (not the same work).
func (r benchResult) vsFLAFull() float64 {
	if a := r.anchor(); a.FLAFullMs > 0 && r.Full {
		return a.FLAFullMs / r.MedianMs
	}
	return 0
}

// targetMs is issue 8's target for a full-forward run's case (see
// anchor.FullTargetMs), 0 for a core run or a case without one.
func (r benchResult) targetMs() float64 {
	if !r.Full {
		return 0
	}
	return r.anchor().FullTargetMs()
}

// vsTarget is the target over our time (>= 1: met), 0 without a target.
func (r benchResult) vsTarget() float64 {
	if t := r.targetMs(); t > 0 {
		return t / r.MedianMs
	}
	return 0
}

// lensSummary writes sequence lengths compactly: runs of equal lengths as
// LENxCOUNT, joined by '+' (e.g. "4096x8", "7000+33+1").
func lensSummary(lens []int) string {
	var parts []string
	for i := 0; i < len(lens); {
		j := i
		for j < len(lens) && lens[j] == lens[i] {
			j++
		}
		p := strconv.Itoa(lens[i])
		if j-i > 1 {
			p += "x" + strconv.Itoa(j-i)
		}
		parts = append(parts, p)
		i = j
	}
	return strings.Join(parts, "+")
}

// lensShort is lensSummary cut to a table column's width.
func lensShort(lens []int) string {
	s := lensSummary(lens)
	if len(s) <= 16 {
		return s
	}
	total := 0
	for _, l := range lens {
		total += l
	}
	return fmt.Sprintf("%d seqs, %d", len(lens), total)
}

// optMs formats an anchor time, "-" when there is none.
func optMs(ms float64, format string) string {
	if ms == 0 {
		return "-"
	}
	return fmt.Sprintf(format, ms)
}

// printBenchTable writes the human-readable table of a run (of the core
// forward, or of the full forward: printFullBenchTable).
func printBenchTable(w io.Writer, results []benchResult) {
	if len(results) > 0 && results[0].Full {
		printFullBenchTable(w, results)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tHq\tHv\tlens\tms\tTFLOP/s\tGB/s\tx floor\tFLA core ms\tvs FLA core\ttiming\tvariant\t")
	for _, r := range results {
		a := r.anchor()
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.4f\t%.1f\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t\n",
			r.Case.Name, r.Case.Hq, r.Case.Hv, lensShort(r.Case.Lens), r.MedianMs, r.tflops(), r.gbps(), r.overFloor(),
			optMs(a.FLACoreMs, "%.4f"), optMs(r.vsFLACore(), "%.2fx"), fmt.Sprintf("%s/%d", r.Timing, r.Calls), r.Plan.Variant.Name)
	}
	tw.Flush()
	fmt.Fprintln(w, "x floor: time over the roofline floor (docs/BENCH.md: 790 TFLOP/s, 4.3 TB/s).")
	fmt.Fprintln(w, "vs FLA core: FLA's time for the same work (recompute_w_u + fwd_h + fwd_o given g_cumsum and A,")
	fmt.Fprintln(w, "measured on the H200 2026-11-29) over ours; > 1 means gdn is faster. Full-forward anchors are in --csv.")
}

// printFullBenchTable writes the table of a full-forward run: beside each
// time FLA's own full forward (the same work), FlashQLA's and FlashInfer's
// from FlashQLA's table, and issue 8's target for the shape.
func printFullBenchTable(w io.Writer, results []benchResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tHq\tHv\tlens\tms\tTFLOP/s\tGB/s\tx floor\tFLA full ms\tvs FLA full\tFlashQLA ms\tFlashInfer ms\ttarget ms\tvs target\ttiming\tvariant\t")
	met, targets := 0, 0
	for _, r := range results {
		a := r.anchor()
		if r.targetMs() > 0 {
			targets++
			if r.vsTarget() >= 1 {
				met++
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.4f\t%.1f\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Case.Name, r.Case.Hq, r.Case.Hv, lensShort(r.Case.Lens), r.MedianMs, r.tflops(), r.gbps(), r.overFloor(),
			optMs(a.FLAFullMs, "%.4f"), optMs(r.vsFLAFull(), "%.2fx"), optMs(a.FlashQLAMs, "%.3f"), optMs(a.FlashInferMs, "%.3f"),
			optMs(r.targetMs(), "%.3f"), optMs(r.vsTarget(), "%.2fx"), fmt.Sprintf("%s/%d", r.Timing, r.Calls), r.Plan.Variant.Name)
	}
	tw.Flush()
	l2 := "q and k L2-normalised inside (--l2norm: a step the anchors' times do not include)"
	if !results[0].L2Norm {
		l2 = "q and k given normalised, as the anchors are timed"
	}
	fmt.Fprintf(w, "The full forward (ForwardFull): raw per-token g, g_cumsum and A computed inside; %s.\n", l2)
	fmt.Fprintln(w, "x floor: time over the roofline floor (docs/BENCH.md: 790 TFLOP/s, 4.3 TB/s).")
	fmt.Fprintln(w, "FLA full: FLA's chunk_gated_delta_rule measured on the H200 2026-11-29; vs FLA full: FLA over ours (> 1: gdn is faster).")
	fmt.Fprintln(w, "FlashQLA, FlashInfer: full forward, FlashQLA's published H200 table (docs/BENCH.md).")
	fmt.Fprintf(w, "target: issue 8's, %.1f x min(FlashQLA, FlashInfer) on the shape; vs target: target over ours (>= 1: met). Met on %d of %d cases with a target.\n",
		issue8TargetFactor, met, targets)
}

// benchCSVHeader names the CSV columns.
var benchCSVHeader = []string{
	"case", "hq", "hv", "lens", "tokens", "seqs", "dtype", "forward", "l2norm", "a_dtype",
	"median_ms", "min_ms", "tflops", "gbps", "floor_ms", "x_floor",
	"fla_core_ms", "vs_fla_core", "fla_full_ms", "vs_fla_full",
	"flashqla_fwd_ms", "flashinfer_fwd_ms", "fla_fwd_published_ms", "target_ms", "vs_target",
	"timing", "calls_per_timing", "input_sets", "reps", "variant", "plan", "nonfinite", "out_hash",
}

// writeBenchCSV writes one row per result; anchor cells are empty where
// the tables have no row, and comparisons (vs_*) and the target where they
// do not apply to the forward timed (core: vs_fla_core; full: vs_fla_full,
// target_ms, vs_target; l2norm is empty for the core forward, a_dtype for
// the full forward).
func writeBenchCSV(w io.Writer, results []benchResult) error {
	cw := csv.NewWriter(w)
	cw.Write(benchCSVHeader)
	num := func(x float64) string {
		if x == 0 {
			return ""
		}
		return strconv.FormatFloat(x, 'g', 6, 64)
	}
	for _, r := range results {
		a, c := r.anchor(), r.Case
		forward, l2norm, aDtype := "core", "", r.ADtype.String()
		if r.Full {
			forward, l2norm, aDtype = "full", strconv.FormatBool(r.L2Norm), ""
		}
		cw.Write([]string{
			c.Name, strconv.Itoa(c.Hq), strconv.Itoa(c.Hv), lensSummary(c.Lens),
			strconv.Itoa(c.Shape().Tokens()), strconv.Itoa(len(c.Lens)), r.Dtype.String(), forward, l2norm, aDtype,
			num(r.MedianMs), num(r.MinMs), num(r.tflops()), num(r.gbps()), num(c.FloorMs()), num(r.overFloor()),
			num(a.FLACoreMs), num(r.vsFLACore()), num(a.FLAFullMs), num(r.vsFLAFull()),
			num(a.FlashQLAMs), num(a.FlashInferMs), num(a.FLAFullPublishedMs), num(r.targetMs()), num(r.vsTarget()),
			r.Timing, strconv.Itoa(r.Calls), strconv.Itoa(r.Sets), strconv.Itoa(r.Reps),
			r.Plan.Variant.Name, r.Plan.String(), strconv.Itoa(r.NonFinite), fmt.Sprintf("%016x", r.OutHash),
		})
	}
	cw.Flush()
	return cw.Error()
}

// writeBenchCSVFile writes the CSV to path.
func writeBenchCSVFile(path string, results []benchResult) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeBenchCSV(f, results); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
