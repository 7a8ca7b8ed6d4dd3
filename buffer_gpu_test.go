//go:build cuda

package gdn_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/gdnjit/gdn"
)

// TestBuffer writes, reads back and frees device memory, refuses copies
// outside the buffer and use after Free or Close.
func TestBuffer(t *testing.T) {
	// A Runtime of its own: the test closes it.
	own, err := gdn.Open(gdn.Options{})
	if err != nil {
		t.Fatalf("open runtime: %v", err)
	}
	if _, err := own.Alloc(0); !errors.Is(err, gdn.ErrInvalidArgument) {
		t.Errorf("Alloc(0): %v, want an argument error", err)
	}
	b, err := own.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if b.Ptr() == 0 || b.Bytes() != 1<<20 {
		t.Fatalf("buffer %#x of %d bytes", b.Ptr(), b.Bytes())
	}
	tt := b.Tensor(gdn.FP32, 16, 128)
	if tt.Ptr != b.Ptr() || tt.Bytes != 1<<20 || tt.Dtype != gdn.FP32 || len(tt.Shape) != 2 {
		t.Errorf("Tensor: %+v", tt)
	}
	// Many goroutines write and read their own parts.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := bytes.Repeat([]byte{byte(g + 1)}, 4096)
			if err := b.Write(g*4096+100, src); err != nil {
				t.Error(err)
				return
			}
			dst := make([]byte, 4096)
			if err := b.Read(g*4096+100, dst); err != nil || !bytes.Equal(dst, src) {
				t.Errorf("goroutine %d: read back %v..., %v", g, dst[:4], err)
			}
		}()
	}
	wg.Wait()
	for _, c := range []struct{ off, n int }{{-1, 4}, {1 << 20, 1}, {1<<20 - 3, 4}} {
		if err := b.Write(c.off, make([]byte, c.n)); !errors.Is(err, gdn.ErrInvalidArgument) {
			t.Errorf("Write(%d, %d bytes): %v, want an argument error", c.off, c.n, err)
		}
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if err := b.Free(); err != nil {
		t.Errorf("second Free: %v", err)
	}
	if err := b.Read(0, make([]byte, 4)); err == nil || b.Ptr() != 0 {
		t.Errorf("Read after Free: %v (ptr %#x), want an error", err, b.Ptr())
	}
	c, err := own.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	own.Close()
	if err := c.Free(); !errors.Is(err, gdn.ErrClosed) {
		t.Errorf("Free after Close: %v, want ErrClosed", err)
	}
	if _, err := own.Alloc(64); !errors.Is(err, gdn.ErrClosed) {
		t.Errorf("Alloc after Close: %v, want ErrClosed", err)
	}
}
