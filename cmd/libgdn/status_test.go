package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/gdnjit/gdn"
)

// TestStatus checks the mapping of the Go API's errors, wrapped or not, to
// gdn_status codes.
func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int32
	}{
		{nil, statusOK},
		{&gdn.ArgError{Arg: "q", Msg: "x"}, statusInvalidArgument},
		{fmt.Errorf("ctx: %w", gdn.ErrClosed), statusClosed},
		{fmt.Errorf("ctx: %w", gdn.ErrNoCUDA), statusNoCUDA},
		{fmt.Errorf("ctx: %w", gdn.ErrUnsupportedGPU), statusUnsupportedGPU},
		{errors.New("out of memory"), statusOther},
	} {
		if got := status(tc.err); got != tc.want {
			t.Errorf("status(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestUnknownHandle checks that calls on a handle never opened (or
// closed) answer GDN_ERR_CLOSED and leave the message in slot 0.
func TestUnknownHandle(t *testing.T) {
	const h = 1 << 40
	for name, call := range map[string]func() int32{
		"forward":       func() int32 { return forward(h, &cCoreArgs{}, 0) },
		"forward_full":  func() int32 { return forwardFull(h, &cFullArgs{}, 0) },
		"decode":        func() int32 { return decode(h, &cDecodeArgs{}, 0) },
		"forward_mixed": func() int32 { return forwardMixed(h, &cFullArgs{}, 0) },
		"close":         func() int32 { return closeRuntime(h) },
	} {
		if got := call(); got != statusClosed {
			t.Errorf("%s on an unknown handle: status %d, want %d", name, got, statusClosed)
		}
		if msg := lastError(0); !strings.Contains(msg, "closed or was never opened") {
			t.Errorf("%s: slot 0 holds %q", name, msg)
		}
	}
}

// TestCopyMessage checks gdn_last_error's copy: cut to the buffer, always
// NUL-terminated, the whole length returned.
func TestCopyMessage(t *testing.T) {
	buf := make([]byte, 6)
	for i := range buf {
		buf[i] = 'x'
	}
	if n := copyMessage("gdn: q: bad", unsafe.Pointer(&buf[0]), int64(len(buf))); n != 11 {
		t.Errorf("length %d, want 11", n)
	}
	if string(buf) != "gdn: \x00" {
		t.Errorf("buffer %q, want %q", buf, "gdn: \x00")
	}
	if n := copyMessage("abc", nil, 0); n != 3 {
		t.Errorf("length with no buffer %d, want 3", n)
	}
}
