//go:build cuda

package driver

import (
	"testing"
)

// captureAdd captures one launch of the test kernel add over a's n values
// on a new stream of c and returns the stream and the graph (both
// destroyed when the test ends).
func captureAdd(t *testing.T, c *Context, add *Function, a DevicePtr, n int) (*Stream, *Graph) {
	t.Helper()
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Destroy() })
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(add, D1(uint32(n/128)), D1(128), 0, s, new(Args).Ptr(a).Int32(int32(n))); err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Destroy() })
	return s, g
}

func TestGraph(t *testing.T) {
	c := openCtx(t)
	add, _ := loadTest(t, c)
	const n = 512
	a := allocF32(t, c, n)
	b := allocF32(t, c, n)
	if err := upload(c, a, ramp(n)); err != nil {
		t.Fatal(err)
	}
	if err := upload(c, b, ramp(n)); err != nil {
		t.Fatal(err)
	}
	s, g := captureAdd(t, c, add, a, n)
	nodes, err := g.KernelNodes()
	if err != nil || len(nodes) != 1 {
		t.Fatalf("KernelNodes = %v, %v", nodes, err)
	}
	x, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer x.Destroy()
	for i := 0; i < 3; i++ {
		if err := x.Launch(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	v, _ := download(c, a, n)
	if err := expectF32(v, func(i int) float32 { return float32(i) + 3 }); err != nil {
		t.Fatal("3 replays:", err)
	}
	if err := x.SetKernelNodeArgs(nodes[0], add, D1(n/128), D1(128), 0, new(Args).Ptr(b).Int32(n)); err != nil {
		t.Fatal(err)
	}
	if err := x.Launch(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	v, _ = download(c, a, n)
	if err := expectF32(v, func(i int) float32 { return float32(i) + 3 }); err != nil {
		t.Fatal("a after the update:", err)
	}
	v, _ = download(c, b, n)
	if err := expectF32(v, func(i int) float32 { return float32(i) + 1 }); err != nil {
		t.Fatal("b after the update:", err)
	}
	// The default stream cannot be captured.
	if err := c.WrapStream(0).BeginCapture(); err == nil {
		t.Error("capture of the legacy default stream succeeded")
	}
}
