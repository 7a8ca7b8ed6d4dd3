package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/target"
)

// Every error is printed once, with one prefix: the library's errors begin
// with "gdn: ", which the tool's "gdn NAME: " says already.
func TestErrorLineOnePrefix(t *testing.T) {
	_, _, targetErr := target.Parse("sm_75")
	_, openErr := openRuntime(gdn.Options{SMs: -1})
	_, planErr := gdn.PlanFor(gdn.PlanRequest{B: 1, T: 1, Hq: 2, Hv: 3, Dtype: gdn.BF16, SMs: 132})
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"warmup", targetErr, "gdn warmup: sm_75: unsupported GPU: the kernels need sm_90a"},
		{"run", openErr, "gdn run: Options.SMs: is -1; want 0"},
		{"bench", fmt.Errorf("case q35: %w", planErr), "gdn bench: case q35: Hv: Hv = 3 value heads"},
		{"run", fmt.Errorf("no GPU (%w)", gdnerr.ErrClosed), "gdn run: no GPU (runtime is closed)"},
		{"info", errors.New("npz: bad"), "gdn info: npz: bad"},
	} {
		got := errorLine(c.name, c.err)
		if !strings.HasPrefix(got, c.want) || strings.Contains(got, "gdn: ") {
			t.Errorf("%v: %q, want it to begin %q and say gdn once", c.err, got, c.want)
		}
	}
}
