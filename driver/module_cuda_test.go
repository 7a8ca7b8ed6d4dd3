//go:build cuda

package driver

import (
	"errors"
	"testing"
	"unsafe"
)

func TestModuleLaunch(t *testing.T) {
	c := openCtx(t)
	add, _ := loadTest(t, c)
	if add.Name() != "add_one" {
		t.Errorf("Name = %q", add.Name())
	}
	attr, err := add.Attributes()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("add_one: %+v", attr)
	if attr.NumRegs <= 0 || attr.MaxThreadsPerBlock < 256 || attr.LocalBytes != 0 {
		t.Errorf("implausible attributes %+v", attr)
	}
	const n = 1000
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
	if err := c.Launch(add, D1((n+255)/256), D1(256), 0, s, args); err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(add, D1((n+255)/256), D1(256), 0, s, args); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	v, err := download(c, p, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := expectF32(v, func(i int) float32 { return float32(i) + 2 }); err != nil {
		t.Fatal(err)
	}
	// Errors name the call.
	var e *Error
	if _, err := c.LoadModule([]byte("not a module")); !errors.As(err, &e) || e.Call != "cuModuleLoadDataEx" {
		t.Errorf("LoadModule(garbage) = %v", err)
	}
	m2, err := c.LoadModule([]byte(testPTX))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Function("no_such_kernel"); !IsCode(err, CodeNotFound) {
		t.Errorf("Function(missing) = %v, want CUDA_ERROR_NOT_FOUND", err)
	}
	f2, _ := m2.Function("add_one")
	if err := m2.Unload(); err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(f2, D1(1), D1(1), 0, nil, args); err == nil {
		t.Error("Launch of an unloaded module's function succeeded")
	}
	if err := c.Launch(add, D1(0), D1(1), 0, nil, args); err == nil {
		t.Error("Launch with a zero grid succeeded")
	}
	if err := c.Launch(add, D1(1), D1(1), 0, nil, new(Args).Bytes([]byte{1}, 3)); err == nil {
		t.Error("Launch with bad Args succeeded")
	}
}

func TestDynamicShared(t *testing.T) {
	c := openCtx(t)
	_, probe := loadTest(t, c)
	out := allocF32(t, c, 1)
	run := func(bytes int) (uint32, error) {
		if err := c.MemsetD32(out, 0, 1, nil); err != nil {
			return 0, err
		}
		if err := c.Launch(probe, D1(1), D1(128), bytes, nil, new(Args).Ptr(out).Uint32(uint32(bytes/4))); err != nil {
			return 0, err
		}
		if err := c.Synchronize(); err != nil {
			return 0, err
		}
		var v uint32
		return v, c.CopyToHost(unsafe.Pointer(&v), out, 4)
	}
	if v, err := run(16 << 10); err != nil || v != 16<<10/4+7 {
		t.Fatalf("16 KB: %d, %v", v, err)
	}
	const big = 100 << 10
	if err := probe.SetMaxDynamicShared(big); err != nil {
		t.Fatal(err)
	}
	if a, err := probe.Attributes(); err != nil || a.MaxDynamicShared != big {
		t.Errorf("MaxDynamicShared = %d, %v", a.MaxDynamicShared, err)
	}
	if v, err := run(big); err != nil || v != big/4+7 {
		t.Fatalf("100 KB: %d, %v", v, err)
	}
	// Beyond what was allowed, and beyond what the device has: a *Error.
	var e *Error
	if _, err := run(200 << 10); !errors.As(err, &e) {
		t.Errorf("200 KB with a 100 KB limit: %v, want *Error", err)
	}
	if err := probe.SetMaxDynamicShared(300 << 10); err != nil {
		t.Logf("SetMaxDynamicShared(300 KB): %v (expected on a device with less)", err)
	}
	if _, err := run(300 << 10); !errors.As(err, &e) {
		t.Errorf("300 KB: %v, want *Error", err)
	} else {
		t.Logf("300 KB: %v", err)
	}
	// The context still works.
	if v, err := run(big); err != nil || v != big/4+7 {
		t.Fatalf("100 KB after the failures: %d, %v", v, err)
	}
}
