package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/ref"
)

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
	Device          string // the GPU's name (gdn.DeviceInfo.Name)
}

// Derived figures of a result.

func (r benchResult) tflops() float64 { return r.Case.FLOPs() / (r.MedianMs * 1e-3) / 1e12 }

func (r benchResult) gbps() float64 {
	return r.Case.MinBytes(r.Dtype.Size()) / (r.MedianMs * 1e-3) / 1e9
}

func (r benchResult) overFloor() float64 { return r.MedianMs / r.Case.FloorMs() }

func (r benchResult) anchor() anchor { return anchorFor(r.Case.Hq, r.Case.Hv, r.Case.Lens) }

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

// targetMs is the target for a full-forward run's case (see
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
			optMs(a.FLACoreMs, "%.4f"), optMs(r.vsFLACore(), "%.2fx"), fmt.Sprintf("%s/%d", r.Timing, r.Calls), r.Plan.Kernel)
	}
	tw.Flush()
	fmt.Fprintln(w, "x floor: time over the roofline floor (docs/BENCH.md: 790 TFLOP/s, 4.3 TB/s).")
	fmt.Fprintln(w, "vs FLA core: FLA's time for the same work (recompute_w_u + fwd_h + fwd_o given g_cumsum and A,")
	fmt.Fprintln(w, "measured on the H200 2026-11-29) over ours; > 1 means gdn is faster. Full-forward anchors are in --csv.")
}

// printFullBenchTable writes the table of a full-forward run: beside each
// time FLA's own full forward (the same work), FlashQLA's and FlashInfer's
// from FlashQLA's table, and the target for the shape.
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
			optMs(r.targetMs(), "%.3f"), optMs(r.vsTarget(), "%.2fx"), fmt.Sprintf("%s/%d", r.Timing, r.Calls), r.Plan.Kernel)
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
	fmt.Fprintf(w, "target: %.1f x the faster of FlashQLA and FlashInfer on the shape; vs target: target over ours (>= 1: met). Met on %d of %d cases with a target.\n",
		fullTargetFactor, met, targets)
}

// benchCSVHeader names the CSV columns.
var benchCSVHeader = []string{
	"case", "hq", "hv", "lens", "tokens", "seqs", "dtype", "forward", "l2norm", "a_dtype",
	"median_ms", "min_ms", "tflops", "gbps", "floor_ms", "x_floor",
	"fla_core_ms", "vs_fla_core", "fla_full_ms", "vs_fla_full",
	"flashqla_fwd_ms", "flashinfer_fwd_ms", "fla_fwd_published_ms", "target_ms", "vs_target",
	"timing", "calls_per_timing", "input_sets", "reps", "variant", "plan", "nonfinite", "out_hash", "device",
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
			r.Plan.Kernel, r.Plan.String(), strconv.Itoa(r.NonFinite), fmt.Sprintf("%016x", r.OutHash), r.Device,
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

// nonFiniteErr is the error for the cases whose outputs hold NaN or Inf,
// but for a case whose plan's kernel is a lab experiment's build that
// leaves work out (labOf names the experiment): its outputs are wrong by
// design and its time is what it measures, so it gets a note.
func nonFiniteErr(stderr io.Writer, results []benchResult, labOf func(kernel string) (string, bool)) error {
	var err error
	for _, r := range results {
		if r.NonFinite == 0 {
			continue
		}
		if lab, wrong := labOf(r.Plan.Kernel); wrong {
			fmt.Fprintf(stderr, "bench: case %s: %d NaN/Inf output elements (lab %s leaves work out of %s: its outputs are wrong by design)\n", r.Case.Name, r.NonFinite, lab, r.Plan.Kernel)
			continue
		}
		err = errors.Join(err, fmt.Errorf("case %s: %d NaN/Inf output elements", r.Case.Name, r.NonFinite))
	}
	return err
}
