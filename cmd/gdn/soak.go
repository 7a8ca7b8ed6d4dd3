package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/tuning"
	"github.com/gdnjit/gdn/ref"
)

func init() {
	register("soak", "run random problems on the GPU against the float64 reference until the time is up", runSoak)
}

const soakSynopsis = "[--minutes M] [--seed S] [--count N] [--case K | --problem SPEC] [--list] [--device N] [--jobs N] [--ref-budget N] [--o-ratio X] [--ht-maxabs X]"

const soakHelp = `Problem k of a seed is the same on every run. Each problem runs through
Runtime.ForwardHost, or ForwardFullHost for the full forward (forward=full,
one problem in three), with outputs poisoned with NaN and the kernel
variant it names forced on its Runtime (or the planner's choice,
variant=auto), and o and ht are compared with ref.Recurrent (after
ref.Full's steps for the full forward) on a sample of (sequence, value
head) pairs. One problem in four is a serving problem instead (spec
serve=decode, prefill or mixed): Decode, ForwardFull from a state pool
or ForwardMixed on device buffers, with bf16 pools, [V,K] states,
checkpoints, per-token states, beta logits and negative slots drawn,
checked whole against ref.PoolRecurrent (o, every named slot, the
slots not named bit for bit, checkpoints and per-token states).
Every failure prints one line on stdout with a command that runs that
problem alone; progress goes to stderr; the last line on stdout is
"N passed, M failed", and the exit status is 1 when M > 0.`

// soakOptions are the parsed flags of `gdn soak`.
type soakOptions struct {
	minutes float64
	seed    uint64
	count   int          // problems to run; 0: until the time is up
	one     *soakProblem // --case or --problem: this problem alone
	caseK   int          // its case number (-1 for --problem)
	list    bool         // print the problems, run nothing
	device  int
	jobs    int // problems in flight
	budget  int // token-heads per problem checked against the reference
	limits  soakLimits
}

// parseSoakArgs reads the command line of `gdn soak`.
func parseSoakArgs(args []string) (soakOptions, error) {
	fs := newFlags("soak", soakSynopsis+"\n\n"+soakHelp)
	minutes := fs.Float64("minutes", 1, "stop drawing problems after this many minutes")
	seed := fs.Uint64("seed", 1, "seed of the problem sequence")
	count := fs.Int("count", 0, "run this many problems (0: as many as --minutes allows; with --list, 20)")
	caseK := fs.Int("case", -1, "run only problem K of the seed")
	problem := fs.String("problem", "", "run only this problem (a spec string as printed with failures)")
	list := fs.Bool("list", false, "print the problems (case number and spec) instead of running them; needs no GPU")
	device := fs.Int("device", 0, "CUDA device ordinal")
	jobs := fs.Int("jobs", 6, "problems in flight at once: references of long chains overlap")
	budget := fs.Int("ref-budget", 1<<14, "tokens x value heads per problem checked against the float64 reference (the longest chain is always checked)")
	oRatio := fs.Float64("o-ratio", defaultSoakLimits.O.Ratio, "pass line: o error ratio (RMS(out-ref)/RMS(ref))")
	htMax := fs.Float64("ht-maxabs", defaultSoakLimits.Ht.MaxAbs, "pass line: ht max abs error")
	if err := parseFlags(fs, args); err != nil {
		return soakOptions{}, err
	}
	o := soakOptions{minutes: *minutes, seed: *seed, count: *count, caseK: *caseK, list: *list, device: *device, jobs: *jobs,
		budget: *budget, limits: defaultSoakLimits}
	o.limits.O.Ratio, o.limits.Ht.MaxAbs = *oRatio, *htMax
	switch {
	case !(o.minutes > 0) || math.IsInf(o.minutes, 0):
		return o, fmt.Errorf("--minutes %v: want a positive number", o.minutes)
	case o.count < 0:
		return o, fmt.Errorf("--count %d: want 0 or more", o.count)
	case o.jobs < 1 || o.jobs > 64:
		return o, fmt.Errorf("--jobs %d: want 1 to 64", o.jobs)
	case o.budget < 1:
		return o, fmt.Errorf("--ref-budget %d: want at least 1", o.budget)
	case !(*oRatio > 0) || !(*htMax > 0):
		return o, fmt.Errorf("--o-ratio and --ht-maxabs: want positive numbers")
	case *caseK >= 0 && *problem != "":
		return o, errors.New("--case and --problem: give one of them")
	case *caseK < -1:
		return o, fmt.Errorf("--case %d: want 0 or more", *caseK)
	}
	if *caseK >= 0 {
		p := drawSoakProblem(o.seed, *caseK)
		o.one = &p
	}
	if *problem != "" {
		p, err := parseSoakProblem(*problem)
		if err != nil {
			return o, fmt.Errorf("--problem: %w", err)
		}
		o.one = &p
	}
	return o, nil
}

