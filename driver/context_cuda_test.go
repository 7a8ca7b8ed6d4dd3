//go:build cuda

package driver

import (
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

// addOneRoundTrip uploads in to p (CopyToDevice), adds one to each element
// with add on s (a non-blocking stream: ordered after the upload only if
// CopyToDevice waited for its data), and checks what comes back.
func addOneRoundTrip(c *Context, add *Function, s *Stream, p DevicePtr, in []float32) error {
	if err := upload(c, p, in); err != nil {
		return err
	}
	n := len(in)
	if err := c.Launch(add, D1(uint32((n+255)/256)), D1(256), 0, s, new(Args).Ptr(p).Int32(int32(n))); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	v, err := download(c, p, n)
	if err != nil {
		return err
	}
	return expectF32(v, func(i int) float32 { return in[i] + 1 })
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
					if err := addOneRoundTrip(c, add, s, p, in); err != nil {
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
