//go:build cuda

package driver

import (
	"strings"
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

// A copy into a stream that is capturing a graph is refused (the graph
// would keep the host address), and the capture still ends cleanly.
func TestCopyAsyncRefusedWhileCapturing(t *testing.T) {
	c := openCtx(t)
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	p := allocF32(t, c, 4)
	buf := make([]float32, 4)
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	up := c.CopyToDeviceAsync(p, unsafe.Pointer(&buf[0]), 16, s)
	down := c.CopyToHostAsync(unsafe.Pointer(&buf[0]), p, 16, s)
	g, err := s.EndCapture()
	if err != nil {
		t.Fatalf("EndCapture after the refused copies: %v", err)
	}
	g.Destroy()
	for name, err := range map[string]error{"CopyToDeviceAsync": up, "CopyToHostAsync": down} {
		if err == nil || !strings.Contains(err.Error(), "capturing") {
			t.Errorf("%s into a capturing stream: %v, want a refusal", name, err)
		}
	}
}

// WrapStream takes CU_STREAM_LEGACY as the legacy stream and refuses
// CU_STREAM_PER_THREAD and other small values with an error at first use,
// rather than keeping them where the Go runtime would abort on them.
func TestWrapStreamSpecialHandles(t *testing.T) {
	c := openCtx(t)
	if err := c.WrapStream(streamLegacy).Synchronize(); err != nil {
		t.Errorf("CU_STREAM_LEGACY: %v", err)
	}
	if h := c.WrapStream(streamLegacy).Handle(); h != 0 {
		t.Errorf("CU_STREAM_LEGACY wrapped as handle %#x, want 0", h)
	}
	for _, h := range []uintptr{streamPerThread, 3, 4095} {
		s := c.WrapStream(h)
		if err := s.Synchronize(); err == nil || !strings.Contains(err.Error(), "stream handle") {
			t.Errorf("handle %#x: Synchronize = %v, want a refusal naming the handle", h, err)
		}
		p := allocF32(t, c, 1)
		if err := c.CopyToDeviceAsync(p, unsafe.Pointer(new(float32)), 4, s); err == nil {
			t.Errorf("handle %#x: CopyToDeviceAsync accepted it", h)
		}
	}
}
