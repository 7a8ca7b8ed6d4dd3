package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/jit"
	"github.com/gdnjit/gdn/kernsrc"
	"github.com/gdnjit/gdn/ref"
)

func init() {
	register("bench", "time the core (or, with --full, the full) forward on the benchmark suite (docs/BENCH.md), beside the H200 anchors", runBench)
}

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
	segments      int    // knob SegmentChunks: 0 planner, > 0 forced split, < 0 never
	transferTile  int    // knob TransferTile: 0 planner, 64 or 128 forced
	earlyFirst    int    // knob EarlyFirstSegment: 0 planner, 1 wherever it applies, -1 never
	scanColumns   int    // knob ScanColumns: 0 planner, 8, 16 or 32 forced
	prepHeads     int    // knob PrepHeads: 0 by shape, > 0 a cap (--full)
	plotPath      string // --plot: chart of the results (.svg or .png)
	comparePath   string // --compare: an earlier run's CSV
	fromPath      string // --from: a CSV to plot or compare instead of running
	sms           int    // --sms: run on a slice of this many SMs (green context); 0: the whole GPU
	full          bool   // --full: time ForwardFull from raw gates instead of Forward
	l2norm        bool   // with full: q and k normalised inside (--l2norm; off by default)
	l2normInPrep  bool   // with full: knob L2NormInPrep (the preparation's copies everywhere)
	prepKernel    bool   // with full: knob PrepKernel (the preparation as a kernel of its own everywhere)
}

// knobs are the overrides of the planner's choices that the flags ask for
// (tuning.Knobs: what bench sets on its Runtime and users cannot).
func (o benchOptions) knobs() tuning.Knobs {
	return tuning.Knobs{Variant: o.variant, SegmentChunks: o.segments, TransferTile: o.transferTile,
		EarlyFirstSegment: o.earlyFirst, ScanColumns: o.scanColumns, PrepHeads: o.prepHeads,
		L2NormInPrep: o.l2normInPrep, PrepKernel: o.prepKernel}
}

const benchSynopsis = "[--cases a,b,...] [--shapes S] [--reps N] [--warmup N] [--calls N] [--csv FILE] [--dtype bf16|fp16] [--a-dtype bf16|fp32] [--seed N] [--runtime-graphs] [--variant NAME] [--segments N] [--transfer-tile 64|128] [--scan-columns 8|16|32] [--early-first -1|0|1] [--prep-heads N] [--plot FILE.svg|.png] [--compare OLD.csv] [--sms N] [--full [--l2norm [--l2norm-in-prep]] [--prep-kernel]]\n       gdn bench --from RUN.csv [--plot FILE.svg|.png] [--compare OLD.csv]\n       gdn bench " + decodeBenchSynopsis + "\n       gdn bench " + mixedBenchSynopsis

