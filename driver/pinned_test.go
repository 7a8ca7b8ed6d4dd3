package driver

import "testing"

// A nil or freed HostBuffer is empty in both builds, and Free is idempotent.
func TestHostBufferNil(t *testing.T) {
	var h *HostBuffer
	if h.Len() != 0 || h.Pointer() != nil || h.Bytes() != nil || h.Free() != nil {
		t.Error("a nil *HostBuffer is not empty")
	}
	h = &HostBuffer{}
	if h.Bytes() != nil || h.Free() != nil || h.Free() != nil {
		t.Error("a zero HostBuffer is not empty, or Free failed")
	}
}

// AllocHost fails cleanly for a bad size and on a nil Context.
func TestAllocHostArguments(t *testing.T) {
	var c *Context
	for _, n := range []int{0, -1, 64} {
		h, err := c.AllocHost(n)
		if err == nil || h != nil {
			t.Errorf("AllocHost(%d) on a nil Context: %v, %v", n, h, err)
		}
	}
}
