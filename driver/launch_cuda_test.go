//go:build cuda

package driver

import (
	"testing"
)

// LaunchParams launches with arguments packed once, and a repeated launch
// (and the context switch of every driver call) allocates nothing in Go.
func TestLaunchParams(t *testing.T) {
	c := openCtx(t)
	add, _ := loadTest(t, c)
	const n = 512
	p := allocF32(t, c, n)
	if err := upload(c, p, ramp(n)); err != nil {
		t.Fatal(err)
	}
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	args := new(Args).Ptr(p).Int32(n)
	kp, err := NewKernelParams(args)
	if err != nil {
		t.Fatal(err)
	}
	if kp.Len() != 2 {
		t.Errorf("Len = %d, want 2", kp.Len())
	}
	args.Reset() // the packed copy does not depend on args any more
	launch := func() {
		if err := c.LaunchParams(add, D1(n/256), D1(256), 0, s, kp); err != nil {
			t.Fatal(err)
		}
	}
	launch()
	if allocs := testing.AllocsPerRun(10, launch); allocs != 0 {
		t.Errorf("LaunchParams: %v allocs per launch, want 0", allocs)
	}
	if allocs := testing.AllocsPerRun(10, func() { s.IsCapturing() }); allocs != 0 {
		t.Errorf("IsCapturing: %v allocs per call, want 0", allocs)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	v, err := download(c, p, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := expectF32(v, func(i int) float32 { return float32(i) + 12 }); err != nil { // 1 + 10 + 1 launches
		t.Fatal(err)
	}
	kp.Free()
	kp.Free()
	if err := c.LaunchParams(add, D1(1), D1(1), 0, s, kp); err == nil {
		t.Error("LaunchParams with freed KernelParams succeeded")
	}
}
