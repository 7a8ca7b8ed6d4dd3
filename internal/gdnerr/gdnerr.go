// Package gdnerr holds the errors that every layer of gdn returns and
// package gdn re-exports (as Go's internal/oserror serves os and io/fs): the
// layers below the public package cannot import it, and a caller's
// errors.Is and errors.As must work whichever layer made the error.
package gdnerr

import (
	"errors"
	"fmt"
)

// ErrInvalidArgument is wrapped by every error about a caller's argument.
var ErrInvalidArgument = errors.New("invalid argument")

// ErrClosed is returned by calls on a closed Runtime.
var ErrClosed = errors.New("gdn: runtime is closed")

// ErrUnsupportedGPU is wrapped by the errors for a GPU, or a compile
// target, that gdn's kernels cannot run on.
var ErrUnsupportedGPU = errors.New("unsupported GPU")

// ArgError reports a bad argument: which one, and what was expected. It
// prints as "gdn: ARG: MSG" and wraps ErrInvalidArgument.
type ArgError struct {
	Arg string // the argument's name, as in the API: "q", "cu_seqlens", ...
	Msg string
}

func (e *ArgError) Error() string { return fmt.Sprintf("gdn: %s: %s", e.Arg, e.Msg) }

// Unwrap makes errors.Is(err, ErrInvalidArgument) true.
func (e *ArgError) Unwrap() error { return ErrInvalidArgument }

// Argf returns an *ArgError for arg with a formatted message.
func Argf(arg, format string, a ...any) error {
	return &ArgError{Arg: arg, Msg: fmt.Sprintf(format, a...)}
}
