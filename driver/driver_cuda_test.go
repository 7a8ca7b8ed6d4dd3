//go:build cuda

package driver

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"unsafe"
)

// testPTX holds two kernels, written for sm_90 (PTX ISA 8.0):
//
//	add_one(float* p, int n):           p[i] += 1 for i < n
//	smem_probe(unsigned* out, unsigned nwords): thread 0 writes the first
//	    and the last word of the dynamic shared memory, then out[0] =
//	    last + first = nwords + 7; an area smaller than nwords words faults.
const testPTX = `
.version 8.0
.target sm_90
.address_size 64

.extern .shared .align 16 .b8 sm[];

.visible .entry add_one(
	.param .u64 add_one_param_0,
	.param .u32 add_one_param_1
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<3>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [add_one_param_0];
	ld.param.u32 	%r2, [add_one_param_1];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__add_done;
	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.s32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	ld.global.f32 	%f1, [%rd4];
	add.f32 	%f2, %f1, 0f3F800000;
	st.global.f32 	[%rd4], %f2;
$L__add_done:
	ret;
}

.visible .entry smem_probe(
	.param .u64 smem_probe_param_0,
	.param .u32 smem_probe_param_1
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<6>;

	ld.param.u64 	%rd2, [smem_probe_param_0];
	ld.param.u32 	%r2, [smem_probe_param_1];
	mov.u32 	%r1, %tid.x;
	setp.ne.s32 	%p1, %r1, 0;
	add.s32 	%r3, %r2, -1;
	mul.wide.u32 	%rd3, %r3, 4;
	mov.u64 	%rd4, sm;
	add.s64 	%rd1, %rd4, %rd3;
	@%p1 bra 	$L__probe_sync;
	mov.u32 	%r4, 7;
	st.shared.u32 	[sm], %r4;
	st.shared.u32 	[%rd1], %r2;
$L__probe_sync:
	bar.sync 	0;
	@%p1 bra 	$L__probe_done;
	ld.shared.u32 	%r5, [%rd1];
	ld.shared.u32 	%r6, [sm];
	add.s32 	%r7, %r6, %r5;
	cvta.to.global.u64 	%rd5, %rd2;
	st.global.u32 	[%rd5], %r7;
$L__probe_done:
	ret;
}
`

func openCtx(t *testing.T) *Context {
	t.Helper()
	c, err := Open(0)
	if err != nil {
		t.Fatalf("Open(0): %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func loadTest(t *testing.T, c *Context) (*Function, *Function) {
	t.Helper()
	m, err := c.LoadModule([]byte(testPTX))
	if err != nil {
		t.Fatalf("LoadModule: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Unload(); err != nil {
			t.Errorf("Unload: %v", err)
		}
	})
	add, err := m.Function("add_one")
	if err != nil {
		t.Fatalf("Function(add_one): %v", err)
	}
	probe, err := m.Function("smem_probe")
	if err != nil {
		t.Fatalf("Function(smem_probe): %v", err)
	}
	return add, probe
}

func allocF32(t *testing.T, c *Context, n int) DevicePtr {
	t.Helper()
	p, err := c.Alloc(4 * n)
	if err != nil {
		t.Fatalf("Alloc: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Free(p); err != nil {
			t.Errorf("Free: %v", err)
		}
	})
	return p
}

func upload(c *Context, p DevicePtr, v []float32) error {
	return c.CopyToDevice(p, unsafe.Pointer(&v[0]), 4*len(v))
}

func download(c *Context, p DevicePtr, n int) ([]float32, error) {
	v := make([]float32, n)
	return v, c.CopyToHost(unsafe.Pointer(&v[0]), p, 4*n)
}

func expectF32(v []float32, f func(i int) float32) error {
	for i := range v {
		if w := f(i); v[i] != w {
			return fmt.Errorf("element %d = %v, want %v", i, v[i], w)
		}
	}
	return nil
}

func ramp(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)
	}
	return v
}

func TestOpenInfo(t *testing.T) {
	n, err := DeviceCount()
	if err != nil || n < 1 {
		t.Fatalf("DeviceCount = %d, %v", n, err)
	}
	c := openCtx(t)
	in := c.Info()
	t.Logf("%+v", in)
	if in.SMs <= 0 || in.Major < 7 || in.Name == "" || in.TotalMem == 0 || in.DriverVersion <= 0 ||
		in.MaxSharedPerBlockOptin < 48<<10 || in.SharedPerSM < in.MaxSharedPerBlockOptin || in.L2Bytes <= 0 || in.ClockKHz <= 0 {
		t.Errorf("implausible DeviceInfo %+v", in)
	}
	free, total, err := c.MemInfo()
	if err != nil || free == 0 || total < free {
		t.Errorf("MemInfo = %d, %d, %v", free, total, err)
	}
	if _, err := Open(n + 100); !IsCode(err, CodeInvalidDevice) {
		t.Errorf("Open(bad ordinal) = %v, want CUDA_ERROR_INVALID_DEVICE", err)
	}
	// A second Context on the same device shares the primary context.
	c2, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Handle() != c.Handle() {
		t.Error("two Opens of device 0 hold different contexts")
	}
	if err := c2.Close(); err != nil {
		t.Error(err)
	}
	if err := c2.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c2.Alloc(16); err == nil {
		t.Error("Alloc on a closed Context succeeded")
	}
}

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

func TestEncodeTiledDevice(t *testing.T) {
	c := openCtx(t)
	if c.Info().Major < 9 {
		t.Skip("tensor maps need compute capability 9.0")
	}
	const rows, cols = 64, 128
	p, err := c.Alloc(rows * cols * 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(p)
	tm, err := EncodeTiled(TensorBF16, p, []uint64{cols, rows}, []uint64{cols * 2}, []uint32{64, 32}, Swizzle128B)
	if err != nil {
		t.Fatal(err)
	}
	if tm == (TensorMap{}) {
		t.Error("encoded tensor map is all zeros")
	}
	a := new(Args).Ptr(p).Bytes(tm[:], 64)
	if a.Err() != nil || a.Offset(1) != 64 {
		t.Errorf("tensor map argument at %d, %v", a.Offset(1), a.Err())
	}
}

func TestConcurrent(t *testing.T) {
	c := openCtx(t)
	add, _ := loadTest(t, c)
	const workers, iters, n = 16, 20, 4096
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs <- func() error {
				s, err := c.NewStream()
				if err != nil {
					return err
				}
				defer s.Destroy()
				for it := 0; it < iters; it++ {
					p, err := c.Alloc(4 * n)
					if err != nil {
						return err
					}
					in := make([]float32, n)
					for i := range in {
						in[i] = float32(w*1000 + it + i)
					}
					if err := upload(c, p, in); err != nil {
						return err
					}
					if err := c.Launch(add, D1(n/256), D1(256), 0, s, new(Args).Ptr(p).Int32(n)); err != nil {
						return err
					}
					if err := s.Synchronize(); err != nil {
						return err
					}
					v, err := download(c, p, n)
					if err != nil {
						return err
					}
					if err := expectF32(v, func(i int) float32 { return in[i] + 1 }); err != nil {
						return fmt.Errorf("worker %d iteration %d: %v", w, it, err)
					}
					if err := c.Free(p); err != nil {
						return err
					}
				}
				return nil
			}()
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

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
