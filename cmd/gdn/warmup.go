package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/target"
	"github.com/gdnjit/gdn/jit"
	"github.com/gdnjit/gdn/kernsrc"
)

func init() {
	register("warmup", "compile kernel variants into the disk cache and report registers and spills", runWarmup)
}

// catalogue, requestFor and compile are the variant list, how a variant
// becomes a compile request and how a request is compiled; tests replace
// them.
var (
	catalogue  = kernsrc.Catalogue
	requestFor = jit.RequestFor
	compile    = (*jit.Compiler).Compile
)

// warmResult is the outcome of one variant.
type warmResult struct {
	variant kernsrc.Variant
	entry   string // the kernel compiled (a lab build's, in a development build)
	art     *jit.Artifact
	err     error
}

// failed reports whether the variant failed to compile or failed to reach
// the disk cache: the cache then lacks it, and the first call that needs
// it compiles it (or fails).
func (r warmResult) failed() bool {
	return r.err != nil || r.art.DiskErr != nil
}

// spills reports whether the variant compiled, was cached, and spills
// registers: it runs, but slower than it should (with --strict, a
// failure: the project's own check that no kernel spills).
func (r warmResult) spills() bool {
	return !r.failed() && r.art.Report.Spills()
}

func runWarmup(args []string) error {
	fs := newFlags("warmup", "[--arch sm_90a] [--all | --variants a,b | --shapes S [--shapes-file F] [--dtypes bf16,fp16] [--sms N] [--full]] [--cache-dir DIR] [--jobs N] [--strict]\n\n"+shapeSyntax)
	arch := fs.String("arch", "", "target architecture: sm_90a, the only one the kernels are written for (sm_90 is read as sm_90a; default: GPU 0's, which must be a Hopper GPU)")
	list := fs.String("variants", "", "comma-separated variant names (default: every variant)")
	shapes := fs.String("shapes", "", "compile the variants these shapes need (see below), separated by ';'")
	shapesFile := fs.String("shapes-file", "", "a file of shapes, one per line")
	dtypes := fs.String("dtypes", "bf16", "with --shapes: the input dtypes, comma-separated (bf16, fp16)")
	sms := fs.Int("sms", 132, "with --shapes: the multiprocessors of the GPU the kernels are for (a MIG slice has fewer)")
	full := fs.Bool("full", false, "with --shapes: also the full forward's kernels (ForwardFull, with and without L2Norm)")
	all := fs.Bool("all", false, "compile every catalogue variant (what happens when neither --variants nor --shapes is given)")
	cacheDir := fs.String("cache-dir", "", "disk cache folder (default: $"+jit.CacheDirEnv+", else the user cache folder's gdn/kernels)")
	jobs := fs.Int("jobs", min(runtime.NumCPU(), 4), "variants compiled at once")
	strict := fs.Bool("strict", false, "also fail when a variant spills registers (by default a spill is reported and the kernel, which runs, stays cached)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var variants []kernsrc.Variant
	if *all && (*list != "" || *shapes != "" || *shapesFile != "") {
		return errors.New("--all compiles every variant: give it alone, or --variants or --shapes instead")
	}
	if *full && *shapes == "" && *shapesFile == "" {
		return errors.New("--full goes with --shapes or --shapes-file")
	}
	if *shapes != "" || *shapesFile != "" {
		if *list != "" {
			return errors.New("give --variants or --shapes/--shapes-file, not both")
		}
		if *sms < 1 {
			return fmt.Errorf("--sms %d: want at least 1", *sms)
		}
		problems, err := readShapes(*shapes, *shapesFile)
		if err != nil {
			return err
		}
		dts, err := parseDtypes(*dtypes)
		if err != nil {
			return err
		}
		if variants, err = variantsForShapes(problems, dts, *sms, *full); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "warmup: %d shapes x %d dtypes on %d SMs need %d variants\n", len(problems), len(dts), *sms, len(variants))
	} else {
		var err error
		if variants, err = selectVariants(*list); err != nil {
			return err
		}
	}
	target, err := warmupTarget(*arch)
	if err != nil {
		return err
	}
	n, err := jit.LoadNVRTC()
	if err != nil {
		return err
	}
	// sm_90a needs NVRTC 12.0 or newer; an older one would fail every
	// variant with the same ptxas error.
	if major, _ := n.Version(); major < 12 || !n.Supports(target.CC()) {
		return fmt.Errorf("%s cannot compile for %s (it needs NVRTC 12.0 or newer)", n, target)
	}
	disk, err := jit.OpenDiskCache(*cacheDir)
	if err != nil {
		return err
	}

	fmt.Fprintf(stderr, "warmup: %d variants for %s with %s into %s\n", len(variants), target, n, disk.Dir())
	start := time.Now()
	results := compileAll(jit.NewCompiler(disk), variants, target, max(*jobs, 1), newProgress(stderr, len(variants)))
	printWarmTable(results)
	fromDisk := 0
	for _, r := range results {
		if r.err == nil && r.art.FromDisk {
			fromDisk++
		}
	}
	fmt.Fprintf(stderr, "warmup: %d variants in %.1f s, %d from disk\n", len(results), time.Since(start).Seconds(), fromDisk)
	if n := noReport(results); n > 0 {
		// NVRTC 13 leaves some logs empty (a cache of its own under the
		// home): the cubins' own registers and stack frames still show a
		// spill, but not ptxas's advice on serialised wgmma.
		fmt.Fprintf(stderr, "warmup: %d of %d variants came without a ptxas report (a spill still shows, from the cubin; wgmma serialisation does not: an empty HOME gets the reports)\n", n, len(results))
	}

	bad, spilling := 0, 0
	for _, r := range results {
		switch {
		case r.err != nil:
			fmt.Fprintf(stderr, "\n%s failed:\n%v\n", r.variant.Name, r.err)
		case r.art.DiskErr != nil:
			fmt.Fprintf(stderr, "\n%s compiled but was not cached: %v\n", r.variant.Name, r.art.DiskErr)
		case r.spills():
			fmt.Fprintf(stderr, "\n%s spills registers:\n%s\n", r.variant.Name, r.art.Report)
		}
		if r.failed() {
			bad++
		} else if r.spills() {
			spilling++
		}
	}
	switch {
	case bad > 0 && *strict && spilling > 0:
		return fmt.Errorf("%d of %d variants failed, %d more spill", bad, len(results), spilling)
	case bad > 0:
		return fmt.Errorf("%d of %d variants failed", bad, len(results))
	case *strict && spilling > 0:
		return fmt.Errorf("%d of %d variants spill registers (--strict)", spilling, len(results))
	case spilling > 0:
		// Another NVRTC than the one the kernels were checked with (CUDA
		// 13's, docs/TOOLCHAIN.md) may spill where 12.4 did not: the
		// kernels are cached and run; the user is told, not stopped.
		fmt.Fprintf(stderr, "warmup: warning: %d of %d variants spill registers with %s (cached; they run, a little slower)\n", spilling, len(results), n)
	}
	return nil
}

