package scripts

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/gdnjit/gdn/ref"
)

// TestPyBenchSuiteMatchesRef: pybench.py's copy of the benchmark suite
// (name, Hq, Hv, sequence lengths) is ref.Suite, row for row, so that its
// times sit beside bench --full's on the same shapes.
func TestPyBenchSuiteMatchesRef(t *testing.T) {
	src, err := os.ReadFile("pybench.py")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^    "(\w+)": \((\d+), (\d+), \[([\d, ]+)\](?: \* (\d+))?\),$`)
	var got []ref.Case
	for _, m := range row.FindAllStringSubmatch(string(src), -1) {
		hq, _ := strconv.Atoi(m[2])
		hv, _ := strconv.Atoi(m[3])
		var lens []int
		for _, f := range regexp.MustCompile(`\d+`).FindAllString(m[4], -1) {
			n, _ := strconv.Atoi(f)
			lens = append(lens, n)
		}
		if m[5] != "" {
			n, _ := strconv.Atoi(m[5])
			lens = slices.Repeat(lens, n)
		}
		got = append(got, ref.Case{Name: m[1], Hq: hq, Hv: hv, Lens: lens})
	}
	if len(got) != len(ref.Suite) {
		t.Fatalf("pybench.py's SUITE has %d rows, ref.Suite %d", len(got), len(ref.Suite))
	}
	for i, want := range ref.Suite {
		g := got[i]
		if g.Name != want.Name || g.Hq != want.Hq || g.Hv != want.Hv || !slices.Equal(g.Lens, want.Lens) {
			t.Errorf("row %d: pybench.py has %s Hq=%d Hv=%d lens %v, ref.Suite %s Hq=%d Hv=%d lens %v",
				i, g.Name, g.Hq, g.Hv, g.Lens, want.Name, want.Hq, want.Hv, want.Lens)
		}
	}
}
