//go:build cuda

package driver

import (
	"testing"
	"unsafe"
)

// Async copies through pinned memory, in pieces, on a stream: the data
// round-trips, an Event recorded after a download says when it has landed,
// and bad arguments are refused before anything is queued.
func TestCopyAsync(t *testing.T) {
	c := openCtx(t)
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	const n = 1 << 16
	in, err := c.AllocHost(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Free()
	out, err := c.AllocHost(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Free()
	src := unsafe.Slice((*float32)(in.Pointer()), n)
	copy(src, ramp(n))
	p := allocF32(t, c, n)
	const pieces = 4
	const step = 4 * n / pieces
	for i := range pieces {
		if err := c.CopyToDeviceAsync(p.Offset(i*step), unsafe.Add(in.Pointer(), i*step), step, s); err != nil {
			t.Fatalf("CopyToDeviceAsync piece %d: %v", i, err)
		}
	}
	ev, err := c.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Destroy()
	if err := c.CopyToHostAsync(out.Pointer(), p, 4*n, s); err != nil {
		t.Fatalf("CopyToHostAsync: %v", err)
	}
	if err := ev.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := ev.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := expectF32(unsafe.Slice((*float32)(out.Pointer()), n), func(i int) float32 { return float32(i) }); err != nil {
		t.Fatalf("round trip: %v", err)
	}
	// The legacy default stream (nil) works too; zero bytes do nothing.
	if err := c.CopyToDeviceAsync(p, in.Pointer(), 0, nil); err != nil {
		t.Errorf("zero bytes: %v", err)
	}
	if err := c.CopyToHostAsync(out.Pointer(), p, 4, nil); err != nil {
		t.Errorf("default stream: %v", err)
	}
	if err := c.WrapStream(0).Synchronize(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"nil src":      c.CopyToDeviceAsync(p, nil, 4, s),
		"nil dst":      c.CopyToHostAsync(nil, p, 4, s),
		"nil device":   c.CopyToDeviceAsync(0, in.Pointer(), 4, s),
		"negative":     c.CopyToHostAsync(out.Pointer(), p, -1, s),
		"nil context":  (*Context)(nil).CopyToDeviceAsync(p, in.Pointer(), 4, nil),
		"nil context2": (*Context)(nil).CopyToHostAsync(out.Pointer(), p, 4, nil),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
