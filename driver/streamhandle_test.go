package driver

import (
	"strings"
	"testing"
)

func TestStreamHandle(t *testing.T) {
	for _, c := range []struct {
		in, use uintptr
		refused bool
		err     string
	}{
		{0, 0, false, ""},
		{streamLegacy, 0, false, ""},
		{streamPerThread, 0, true, "CU_STREAM_PER_THREAD"},
		{3, 0, true, "not a CUstream"},
		{4095, 0, true, "not a CUstream"},
		{4096, 4096, false, ""},
		{0x7f3a5c000000, 0x7f3a5c000000, false, ""},
	} {
		use, refused := streamHandle(c.in)
		if use != c.use || refused != c.refused {
			t.Errorf("streamHandle(%#x) = %#x, %v; want %#x, %v", c.in, use, refused, c.use, c.refused)
		}
		if refused {
			if err := streamHandleError(c.in); !strings.Contains(err.Error(), "stream handle") || !strings.Contains(err.Error(), c.err) {
				t.Errorf("streamHandleError(%#x) = %v, want it to name the stream handle and %q", c.in, err, c.err)
			}
		}
	}
}
