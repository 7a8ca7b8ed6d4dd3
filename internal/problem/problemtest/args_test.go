package problemtest

import (
	"testing"

	"github.com/gdnjit/gdn/internal/problem"
)

// Every helper's arguments pass validation: tests that start from them
// change one thing at a time.
func TestArgsAreValid(t *testing.T) {
	for name, a := range map[string]*problem.Core{"Core": Core(3, 65, 8, 24), "Varlen": Varlen()} {
		if _, err := problem.ValidateCore(a); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if p, err := problem.ValidateFull(Full(2, 100, 2, 4)); err != nil || p.N != 2 {
		t.Errorf("Full: %+v, %v", p, err)
	}
	a := Core(1, 10, 1, 1)
	WithStates(a, 3)
	if a.H0.Shape[0] != 3 || a.Ht.Bytes != 3*128*128*4 || a.H0.Ptr == a.Ht.Ptr {
		t.Errorf("WithStates: h0 %+v, ht %+v", a.H0, a.Ht)
	}
}
