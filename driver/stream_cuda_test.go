//go:build cuda

package driver

import (
	"testing"
)

func TestStreamEvent(t *testing.T) {
	c := openCtx(t)
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	if s.Handle() == 0 {
		t.Error("new stream has handle 0")
	}
	start, err := c.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	end, err := c.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	p := allocF32(t, c, 1<<24)
	if err := start.Record(s); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := c.MemsetD32(p, uint32(i), 1<<24, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := end.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := end.Synchronize(); err != nil {
		t.Fatal(err)
	}
	ms, err := ElapsedMs(start, end)
	if err != nil || ms <= 0 {
		t.Errorf("ElapsedMs = %v, %v", ms, err)
	}
	t.Logf("10 memsets of 64 MiB: %.3f ms", ms)
	for _, e := range []*Event{start, end} {
		if err := e.Destroy(); err != nil {
			t.Error(err)
		}
	}
	if err := start.Record(s); err == nil {
		t.Error("Record on a destroyed event succeeded")
	}
	if err := s.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := s.Destroy(); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
	if err := s.Synchronize(); err == nil {
		t.Error("Synchronize on a destroyed stream succeeded")
	}
	// A wrapped default stream: usable, Destroy is a no-op.
	ds := c.WrapStream(0)
	if err := ds.Synchronize(); err != nil {
		t.Error(err)
	}
	if err := ds.Destroy(); err != nil || ds.Synchronize() != nil {
		t.Errorf("Destroy of a wrapped stream: %v", err)
	}
}
