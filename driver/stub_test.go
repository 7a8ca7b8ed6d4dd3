//go:build !cuda

package driver

import (
	"errors"
	"testing"
)

func TestStubConstructors(t *testing.T) {
	if n, err := DeviceCount(); !errors.Is(err, ErrNoCUDA) || n != 0 {
		t.Errorf("DeviceCount = %d, %v", n, err)
	}
	if c, err := Open(0); !errors.Is(err, ErrNoCUDA) || c != nil {
		t.Errorf("Open = %v, %v", c, err)
	}
}

func TestStubMethods(t *testing.T) {
	var c *Context
	var s *Stream
	var e *Event
	var m *Module
	var f *Function
	var g *Graph
	var x *GraphExec
	if c.Info() != (DeviceInfo{}) || c.Handle() != 0 || s.Handle() != 0 || f.Name() != "" || f.Handle() != 0 || g.Handle() != 0 || x.Handle() != 0 {
		t.Error("zero values")
	}
	ws := c.WrapStream(0)
	if ws == nil {
		t.Fatal("WrapStream returned nil")
	}
	errs := map[string]error{
		"Close":        c.Close(),
		"Synchronize":  c.Synchronize(),
		"Free":         c.Free(0),
		"CopyToDev":    c.CopyToDevice(0, nil, 0),
		"CopyToHost":   c.CopyToHost(nil, 0, 0),
		"CopyDev":      c.CopyDeviceAsync(0, 0, 0, nil),
		"CopyToDevA":   c.CopyToDeviceAsync(0, nil, 0, nil),
		"CopyToHostA":  c.CopyToHostAsync(nil, 0, 0, nil),
		"MemsetD8":     c.MemsetD8(0, 0, 0, nil),
		"MemsetD16":    c.MemsetD16(0, 0, 0, nil),
		"MemsetD32":    c.MemsetD32(0, 0, 0, s),
		"Launch":       c.Launch(f, D1(1), D1(1), 0, nil, nil),
		"LaunchParams": c.LaunchParams(f, D1(1), D1(1), 0, nil, nil),
		"S.Sync":       ws.Synchronize(),
		"S.Destroy":    ws.Destroy(),
		"S.Begin":      s.BeginCapture(),
		"E.Record":     e.Record(s),
		"E.Sync":       e.Synchronize(),
		"E.Destroy":    e.Destroy(),
		"M.Unload":     m.Unload(),
		"F.SetMax":     f.SetMaxDynamicShared(1 << 17),
		"G.Destroy":    g.Destroy(),
		"X.Launch":     x.Launch(s),
		"X.Set":        x.SetKernelNodeArgs(GraphNode{}, f, D1(1), D1(1), 0, nil),
		"X.Destroy":    x.Destroy(),
	}
	_, errs["Alloc"] = c.Alloc(16)
	_, _, errs["MemInfo"] = c.MemInfo()
	_, errs["NewStream"] = c.NewStream()
	_, errs["NewKernelParams"] = NewKernelParams(new(Args).Int32(1))
	_, errs["NewEvent"] = c.NewEvent()
	_, errs["Elapsed"] = ElapsedMs(e, e)
	_, errs["LoadModule"] = c.LoadModule([]byte("x"))
	_, errs["Function"] = m.Function("k")
	_, errs["Attributes"] = f.Attributes()
	_, errs["EndCapture"] = s.EndCapture()
	_, errs["Instantiate"] = g.Instantiate()
	_, errs["KernelNodes"] = g.KernelNodes()
	for name, err := range errs {
		if !errors.Is(err, ErrNoCUDA) {
			t.Errorf("%s: %v, want ErrNoCUDA", name, err)
		}
	}
}

func TestStubEncodeTiled(t *testing.T) {
	_, err := EncodeTiled(TensorBF16, 0x10000, []uint64{128, 64}, []uint64{256}, []uint32{64, 32}, Swizzle128B)
	if !errors.Is(err, ErrNoCUDA) {
		t.Errorf("valid arguments: %v, want ErrNoCUDA", err)
	}
	_, err = EncodeTiled(TensorBF16, 0x10008, []uint64{128, 64}, []uint64{256}, []uint32{64, 32}, Swizzle128B)
	if err == nil || errors.Is(err, ErrNoCUDA) {
		t.Errorf("misaligned base: %v, want a validation error", err)
	}
}

func TestStubAllocHost(t *testing.T) {
	if h, err := (&Context{}).AllocHost(64); h != nil || !errors.Is(err, ErrNoCUDA) {
		t.Errorf("AllocHost: %v, %v; want ErrNoCUDA", h, err)
	}
}
