package gdnerr

import (
	"errors"
	"fmt"
	"testing"
)

// An ArgError names its argument once, after the package's name, and is an
// ErrInvalidArgument however deep it is wrapped.
func TestArgError(t *testing.T) {
	err := fmt.Errorf("context: %w", Argf("q", "dtype %v, want %s", "fp32", "bf16"))
	var ae *ArgError
	if !errors.As(err, &ae) || ae.Arg != "q" || ae.Msg != "dtype fp32, want bf16" || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("%v", err)
	}
	if got := ae.Error(); got != "gdn: q: dtype fp32, want bf16" {
		t.Errorf("Error() = %q", got)
	}
	if errors.Is(ErrClosed, ErrInvalidArgument) || errors.Is(ErrUnsupportedGPU, ErrInvalidArgument) {
		t.Error("the sentinels are distinct")
	}
}
