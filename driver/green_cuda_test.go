//go:build cuda

package driver

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"unsafe"
)

// smIDsPTX: sm_ids(unsigned* out, unsigned long long spin): thread 0 of
// each block spins for spin clocks, then writes its SM's id (%smid) to
// out[blockIdx.x]. NVRTC 12.4's PTX of
//
//	extern "C" __global__ void sm_ids(unsigned* out, unsigned long long spin) {
//	    if (threadIdx.x != 0) return;
//	    unsigned long long t0 = clock64();
//	    while ((unsigned long long)(clock64() - t0) < spin) { }
//	    unsigned id;
//	    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
//	    out[blockIdx.x] = id;
//	}
const smIDsPTX = `
.version 8.0
.target sm_90
.address_size 64

.visible .entry sm_ids(
	.param .u64 sm_ids_param_0,
	.param .u64 sm_ids_param_1
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<10>;

	ld.param.u64 	%rd3, [sm_ids_param_0];
	ld.param.u64 	%rd4, [sm_ids_param_1];
	mov.u32 	%r1, %tid.x;
	setp.ne.s32 	%p1, %r1, 0;
	@%p1 bra 	$L__BB0_4;
	mov.u64 	%rd5, %clock64;
	cvta.to.global.u64 	%rd2, %rd3;
$L__BB0_2:
	mov.u64 	%rd6, %clock64;
	sub.s64 	%rd7, %rd6, %rd5;
	setp.lt.u64 	%p2, %rd7, %rd4;
	@%p2 bra 	$L__BB0_2;
	mov.u32 	%r2, %smid;
	mov.u32 	%r3, %ctaid.x;
	mul.wide.u32 	%rd8, %r3, 4;
	add.s64 	%rd9, %rd2, %rd8;
	st.global.u32 	[%rd9], %r2;
$L__BB0_4:
	ret;
}
`

