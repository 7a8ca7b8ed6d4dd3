//go:build cuda

package jit_test

// The GPU tests' shared pieces: the context, compiling and loading a
// catalogue variant, device buffers and the axpy check.

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/jit"
	"github.com/gdnjit/gdn/kernsrc"
)

var openGPU = sync.OnceValues(func() (*driver.Context, error) { return driver.Open(0) })

// gpu returns the context of GPU 0, shared by the GPU tests.
func gpu(t testing.TB) *driver.Context {
	t.Helper()
	ctx, err := openGPU()
	if err != nil {
		t.Fatalf("driver.Open(0): %v", err)
	}
	return ctx
}

// target is the architecture to compile for on this GPU.
func target(t testing.TB, ctx *driver.Context) jit.Target {
	t.Helper()
	n, err := jit.LoadNVRTC()
	if err != nil {
		t.Fatal(err)
	}
	info := ctx.Info()
	tg, err := jit.TargetFor(info.Major, info.Minor, n)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// compileVariant compiles a catalogue variant for the GPU through c.
func compileVariant(t testing.TB, c *jit.Compiler, ctx *driver.Context, name string) (*jit.Artifact, kernsrc.Variant) {
	t.Helper()
	v, ok := kernsrc.Lookup(name)
	if !ok {
		t.Fatalf("no variant %s", name)
	}
	req, err := jit.RequestFor(v, target(t, ctx))
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Compile(req)
	if err != nil {
		t.Fatal(err)
	}
	return a, v
}

// loaded is a module held in a MemCache, with the kernel of its variant.
type loaded struct {
	mod *driver.Module
	fn  *driver.Function
}

// acquireKernel returns a handle to the loaded module of variant name,
// loading it (from the compiled artifact) on a miss.
func acquireKernel(t testing.TB, mc *jit.MemCache, c *jit.Compiler, ctx *driver.Context, name string) (*jit.Handle, *loaded) {
	t.Helper()
	a, v := compileVariant(t, c, ctx, name)
	h, k, err := acquire(mc, ctx, a, v)
	if err != nil {
		t.Fatal(err)
	}
	return h, k
}

// acquire is acquireKernel for an artifact already compiled; it does not
// use t, so other goroutines may call it.
func acquire(mc *jit.MemCache, ctx *driver.Context, a *jit.Artifact, v kernsrc.Variant) (*jit.Handle, *loaded, error) {
	h, err := mc.Acquire(a.Key, func() (any, int64, func(), error) {
		mod, err := ctx.LoadModule(a.Image)
		if err != nil {
			return nil, 0, nil, err
		}
		fn, err := mod.Function(a.Symbol(v.Kernel))
		if err != nil {
			mod.Unload()
			return nil, 0, nil, err
		}
		return &loaded{mod: mod, fn: fn}, int64(len(a.Image)), func() { mod.Unload() }, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return h, h.Value().(*loaded), nil
}

// buffer is a device copy of a float32 slice.
type buffer struct {
	ctx *driver.Context
	ptr driver.DevicePtr
	n   int
}

func upload(t testing.TB, ctx *driver.Context, host []float32) *buffer {
	t.Helper()
	p, err := ctx.Alloc(4 * len(host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Free(p) })
	if err := ctx.CopyToDevice(p, unsafe.Pointer(&host[0]), 4*len(host)); err != nil {
		t.Fatal(err)
	}
	return &buffer{ctx: ctx, ptr: p, n: len(host)}
}

func (b *buffer) download(t *testing.T) []float32 {
	t.Helper()
	out := make([]float32, b.n)
	if err := b.ctx.CopyToHost(unsafe.Pointer(&out[0]), b.ptr, 4*b.n); err != nil {
		t.Fatal(err)
	}
	return out
}

// ramp returns n floats start, start+step, ... (small integers: exact in fp32).
func ramp(n int, start, step float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = start + step*float32(i%1024)
	}
	return out
}

// checkAxpy verifies y == a*x + y0 element by element.
func checkAxpy(t *testing.T, what string, got, x, y0 []float32, a float32) {
	t.Helper()
	bad := 0
	for i := range got {
		if want := a*x[i] + y0[i]; got[i] != want {
			if bad < 5 {
				t.Errorf("%s: y[%d] = %v, want %v", what, i, got[i], want)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d wrong", what, bad, len(got))
	}
}

func axpyArgs(a float32, x, y *buffer) *driver.Args {
	return new(driver.Args).Float32(a).Ptr(x.ptr).Ptr(y.ptr).Int32(int32(x.n))
}

func blocks(n int) driver.Dim3 { return driver.D1(uint32((n + 255) / 256)) }

func newCompiler(t testing.TB) *jit.Compiler {
	t.Helper()
	disk, err := jit.OpenDiskCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return jit.NewCompiler(disk)
}

func newMemCache(t testing.TB) *jit.MemCache {
	t.Helper()
	mc, err := jit.NewMemCache(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	return mc
}
