package problem

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/internal/gdnerr"
)

func TestRuns(t *testing.T) {
	cu := func(lens ...int) Problem {
		s := []int{0}
		for _, l := range lens {
			s = append(s, s[len(s)-1]+l)
		}
		return Problem{B: 1, T: s[len(s)-1], N: len(lens), Seqs: s}
	}
	collect := func(p Problem, every int) []Run {
		var out []Run
		if err := Runs(p, every, func(r Run) error { out = append(out, r); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// Decodes first, then prompts (a scheduler's order): two runs.
	got := collect(cu(1, 1, 8, 300, 1024, 0, 64), 64)
	want := []Run{{Decode: true, N0: 0, N1: 3}, {N0: 3, N1: 7}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decodes first: %+v, want %+v", got, want)
	}
	// Interleaved: a run each time the kind changes; checkpoint rows
	// counted over the prefill runs only (9 tokens: prefill, no row).
	got = collect(cu(200, 3, 9, 130, 1, 64), 64)
	want = []Run{{N0: 0, N1: 1}, {Decode: true, N0: 1, N1: 2, Rows0: 3}, {N0: 2, N1: 4, Rows0: 3}, {Decode: true, N0: 4, N1: 5, Rows0: 5},
		{N0: 5, N1: 6, Rows0: 5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("interleaved: %+v, want %+v", got, want)
	}
	// B x T: one run.
	if got := collect(Problem{B: 4, T: 8, N: 4}, 0); !reflect.DeepEqual(got, []Run{{Decode: true, N0: 0, N1: 4}}) {
		t.Errorf("B x T decode: %+v", got)
	}
	if got := collect(Problem{B: 2, T: 100, N: 2}, 0); !reflect.DeepEqual(got, []Run{{N0: 0, N1: 2}}) {
		t.Errorf("B x T prefill: %+v", got)
	}
	stop := errors.New("stop")
	calls := 0
	if err := Runs(cu(1, 100, 1), 0, func(Run) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("Runs went on after an error: %v, %d calls", err, calls)
	}
	p := cu(1, 100, 2, 300)
	if n := testing.AllocsPerRun(10, func() { _ = Runs(p, 64, func(Run) error { return nil }) }); n != 0 {
		t.Errorf("Runs allocates %v times", n)
	}
}

func TestCheckSeqRun(t *testing.T) {
	if err := CheckSeqRun([]int{100, 101, 300}, 1, 400); err != nil {
		t.Errorf("a run in the middle: %v", err)
	}
	for _, c := range []struct {
		cu   []int
		want string
	}{{[]int{-1, 3}, "starts at -1"}, {[]int{5, 4}, "decreases"}, {[]int{0, 401}, "past B*T"}, {[]int{3}, "offsets"}} {
		err := CheckSeqRun(c.cu, 1, 400)
		var ae *gdnerr.ArgError
		if !errors.As(err, &ae) || ae.Arg != "cu_seqlens" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.cu, err, c.want)
		}
	}
}

func TestValidateMixedNeedsPool(t *testing.T) {
	var ae *gdnerr.ArgError
	if _, err := ValidateMixed(&Full{}); !errors.As(err, &ae) || ae.Arg != "pool" {
		t.Errorf("no pool: %v", err)
	}
	if _, err := ValidateMixed(nil); !errors.As(err, &ae) || ae.Arg != "args" {
		t.Errorf("nil: %v", err)
	}
}
