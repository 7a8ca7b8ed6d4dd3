package launch

import (
	"testing"
)

// The graph of a call is due from its second call on, never after a failed
// capture.
func TestCallGraphDue(t *testing.T) {
	var g callGraph
	if g.due() {
		t.Error("first call due for a graph")
	}
	for i := range 5 {
		if !g.due() {
			t.Errorf("call %d not due", i+2)
		}
	}
	if g.seen.Load() != 2 {
		t.Errorf("seen = %d, want it saturated at 2", g.seen.Load())
	}
	g.failed.Store(true)
	if g.due() {
		t.Error("due after a failed capture")
	}
}
