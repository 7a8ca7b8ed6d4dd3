package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gdnjit/gdn/jit"
)

// The fused kernel's timeline (kernsrc/gdn_hopper.cu, GDN_TIMELINE): a
// measurement build, never the library's, in which the first CTA stamps
// each warpgroup's steps of a window of chunks with the SM's clock and
// leaves the stamps, as raw 32-bit words, over the start of its ht rows.
// `gdn bench` decodes them after a case when GDN_JIT_DEFINES asks for the
// build, and prints where each chunk's time went:
//
//	GDN_JIT_DEFINES=GDN_TIMELINE=17 gdn bench --full --cases q35_4kx8
//	.bin/device-run.sh knobfull:GDN_TIMELINE=17@q35_4kx8     (the device)
//
// The case's first sequence needs more chunks than the window reaches
// (GDN_TIMELINE=17: chunks 16-28, so 30 or more; q35_4kx8 has 64).
const (
	timelineDefine = "GDN_TIMELINE"
	timelineChunks = 13 // kTlChunks
	timelineSteps  = 9  // kTlSteps
	timelineRowLen = 60 // stamps a row of ht (slot i at row i / 60, column i % 60)
)

// timelineStepNames are the kernel's steps, in its order. (In the fused
// kernel without the norm, "conv normed" is the converter past qk_read,
// before its conversion, and "aux normed" the aux group past full again.)
var timelineStepNames = [timelineSteps]string{
	"conv full", "conv normed", "conv ready", "aux full", "aux normed", "aux ready", "cons ready", "cons release", "copies issued",
}

// timelineFirstChunk is the first chunk of the window that defines (the
// value of GDN_JIT_DEFINES) asks the kernel to stamp: GDN_TIMELINE=F+1
// gives F. ok is false without it (or with 0, the library's build).
func timelineFirstChunk(defines string) (first int, ok bool) {
	for _, d := range strings.Fields(defines) {
		name, value, _ := strings.Cut(d, "=")
		if name != timelineDefine {
			continue
		}
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 {
			return 0, false
		}
		return n - 1, true
	}
	return 0, false
}

// timelineStamps reads the window's stamps from ht (the first state's
// rows, where the kernel left them): stamps[c][step], cycles of the SM's
// 32-bit clock.
func timelineStamps(ht []float32) ([timelineChunks][timelineSteps]uint32, error) {
	var st [timelineChunks][timelineSteps]uint32
	need := (timelineChunks*timelineSteps-1)/timelineRowLen*128 + timelineRowLen
	if len(ht) < need {
		return st, fmt.Errorf("timeline: ht has %d elements, the stamps need %d", len(ht), need)
	}
	for i := range timelineChunks * timelineSteps {
		st[i/timelineSteps][i%timelineSteps] = math.Float32bits(ht[i/timelineRowLen*128+i%timelineRowLen])
	}
	return st, nil
}

// writeTimeline prints the window: each step's time from the window's
// first stamp (thousands of cycles), and per chunk what a reader wants to
// compare:
//   - load: from the chunk's copies issued to the converter past full
//     (the copies' latency, or the converter's lateness);
//   - conv, aux: each producer group's time from its wait on full to its
//     arrival on ready;
//   - period: the consumers' time from one chunk's ready to the next;
//   - waited: the consumers' time from their release of the chunk before
//     to passing this one's ready (the refill's issue included);
//   - slack: from the later producer's ready arrival to the consumers
//     passing ready (about 0: the consumers waited for the producers;
//     large: the chunk was ready before they wanted it).
//
// Differences are taken modulo 2^32, as the clock wraps.
func writeTimeline(w io.Writer, first int, st [timelineChunks][timelineSteps]uint32) {
	t0 := st[0][0]
	rel := func(x uint32) float64 { return float64(int32(x-t0)) / 1000 }
	diff := func(a, b uint32) float64 { return float64(int32(a-b)) / 1000 }
	fmt.Fprintf(w, "timeline: the first CTA's chunks %d-%d, thousands of SM cycles from its first stamp\n", first, first+timelineChunks-1)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "chunk\t")
	for _, n := range timelineStepNames {
		fmt.Fprintf(tw, "%s\t", n)
	}
	fmt.Fprint(tw, "load\tconv\taux\tperiod\twaited\tslack\t\n")
	var load, conv, aux, period, waited, slack []float64
	for c := range timelineChunks {
		s := st[c]
		fmt.Fprintf(tw, "%d\t", first+c)
		for _, x := range s {
			fmt.Fprintf(tw, "%.2f\t", rel(x))
		}
		later := s[2]
		if int32(s[5]-s[2]) > 0 {
			later = s[5]
		}
		row := []float64{diff(s[0], s[8]), diff(s[2], s[0]), diff(s[5], s[3]), math.NaN(), math.NaN(), diff(s[6], later)}
		if c > 0 {
			row[3] = diff(s[6], st[c-1][6])
			row[4] = diff(s[6], st[c-1][7])
			period = append(period, row[3])
			waited = append(waited, row[4])
		}
		load, conv, aux, slack = append(load, row[0]), append(conv, row[1]), append(aux, row[2]), append(slack, row[5])
		for _, x := range row {
			if math.IsNaN(x) {
				fmt.Fprint(tw, "-\t")
			} else {
				fmt.Fprintf(tw, "%.2f\t", x)
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintf(w, "timeline medians (thousands of cycles): load %.2f, conv %.2f, aux %.2f, period %.2f, waited %.2f, slack %.2f\n",
		median(load), median(conv), median(aux), median(period), median(waited), median(slack))
}

// benchTimeline prints the timeline of a case's last call when the
// kernels were built with GDN_TIMELINE (a measurement build), from the
// downloaded ht of one of its input sets; a fused call's only (the other
// kernels do not leave the stamps).
func benchTimeline(w io.Writer, variant string, ht []float32) {
	first, ok := timelineFirstChunk(os.Getenv(jit.DefinesEnv))
	if !ok || !strings.Contains(variant, "_fused") {
		return
	}
	st, err := timelineStamps(ht)
	if err != nil {
		fmt.Fprintln(w, err)
		return
	}
	writeTimeline(w, first, st)
}