// reproduce is the command line that runs problem k (of o.seed) alone.
func (o soakOptions) reproduce(k int, p soakProblem) string {
	if k < 0 {
		return fmt.Sprintf("gdn soak --problem '%s'", p)
	}
	return fmt.Sprintf("gdn soak --seed %d --case %d", o.seed, k)
}

func runSoak(args []string) error {
	o, err := parseSoakArgs(args)
	if err != nil {
		return err
	}
	if o.list {
		listSoak(o)
		return nil
	}
	rts := newSoakRuntimes(o.device)
	defer rts.close()
	// The planner's Runtime, held for the whole soak (the serving and auto
	// problems run on it); opened now, so that without a GPU the soak fails
	// at once rather than once per problem.
	auto, releaseAuto, err := rts.get("", 0, 0, 0)
	if err != nil {
		return err
	}
	defer releaseAuto()
	jobs := o.jobs
	if o.one != nil {
		jobs = 1
	}
	info := auto.Device()
	fmt.Fprintf(stderr, "soak: %s, %d SMs, kernels for %s; seed %d, %.3g minutes, %d workers\n",
		info.Name, info.SMs, auto.Target(), o.seed, o.minutes, jobs)

	st := newSoakStats()
	st.memInfo = tuning.Context(auto).MemInfo
	if o.one != nil {
		out := runSoakProblem(rts, o, o.caseK, *o.one, st)
		fmt.Fprintf(stderr, "soak: problem %s\n  o %v\n  ht %v\n  %d (sequence, head) pairs, %d token-heads checked\n",
			o.one, out.O, out.Ht, out.Pairs, out.TokenHeads)
	} else {
		runSoakLoop(jobs, o, st, func(w, k int) error {
			return runSoakProblem(rts, o, k, drawSoakProblem(o.seed, k), st).launchErr
		})
	}
	st.summary(stderr)
	if o.one == nil {
		fmt.Fprintf(stderr, "soak: %d Runtimes opened, at most %d open at once\n", rts.openedCount(), soakOpenLimit)
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", st.passed, st.failed)
	if st.failed > 0 {
		return errReported
	}
	if st.passed == 0 {
		// A soak that checked nothing proves nothing: say so, and fail.
		fmt.Fprintln(stderr, "soak: no problem ran (--minutes too short for the first problem?)")
		return errReported
	}
	return nil
}

// soakLostAfter is how many GPU calls in a row may fail before the soak
// stops: a lost context fails every later call, and one failure line per
// remaining minute of problems says nothing more.
const soakLostAfter = 5

// runSoakLoop hands problems 0, 1, 2, ... to workers goroutines until the
// time is up (or --count problems ran); run(w, k) runs problem k on worker
// w and returns the GPU call's own error (nil when it ran). Workers overlap one
// problem's reference with another's inputs and GPU call: the reference of
// a long chain is sequential, and the machine has many cores.
func runSoakLoop(workers int, o soakOptions, st *soakStats, run func(w, k int) error) {
	// A --minutes too large for a time.Duration (about 292 years) would
	// convert to a negative one, a deadline already past, and the soak would
	// run nothing and pass: take the largest Duration instead.
	limit := time.Duration(math.MaxInt64)
	if d := o.minutes * float64(time.Minute); d < float64(limit) {
		limit = time.Duration(d)
	}
	deadline := time.Now().Add(limit)
	cases := make(chan int)
	var lost atomic.Int32    // GPU calls failed in a row
	var lastErr atomic.Value // the last of them: error
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for k := range cases {
				if err := run(w, k); err != nil {
					lastErr.Store(err)
					lost.Add(1)
				} else {
					lost.Store(0)
				}
			}
		})
	}
	nextReport := time.Now().Add(10 * time.Second)
	for k := 0; o.count == 0 || k < o.count; k++ {
		if time.Now().After(deadline) {
			break
		}
		if n := lost.Load(); n >= soakLostAfter {
			// Out of device memory reads the same as a lost context
			// here: every later call would fail too. The error says which.
			fmt.Fprintf(stderr, "soak: %d GPU calls in a row failed, stopping; the last: %s\n", n, oneLine(lastErr.Load().(error)))
			break
		}
		cases <- k
		if time.Now().After(nextReport) {
			st.progress(stderr)
			nextReport = time.Now().Add(10 * time.Second)
		}
	}
	close(cases)
	wg.Wait()
}