// openGreen opens a green context of sms SMs on device 0, skipping the
// test where the driver has none; Close runs at cleanup.
func openGreen(t *testing.T, sms int) *Context {
	t.Helper()
	c, err := OpenGreen(0, sms)
	if errors.Is(err, ErrGreenUnsupported) {
		t.Skipf("green contexts unavailable: %v", err)
	}
	if err != nil {
		t.Fatalf("OpenGreen(0, %d): %v", sms, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// distinctSMs runs sm_ids with blocks blocks on s (nil: the legacy default
// stream) of c and returns how many different SMs ran them.
func distinctSMs(t *testing.T, c *Context, s *Stream, blocks int) int {
	t.Helper()
	m, err := c.LoadModule([]byte(smIDsPTX))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unload()
	f, err := m.Function("sm_ids")
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Alloc(4 * blocks)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(out)
	if err := c.MemsetD32(out, 0xffffffff, blocks, s); err != nil {
		t.Fatal(err)
	}
	// 200k clocks (~0.1 ms) per block keeps blocks resident long enough
	// for the scheduler to spread them over every SM it may use.
	if err := c.Launch(f, D1(uint32(blocks)), D1(32), 0, s, new(Args).Ptr(out).Uint64(200_000)); err != nil {
		t.Fatal(err)
	}
	if s != nil {
		err = s.Synchronize()
	} else {
		err = c.Synchronize()
	}
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint32, blocks)
	if err := c.CopyToHost(unsafe.Pointer(&ids[0]), out, 4*blocks); err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]bool{}
	for i, id := range ids {
		if id == 0xffffffff {
			t.Fatalf("block %d did not run", i)
		}
		seen[id] = true
	}
	return len(seen)
}

// Slices of 8..132 SMs: the count obtained is at least the count asked and
// at most the device's, and kernels run on no more SMs than that, on a
// stream from NewStream and on the legacy default stream alike.
func TestGreenSlices(t *testing.T) {
	whole := openCtx(t)
	total := whole.Info().SMs
	blocks := 4 * total
	all := distinctSMs(t, whole, nil, blocks)
	t.Logf("whole device: %d SMs, sm_ids ran on %d", total, all)
	for _, sms := range []int{8, 14, 16, 32, 66, 72, 100, 132} {
		t.Run(fmt.Sprint(sms), func(t *testing.T) {
			if sms > total {
				t.Skipf("the device has %d SMs", total)
			}
			c := openGreen(t, sms)
			in := c.Info()
			t.Logf("asked %d, got %d of %d", sms, in.SMs, in.DeviceSMs)
			if !in.Green || in.SMsAsked != sms || in.DeviceSMs != total || in.GreenFallback != "" {
				t.Errorf("info %+v", in)
			}
			if in.SMs < sms || in.SMs > total {
				t.Errorf("got %d SMs for %d asked (device %d)", in.SMs, sms, total)
			}
			if in.Name != whole.Info().Name || in.MaxSharedPerBlockOptin != whole.Info().MaxSharedPerBlockOptin {
				t.Errorf("device fields differ from the primary context's: %+v", in)
			}
			s, err := c.NewStream()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Destroy()
			onStream := distinctSMs(t, c, s, blocks)
			onLegacy := distinctSMs(t, c, nil, blocks)
			t.Logf("green asked=%d got=%d stream_sms=%d legacy_stream_sms=%d whole_sms=%d", sms, in.SMs, onStream, onLegacy, all)
			if onStream > in.SMs {
				t.Errorf("a NewStream stream ran on %d SMs, the slice has %d", onStream, in.SMs)
			}
			if onLegacy > in.SMs {
				t.Errorf("the legacy default stream ran on %d SMs, the slice has %d", onLegacy, in.SMs)
			}
		})
	}
}

// Capture and graph replay on a green context's stream.
func TestGreenGraph(t *testing.T) {
	c := openGreen(t, 16)
	add, _ := loadTest(t, c)
	const n = 512
	a := allocF32(t, c, n)
	if err := upload(c, a, ramp(n)); err != nil {
		t.Fatal(err)
	}
	s, g := captureAdd(t, c, add, a, n)
	x, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer x.Destroy()
	for i := 0; i < 5; i++ {
		if err := x.Launch(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	v, _ := download(c, a, n)
	if err := expectF32(v, func(i int) float32 { return float32(i) + 5 }); err != nil {
		t.Fatal("5 replays:", err)
	}
}

// Errors: a slice larger than the device, a count under 1.
func TestGreenBadCounts(t *testing.T) {
	whole := openCtx(t)
	total := whole.Info().SMs
	for _, sms := range []int{total + 1, total + 8, 1 << 40} {
		c, err := OpenGreen(0, sms)
		if errors.Is(err, ErrGreenUnsupported) {
			t.Skipf("green contexts unavailable: %v", err)
		}
		var e *SMCountError
		if !errors.As(err, &e) || e.Asked != sms || e.Have != total {
			t.Errorf("OpenGreen(0, %d) = %v, want an SMCountError", sms, err)
		}
		if c != nil {
			c.Close()
		}
		if _, err := OpenSMs(0, sms); !errors.As(err, &e) {
			t.Errorf("OpenSMs(0, %d) = %v, want an SMCountError", sms, err)
		}
	}
	for _, sms := range []int{0, -8} {
		if c, err := OpenGreen(0, sms); err == nil {
			c.Close()
			t.Errorf("OpenGreen(0, %d) succeeded", sms)
		}
	}
	c, err := OpenSMs(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if in := c.Info(); in.Green || in.SMsAsked != 0 || in.SMs != total || in.DeviceSMs != total {
		t.Errorf("OpenSMs(0, 0): %+v", in)
	}
}

// A green context may be current on one thread at a time (cuda.h): calls
// are serialised and never leave it current. Many goroutines using one
// green context at once all get their answers; the thread that made a call
// has its previous context (here none, then the primary one) back.
func TestGreenConcurrent(t *testing.T) {
	c := openGreen(t, 16)
	whole := openCtx(t)
	add, _ := loadTest(t, c)

	runtime.LockOSThread()
	before := currentContext()
	if _, _, err := c.MemInfo(); err != nil {
		t.Fatal(err)
	}
	after := currentContext()
	if _, _, err := whole.MemInfo(); err != nil { // leaves the primary context current
		t.Fatal(err)
	}
	if _, _, err := c.MemInfo(); err != nil {
		t.Fatal(err)
	}
	afterPrimary := currentContext()
	runtime.UnlockOSThread()
	if after == c.Handle() || after != before {
		t.Errorf("a call left the green context current (before %#x, after %#x, green %#x)", before, after, c.Handle())
	}
	if afterPrimary != whole.Handle() {
		t.Errorf("after a green call the thread has %#x current, want the primary %#x back", afterPrimary, whole.Handle())
	}

	const n, workers, rounds = 4096, 16, 20
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
				p, err := c.Alloc(4 * n)
				if err != nil {
					return err
				}
				defer c.Free(p)
				if err := c.MemsetD32(p, 0, n, s); err != nil {
					return err
				}
				for r := 0; r < rounds; r++ {
					if err := c.Launch(add, D1(n/256), D1(256), 0, s, new(Args).Ptr(p).Int32(n)); err != nil {
						return err
					}
				}
				if err := s.Synchronize(); err != nil {
					return err
				}
				v, err := download(c, p, n)
				if err != nil {
					return err
				}
				return expectF32(v, func(int) float32 { return rounds })
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

// Calls on a green context allocate nothing either (gdn's hot path goes
// through do).
func TestGreenDoAllocs(t *testing.T) {
	c := openGreen(t, 8)
	if n := testing.AllocsPerRun(100, func() { c.do(func() error { return nil }) }); n != 0 {
		t.Errorf("do on a green context: %v allocations per call", n)
	}
}

// After Close every call fails; a second Close is a no-op.
func TestGreenClose(t *testing.T) {
	c, err := OpenGreen(0, 8)
	if errors.Is(err, ErrGreenUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Alloc(1024)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Alloc(1024); err == nil {
		t.Error("Alloc after Close succeeded")
	}
}
