package main

import (
	"math"
	"strings"
	"testing"
)

func TestTimelineFirstChunk(t *testing.T) {
	for _, c := range []struct {
		defines string
		first   int
		ok      bool
	}{
		{"", 0, false},
		{"GDN_WHATIF=5", 0, false},
		{"GDN_TIMELINE=0", 0, false}, // the library's build
		{"GDN_TIMELINE=x", 0, false},
		{"GDN_TIMELINE=1", 0, true},
		{"GDN_WHATIF=1 GDN_TIMELINE=17", 16, true},
	} {
		first, ok := timelineFirstChunk(c.defines)
		if first != c.first || ok != c.ok {
			t.Errorf("timelineFirstChunk(%q) = %d, %v; want %d, %v", c.defines, first, ok, c.first, c.ok)
		}
	}
}

// The stamps come back from where the kernel leaves them (slot i at ht's
// row i / 60, column i % 60, as raw words), and the summary's columns are
// the differences it names, the clock's wrap included.
func TestTimelineStampsAndSummary(t *testing.T) {
	ht := make([]float32, 128*128)
	for i := range ht {
		ht[i] = float32(math.NaN()) // nothing else may be read
	}
	// A steady pipeline, starting just below the 32-bit clock's wrap:
	// chunk c lands at 5000 c; the converter takes 3000, the aux group
	// 4000 from 500 after landing; the consumers pass ready 100 after the
	// aux group's arrival and release 2000 later; its copies were issued
	// 1800 before it landed.
	base := uint32(math.MaxUint32 - 20000)
	var want [timelineChunks][timelineSteps]uint32
	for c := range timelineChunks {
		land := base + uint32(5000*c)
		want[c] = [timelineSteps]uint32{land, land + 1000, land + 3000, land + 500, land + 1200, land + 4500, land + 4600, land + 6600, land - 1800}
		for s, v := range want[c] {
			i := c*timelineSteps + s
			ht[i/timelineRowLen*128+i%timelineRowLen] = math.Float32frombits(v)
		}
	}
	got, err := timelineStamps(ht)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("stamps read back differ:\n got %v\nwant %v", got, want)
	}
	var b strings.Builder
	writeTimeline(&b, 16, got)
	out := b.String()
	if !strings.Contains(out, "chunks 16-28") {
		t.Errorf("window not named:\n%s", out)
	}
	// conv 3.00, aux 4.00, period 5.00, waited (4600 - (6600 - 5000)) =
	// 3.00, slack (4600 - 4500) = 0.10.
	if !strings.Contains(out, "load 1.80, conv 3.00, aux 4.00, period 5.00, waited 3.00, slack 0.10") {
		t.Errorf("medians wrong:\n%s", out)
	}
	if _, err := timelineStamps(ht[:100]); err == nil {
		t.Error("a short ht gave no error")
	}
}
