package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// printCompare writes, for each case of cur that old also has (same name,
// heads, lengths and forward, and for the full forward the same L2Norm),
// both medians and the speed-up old/new (> 1: the new run is faster), then
// the geometric mean of the speed-ups and the cases only one run has. It
// fails when the runs share no case.
func printCompare(w io.Writer, old, cur []benchRow, oldName string) error {
	byCase := map[string]benchRow{}
	for _, r := range old {
		byCase[r.Case] = r
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "case\tlens\told ms\tnew ms\tspeed-up\t\n")
	var logSum float64
	var n int
	var onlyNew, changed, otherForward, otherNorm []string
	seen := map[string]bool{}
	for _, r := range cur {
		o, ok := byCase[r.Case]
		seen[r.Case] = true
		switch {
		case !ok:
			onlyNew = append(onlyNew, r.Case)
			continue
		case o.Hq != r.Hq || o.Hv != r.Hv || o.Lens != r.Lens:
			changed = append(changed, r.Case)
			continue
		case o.Forward != r.Forward:
			// A core time against a full one measures different work.
			otherForward = append(otherForward, r.Case)
			continue
		case o.L2Norm != r.L2Norm:
			// So does a full forward with the norm inside against one
			// without (--full meant --l2norm before docs/PERF.md v35).
			otherNorm = append(otherNorm, r.Case)
			continue
		}
		s := o.MedianMs / r.MedianMs
		logSum += math.Log(s)
		n++
		fmt.Fprintf(tw, "%s\t%s\t%.4f\t%.4f\t%.2fx\t\n", r.Case, shortLensText(r.Lens), o.MedianMs, r.MedianMs, s)
	}
	tw.Flush()
	var onlyOld []string
	for _, r := range old {
		if !seen[r.Case] {
			onlyOld = append(onlyOld, r.Case)
		}
	}
	if n == 0 {
		if len(otherForward) > 0 {
			return fmt.Errorf("--compare %s: no case in common with this run (it timed the other forward: core against full)", oldName)
		}
		if len(otherNorm) > 0 {
			return fmt.Errorf("--compare %s: no case in common with this run (one timed the full forward with the L2 norm inside, one without: --l2norm)", oldName)
		}
		return fmt.Errorf("--compare %s: no case in common with this run", oldName)
	}
	fmt.Fprintf(w, "speed-up: old median over new (> 1: this run is faster); geometric mean over %d cases %.2fx\n", n, math.Exp(logSum/float64(n)))
	if od, nd := runDevice(old), runDevice(cur); od != "" && nd != "" && od != nd {
		fmt.Fprintf(w, "the runs are from different GPUs (%s: %s; this run: %s): the speed-ups compare the cards as well\n", oldName, od, nd)
	}
	if len(onlyNew) > 0 {
		fmt.Fprintf(w, "only in this run: %v\n", onlyNew)
	}
	if len(onlyOld) > 0 {
		fmt.Fprintf(w, "only in %s: %v\n", oldName, onlyOld)
	}
	if len(changed) > 0 {
		fmt.Fprintf(w, "same name, different shape (not compared): %v\n", changed)
	}
	if len(otherForward) > 0 {
		fmt.Fprintf(w, "same case, one run of the core forward and one of the full (not compared): %v\n", otherForward)
	}
	if len(otherNorm) > 0 {
		fmt.Fprintf(w, "same case, one full-forward run with the L2 norm inside and one without (not compared): %v\n", otherNorm)
	}
	return nil
}
