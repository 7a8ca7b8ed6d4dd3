//go:build cuda

package driver

import (
	"testing"
)

// pdlPTX holds the two kernels of TestLaunchParamsDependent (sm_90, PTX ISA
// 8.0):
//
//	slow_add_one(float* p, int n, unsigned naps): releases its dependants
//	    at once (griddepcontrol.launch_dependents), sleeps naps x 1 us, then
//	    p[i] += 1 for i < n;
//	wait_double(float* p, int n): waits for the kernel before it
//	    (griddepcontrol.wait), then p[i] *= 2.
//
// Launched back to back, the second as a dependent launch, p[i] ends as
// 2 (p[i] + 1) only if the wait holds the second kernel's reads until the
// first has written: the first's sleep leaves the second, placed early,
// plenty of time to read too soon otherwise.
const pdlPTX = `
.version 8.0
.target sm_90
.address_size 64

.visible .entry slow_add_one(
	.param .u64 slow_add_one_param_0,
	.param .u32 slow_add_one_param_1,
	.param .u32 slow_add_one_param_2
)
{
	.reg .pred 	%p<3>;
	.reg .f32 	%f<3>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<5>;

	griddepcontrol.launch_dependents;
	ld.param.u64 	%rd1, [slow_add_one_param_0];
	ld.param.u32 	%r2, [slow_add_one_param_1];
	ld.param.u32 	%r6, [slow_add_one_param_2];
	mov.u32 	%r7, 0;
$L__nap:
	setp.ge.u32 	%p2, %r7, %r6;
	@%p2 bra 	$L__awake;
	nanosleep.u32 	1000;
	add.u32 	%r7, %r7, 1;
	bra.uni 	$L__nap;
$L__awake:
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__slow_done;
	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.s32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	ld.global.f32 	%f1, [%rd4];
	add.f32 	%f2, %f1, 0f3F800000;
	st.global.f32 	[%rd4], %f2;
$L__slow_done:
	ret;
}

.visible .entry wait_double(
	.param .u64 wait_double_param_0,
	.param .u32 wait_double_param_1
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<3>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<5>;

	griddepcontrol.wait;
	ld.param.u64 	%rd1, [wait_double_param_0];
	ld.param.u32 	%r2, [wait_double_param_1];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__wait_done;
	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.s32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	ld.global.f32 	%f1, [%rd4];
	mul.f32 	%f2, %f1, 0f40000000;
	st.global.f32 	[%rd4], %f2;
$L__wait_done:
	ret;
}
`

// A dependent launch runs after the kernel before it wherever it waits for
// it: on a stream, and replayed from a captured graph. On a driver or GPU
// without the feature it is an ordinary launch, and the same holds.
func TestLaunchParamsDependent(t *testing.T) {
	c := openCtx(t)
	t.Logf("DependentLaunch: %v (driver %d, sm_%d%d)", c.DependentLaunch(), c.info.DriverVersion, c.info.Major, c.info.Minor)
	m, err := c.LoadModule([]byte(pdlPTX))
	if err != nil {
		t.Fatalf("LoadModule: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Unload(); err != nil {
			t.Errorf("Unload: %v", err)
		}
	})
	slow, err := m.Function("slow_add_one")
	if err != nil {
		t.Fatal(err)
	}
	dbl, err := m.Function("wait_double")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 16
	p := allocF32(t, c, n)
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	slowArgs, err := NewKernelParams(new(Args).Ptr(p).Int32(n).Uint32(200))
	if err != nil {
		t.Fatal(err)
	}
	defer slowArgs.Free()
	dblArgs, err := NewKernelParams(new(Args).Ptr(p).Int32(n))
	if err != nil {
		t.Fatal(err)
	}
	defer dblArgs.Free()
	pair := func() error {
		if err := c.LaunchParams(slow, D1(n/256), D1(256), 0, s, slowArgs); err != nil {
			return err
		}
		return c.LaunchParamsDependent(dbl, D1(n/256), D1(256), 0, s, dblArgs)
	}
	check := func(what string, want func(i int) float32) {
		t.Helper()
		if err := s.Synchronize(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		v, err := download(c, p, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := expectF32(v, want); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	if err := upload(c, p, ramp(n)); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 3; r++ {
		if err := pair(); err != nil {
			t.Fatal(err)
		}
	}
	// ((i + 1) 2 + 1) 2 + 1) 2 = 8i + 14
	check("three pairs on a stream", func(i int) float32 { return 8*float32(i) + 14 })

	if err := upload(c, p, ramp(n)); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := pair(); err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	e, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Destroy()
	for r := 0; r < 2; r++ {
		if err := e.Launch(s); err != nil {
			t.Fatal(err)
		}
	}
	// ((i + 1) 2 + 1) 2 = 4i + 6
	check("a captured pair replayed twice", func(i int) float32 { return 4*float32(i) + 6 })
}