// noReport counts the compiled cubins whose ptxas report NVRTC left out.
func noReport(results []warmResult) int {
	n := 0
	for _, r := range results {
		if r.err == nil && !r.art.IsPTX && (r.art.Report.FromCubin || len(r.art.Report.Functions) == 0) {
			n++
		}
	}
	return n
}

// selectVariants returns the catalogue, or the named variants of it.
func selectVariants(list string) ([]kernsrc.Variant, error) {
	all := catalogue()
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	byName := map[string]kernsrc.Variant{}
	var names []string
	for _, v := range all {
		byName[v.Name] = v
		names = append(names, v.Name)
	}
	var out []kernsrc.Variant
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		v, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("no variant %q; the catalogue has: %s", name, strings.Join(names, ", "))
		}
		seen[name] = true
		out = append(out, v)
	}
	return out, nil
}

// warmupTarget reads --arch, or asks GPU 0 for its compute capability. The
// kernels exist for sm_90a only (target.Arch): any other target is one
// line of error, and sm_90 is read as sm_90a with a note saying so.
func warmupTarget(arch string) (jit.Target, error) {
	if arch == "" {
		ctx, err := driver.Open(0)
		if err != nil {
			hint := "pass --arch sm_90a to compile for an H100/H200 without one"
			if errors.Is(err, driver.ErrNoCUDA) {
				hint = "this gdn is built without -tags cuda; " + hint
			}
			return jit.Target{}, fmt.Errorf("no --arch given and no GPU to detect it from (%v); %s", err, hint)
		}
		info := ctx.Info()
		ctx.Close()
		if err := target.CheckDevice(info); err != nil {
			return jit.Target{}, err
		}
		fmt.Fprintf(stderr, "warmup: GPU 0 is %s (compute capability %d.%d): target %s\n", info.Name, info.Major, info.Minor, target.Arch)
		arch = target.Arch
	}
	t, note, err := target.Parse(arch)
	if err != nil {
		return t, err
	}
	if note != "" {
		fmt.Fprintf(stderr, "warmup: %s\n", note)
	}
	return t, nil
}

