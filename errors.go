package gdn

import (
	"errors"
	"fmt"

	"github.com/gdnjit/gdn/driver"
)

// ErrInvalidArgument is wrapped by every error about a caller's argument
// (shape, dtype, pointer, size, cu_seqlens); test with errors.Is.
var ErrInvalidArgument = errors.New("invalid argument")

// ErrNoCUDA is returned where a GPU is needed but the binary was built
// without the cuda build tag (or no CUDA driver is present).
var ErrNoCUDA = driver.ErrNoCUDA

// ErrClosed is returned by calls on a closed Runtime.
var ErrClosed = errors.New("gdn: runtime is closed")

// ArgError reports a bad argument: which one, and what was expected.
type ArgError struct {
	Arg string // the argument's name, as in the API: "q", "cu_seqlens", ...
	Msg string
}

func (e *ArgError) Error() string { return fmt.Sprintf("gdn: %s: %s", e.Arg, e.Msg) }

// Unwrap makes errors.Is(err, ErrInvalidArgument) true.
func (e *ArgError) Unwrap() error { return ErrInvalidArgument }

func argErrorf(arg, format string, a ...any) error {
	return &ArgError{Arg: arg, Msg: fmt.Sprintf(format, a...)}
}
