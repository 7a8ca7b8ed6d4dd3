//go:build cuda

package driver

import (
	"testing"
	"unsafe"
)

func TestMemory(t *testing.T) {
	c := openCtx(t)
	if _, err := c.Alloc(0); err == nil {
		t.Error("Alloc(0) succeeded")
	}
	if _, err := c.Alloc(-1); err == nil {
		t.Error("Alloc(-1) succeeded")
	}
	const n = 4096
	p := allocF32(t, c, n)
	if err := upload(c, p, ramp(n)); err != nil {
		t.Fatal(err)
	}
	v, err := download(c, p, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := expectF32(v, func(i int) float32 { return float32(i) }); err != nil {
		t.Fatal("round trip:", err)
	}

	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	// Bytes 0..1023 = 0xAB, words 256..511 (u16) = 0x1234, u32 512..1023 = 0x3f800000 (1.0f).
	if err := c.MemsetD8(p, 0xAB, 1024, s); err != nil {
		t.Fatal(err)
	}
	if err := c.MemsetD16(p.Offset(1024), 0x1234, 512, s); err != nil {
		t.Fatal(err)
	}
	if err := c.MemsetD32(p.Offset(2048), 0x3f800000, 512, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := c.Synchronize(); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 4096)
	if err := c.CopyToHost(unsafe.Pointer(&raw[0]), p, len(raw)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1024; i++ {
		if raw[i] != 0xAB {
			t.Fatalf("MemsetD8 byte %d = %#x", i, raw[i])
		}
	}
	for i := 1024; i < 2048; i += 2 {
		if raw[i] != 0x34 || raw[i+1] != 0x12 {
			t.Fatalf("MemsetD16 at %d = %#x %#x", i, raw[i], raw[i+1])
		}
	}
	f := unsafe.Slice((*float32)(unsafe.Pointer(&raw[2048])), 512)
	for i, x := range f {
		if x != 1 {
			t.Fatalf("MemsetD32 word %d = %v", i, x)
		}
	}
	// Device-to-device copy on a stream.
	q := allocF32(t, c, 256)
	if err := c.CopyDeviceAsync(q, p.Offset(2048), 1024, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if v, err := download(c, q, 256); err != nil || expectF32(v, func(int) float32 { return 1 }) != nil {
		t.Fatalf("CopyDeviceAsync: %v %v", err, expectF32(v, func(int) float32 { return 1 }))
	}
	if err := c.CopyToDevice(p, nil, 4); err == nil {
		t.Error("CopyToDevice from nil succeeded")
	}
}