// compileAll compiles the variants, jobs at a time, and returns the results
// in the variants' order.
func compileAll(c *jit.Compiler, variants []kernsrc.Variant, t jit.Target, jobs int, bar *progress) []warmResult {
	results := make([]warmResult, len(variants))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(jobs, len(variants)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				v := variants[i]
				r := warmResult{variant: v, entry: v.Kernel}
				req, err := requestFor(v, t)
				if err == nil {
					if len(req.Entries) == 1 {
						r.entry = req.Entries[0]
					}
					r.art, err = compile(c, req)
				}
				r.err = err
				results[i] = r
				bar.step(v.Name, r)
			}
		}()
	}
	for i := range variants {
		next <- i
	}
	close(next)
	wg.Wait()
	bar.finish()
	return results
}

// printWarmTable prints one row per variant on stdout.
func printWarmTable(results []warmResult) {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "variant\tcompile ms\tregisters\tspill B\tstack B\tsmem B\tstatus")
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t%s\n", r.variant.Name, failWord(r.err))
			continue
		}
		a := r.art
		when := fmt.Sprintf("%.0f", ms(a.CompileTime))
		if a.FromDisk {
			when = "disk"
		}
		regs, spill, stack, smem := "-", fmt.Sprint(a.Report.SpillBytes()), "-", "-"
		entry := r.entry
		if entry == "" {
			entry = r.variant.Kernel
		}
		f, reported := a.Report.Function(a.Symbol(entry))
		if reported {
			regs, stack, smem = fmt.Sprint(f.Registers), fmt.Sprint(f.StackFrame), fmt.Sprint(f.SharedBytes)
		}
		if a.Report.FromCubin {
			spill, smem = "?", "-" // the cubin keeps neither
		}
		status := "ok"
		switch {
		case a.IsPTX:
			status = "ok (ptx)"
		case a.DiskErr != nil:
			status = "NOT CACHED"
		case a.Report.Spills():
			status = "SPILLS"
		case a.Report.Serialized():
			status = "WGMMA SERIALIZED"
		case !reported || a.Report.FromCubin:
			// NVRTC 13 can leave the ptxas log empty for a program it
			// compiled before (a cache of its own, kept under the user's
			// home): the cubin's registers and stack frame say whether it
			// spills (a frame is SPILLS above), but not whether ptxas
			// serialised its wgmma. Not plain "ok", which scripts check for.
			status = "ok (no report)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.variant.Name, when, regs, spill, stack, smem, status)
	}
	tw.Flush()
}

// failWord is the table's status for a variant that did not compile.
func failWord(err error) string {
	var ce *jit.CompileError
	if errors.As(err, &ce) {
		return "COMPILE ERROR"
	}
	return "FAILED"
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

// progress is a text progress bar: redrawn in place with \r on a terminal,
// one line per finished variant otherwise (logs, CI).
type progress struct {
	mu          sync.Mutex
	w           io.Writer
	tty         bool
	total, done int
}

// newProgress returns a bar for total steps written to w.
func newProgress(w io.Writer, total int) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, tty: ok && isTerminal(f), total: total}
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// step records one finished variant.
func (p *progress) step(name string, r warmResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	what := "compiled"
	switch {
	case r.err != nil:
		what = "FAILED"
	case r.art.FromDisk:
		what = "from disk"
	case r.art.Report.Spills():
		what = "compiled, SPILLS"
	case r.art.Report.Serialized():
		what = "compiled, WGMMA SERIALIZED"
	}
	if !p.tty {
		fmt.Fprintf(p.w, "[%d/%d] %s: %s\n", p.done, p.total, name, what)
		return
	}
	const width = 30
	filled := width * p.done / max(p.total, 1)
	line := fmt.Sprintf("[%s%s] %d/%d %s: %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		p.done, p.total, name, what)
	fmt.Fprintf(p.w, "\r%-90s", line) // pad to wipe a longer previous line
}

// finish ends the bar's line on a terminal.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