// listSoak prints the problems a soak would run.
func listSoak(o soakOptions) {
	if o.one != nil {
		fmt.Fprintf(stdout, "case %d: %s\n", o.caseK, o.one)
		return
	}
	n := o.count
	if n == 0 {
		n = 20
	}
	for k := range n {
		fmt.Fprintf(stdout, "case %d: %s\n", k, drawSoakProblem(o.seed, k))
	}
}

// soakResult is soakOutcome plus the GPU call's own error (nil when the
// call ran, whatever its check found).
type soakResult struct {
	soakOutcome
	launchErr error
}

// runSoakProblem draws the inputs of one problem, runs it, checks it and
// records the outcome; a failure prints its line on stdout.
func runSoakProblem(rts *soakRuntimes, o soakOptions, k int, p soakProblem, st *soakStats) soakResult {
	var res soakResult
	start := time.Now()
	if p.Serve != nil {
		return runSoakServe(rts, o, k, p, st, start)
	}
	variant := p.Variant
	if variant == variantAuto {
		variant = ""
	}
	rt, release, err := rts.get(variant, p.Segments, p.SMs, p.PrepHeads)
	ran := variant
	if err == nil {
		defer release()
		var pl plan.Plan
		if pl, err = p.plan(rt.Device().SMs, variant); err == nil {
			ran = pl.Variant.Name
		}
		if pl.SegmentChunks > 0 {
			ran += "+split"
		}
		if p.SMs > 0 {
			ran += fmt.Sprintf("@%dSMs", rt.Device().SMs)
		}
		if p.Full {
			ran += "+full"
		}
	}
	if err == nil {
		in := newSoakInputs(p)
		var out *gdn.HostCoreResult
		if p.Full {
			out, err = rt.ForwardFullHost(in.full)
		} else {
			out, err = rt.ForwardHost(in.args)
		}
		if err != nil {
			if !errors.Is(err, gdn.ErrInvalidArgument) {
				res.launchErr = err
			}
		} else {
			res.soakOutcome = soakCheck(p, in, out, o.budget, o.limits)
			err = res.Err
		}
	}
	st.record(k, p, ran, res.soakOutcome, err, time.Since(start), o.failLine(k, p, ran, err))
	return res
}

// failLine is problem k's line on stdout when it failed with err (ran
// names what ran it): its size, the error and the commands that run it
// alone; "" when it passed.
func (o soakOptions) failLine(k int, p soakProblem, ran string, err error) string {
	if err == nil {
		return ""
	}
	repro := o.reproduce(k, p)
	if k >= 0 {
		repro += "  # or: " + o.reproduce(-1, p)
	}
	return fmt.Sprintf("FAIL case %d [%s, %s]: %v; reproduce: %s\n", k, ran, soakSize(p), oneLine(err), repro)
}