// parseBenchArgs reads the command line of `gdn bench`.
func parseBenchArgs(args []string) (benchOptions, error) {
	fs := newFlags("bench", benchSynopsis+"\n\n"+shapeSyntax)
	cases := fs.String("cases", "", "comma-separated case names (default: the whole suite): "+strings.Join(suiteNames(), ", "))
	shapes := fs.String("shapes", "", "also time these shapes, separated by ';' (see below): Hq, Hv and lens (or T and B), packed as the suite's cases are; anchors where the tables have the shape")
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
	earlyFirst := fs.Int("early-first", 0, "1 prefers split plans that run each sequence's first segment beside the transfer pass, -1 weighs only plans without (a call whose only worthwhile split is such a plan then runs unsplit); 0 lets the planner decide")
	scanColumns := fs.Int("scan-columns", 0, "with a split plan: the value columns of one CTA of its scan, 8, 16 or 32; 0 lets the planner choose")
	fromPath := fs.String("from", "", "take the results from this CSV (from an earlier --csv) instead of running: for --plot and --compare, no GPU needed")
	sms := fs.Int("sms", 0, smsFlagHelp)
	full := fs.Bool("full", false, "time the full forward (ForwardFull: raw per-token g; g_cumsum and A computed inside) beside FLA full, FlashQLA, FlashInfer and the target (0.8 x the faster of FlashQLA and FlashInfer)")
	l2norm := fs.Bool("l2norm", false, "with --full: give q and k as drawn and L2-normalise them inside (FLA's use_qk_l2norm_in_kernel, as Qwen3.5 serving runs it); off by default: the anchors' benchmark gives them normalised and times no norm")
	noL2Norm := fs.Bool("no-l2norm", false, "with --full: q and k given normalised, no L2 norm inside (the default, as the anchors are timed)")
	inPrep := fs.Bool("l2norm-in-prep", false, "with --full --l2norm: the L2 norm always by the preparation's normalised copies of q and k, never in the core kernel")
	prepKernel := fs.Bool("prep-kernel", false, "with --full: the preparation always as a kernel of its own before the core, never inside it")
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
		case o.csvPath != "" || *cases != "" || *shapes != "":
			return o, errors.New("--from replaces the run: --csv, --cases and --shapes do not apply")
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
	if o.cases, err = selectCases(*cases, *shapes); err != nil {
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

// hasFlag reports whether args set the boolean flag name (-name, --name,
// or =true) anywhere before a "--".
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		switch strings.TrimLeft(a, "-") {
		case name, name + "=true", name + "=1":
			return true
		}
	}
	return false
}

// suiteNames lists the suite's case names in order.
func suiteNames() []string {
	names := make([]string, len(ref.Suite))
	for i, c := range ref.Suite {
		names[i] = c.Name
	}
	return names
}

// selectCases returns the named cases in the order given, then the
// shapes' (shapeCase); the whole suite when both lists are empty.
func selectCases(list, shapes string) ([]ref.Case, error) {
	if strings.TrimSpace(list) == "" && strings.TrimSpace(shapes) == "" {
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
	for _, s := range strings.Split(shapes, ";") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		c, err := shapeCase(s)
		if err != nil {
			return nil, fmt.Errorf("--shapes: %w", err)
		}
		cases = append(cases, c)
	}
	return cases, nil
}

// shapeCase reads one shape of --shapes (shapeSyntax) as a case: a suite
// case's name gives that case; otherwise the case is named by its heads
// and lengths ("16/32 2048x4"), and B sequences of T tokens are B packed
// sequences, as the suite runs them.
func shapeCase(s string) (ref.Case, error) {
	if c, ok := ref.CaseByName(strings.TrimSpace(s)); ok {
		return c, nil
	}
	p, err := parseShape(s)
	if err != nil {
		return ref.Case{}, err
	}
	var lens []int
	if p.Seqs != nil {
		lens = make([]int, len(p.Seqs)-1)
		for i := range lens {
			lens[i] = p.Seqs[i+1] - p.Seqs[i]
		}
	} else {
		lens = slices.Repeat([]int{p.T}, p.B)
	}
	if p.T == 0 {
		return ref.Case{}, fmt.Errorf("shape %q: no tokens to time", s)
	}
	return ref.Case{Name: fmt.Sprintf("%d/%d %s", p.Hq, p.Hv, lensSummary(lens)), Hq: p.Hq, Hv: p.Hv, Lens: lens}, nil
}

func runBench(args []string) error {
	if hasFlag(args, "decode") {
		return runDecodeBench(args)
	}
	if hasFlag(args, "mixed") {
		return runMixedBench(args)
	}
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
	opts := gdn.Options{NoGraphs: !o.runtimeGraphs, SMs: o.sms}
	tuning.Set(&opts, o.knobs())
	rt, err := openRuntime(opts)
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

	stream, err := tuning.Context(rt).NewStream()
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
		runErr = nonFiniteErr(stderr, results, jit.LabWrongOutputs)
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