// soakSize sums a problem up for a failure line.
func soakSize(p soakProblem) string {
	s := p.shape()
	if p.Serve != nil {
		return fmt.Sprintf("N=%d tokens=%d Hq=%d Hv=%d %v", s.N(), s.Tokens(), p.Serve.Hq, p.Serve.Hv, p.Serve.Dtype)
	}
	return fmt.Sprintf("N=%d tokens=%d Hq=%d Hv=%d %v", s.N(), s.Tokens(), p.Hq, p.Hv, p.Dtype)
}

// oneLine keeps an error on one line.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " | ") }

// soakStats counts outcomes and keeps the worst errors.
type soakStats struct {
	mu             sync.Mutex // workers record at once
	start          time.Time
	passed, failed int
	worstO, worstH ref.Errors
	worstOK        [2]int         // case of the worst o ratio and the worst ht max-abs
	variants       map[string]int // problems per kernel variant
	tokens         int
	slowest        time.Duration
	// memInfo, when set, gives the device's free and total memory for the
	// progress lines: a soak that holds more and more of it shows so
	// before its problems fail for want of it.
	memInfo func() (free, total uint64, err error)
}

func newSoakStats() *soakStats {
	return &soakStats{start: time.Now(), variants: map[string]int{}, worstOK: [2]int{-1, -1}}
}

// record counts one outcome and prints its failure line (under the lock,
// so that lines of workers never interleave).
func (s *soakStats) record(k int, p soakProblem, variant string, out soakOutcome, err error, took time.Duration, failLine string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprint(stdout, failLine)
	if err != nil {
		s.failed++
	} else {
		s.passed++
	}
	s.variants[variant]++
	s.tokens += p.shape().Tokens()
	s.slowest = max(s.slowest, took)
	if out.O.Ratio > s.worstO.Ratio {
		s.worstO.Ratio, s.worstOK[0] = out.O.Ratio, k
	}
	s.worstO.MaxAbs = max(s.worstO.MaxAbs, out.O.MaxAbs)
	s.worstH.Ratio = max(s.worstH.Ratio, out.Ht.Ratio)
	if out.Ht.MaxAbs > s.worstH.MaxAbs {
		s.worstH.MaxAbs, s.worstOK[1] = out.Ht.MaxAbs, k
	}
}

// progress prints one line of progress.
func (s *soakStats) progress(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el := time.Since(s.start)
	n := s.passed + s.failed
	mem := ""
	if s.memInfo != nil {
		if free, total, err := s.memInfo(); err == nil && total > 0 {
			mem = fmt.Sprintf("; device memory %.1f of %.1f GB in use", float64(total-free)/1e9, float64(total)/1e9)
		}
	}
	fmt.Fprintf(w, "soak: %s, %d problems (%.1f/s), %d failed; worst o ratio %.3g (case %d), ht max-abs %.3g (case %d)%s\n",
		el.Round(time.Second), n, float64(n)/el.Seconds(), s.failed, s.worstO.Ratio, s.worstOK[0], s.worstH.MaxAbs, s.worstOK[1], mem)
}

// summary prints the totals: problems, tokens, worst errors, variants.
func (s *soakStats) summary(w io.Writer) {
	s.progress(w)
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(w, "soak: %d tokens in all, slowest problem %s; worst o ratio %.3g max %.3g, ht ratio %.3g max %.3g\n",
		s.tokens, s.slowest.Round(time.Millisecond), s.worstO.Ratio, s.worstO.MaxAbs, s.worstH.Ratio, s.worstH.MaxAbs)
	names := make([]string, 0, len(s.variants))
	for v := range s.variants {
		names = append(names, v)
	}
	sort.Strings(names)
	for _, v := range names {
		fmt.Fprintf(w, "soak: variant %-24s %d problems\n", v, s.variants[v])
	}
}
