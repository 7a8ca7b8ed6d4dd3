//go:build cuda

package jit_test

// GPU acceptance tests of the JIT runtime: compile with NVRTC, load with the
// driver, launch, cache on disk and in memory, capture and update graphs.
// They need an NVIDIA GPU and the cuda build tag:
//
//	eval "$(scripts/cuda-sdk.sh)" && go test -tags cuda -run GPU -v ./jit | grep METRIC
//
// Every measurement is logged on a line starting "METRIC ".

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/jit"
)

func TestGPUAxpy(t *testing.T) {
	ctx := gpu(t)
	info := ctx.Info()
	t.Logf("METRIC device=%q cc=%d.%d sms=%d smem_optin=%d driver=%d target=%s",
		info.Name, info.Major, info.Minor, info.SMs, info.MaxSharedPerBlockOptin, info.DriverVersion, target(t, ctx))
	c := newCompiler(t)
	a, v := compileVariant(t, c, ctx, "test_axpy")
	start := time.Now()
	mod, err := ctx.LoadModule(a.Image)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Unload()
	loadTime := time.Since(start)
	fn, err := mod.Function(a.Symbol(v.Kernel))
	if err != nil {
		t.Fatal(err)
	}
	if attr, err := fn.Attributes(); err == nil {
		t.Logf("METRIC test_axpy regs=%d local_bytes=%d (ptxas said %s)", attr.NumRegs, attr.LocalBytes, a.Report)
	}
	const n = 1<<20 + 3
	x, y0 := ramp(n, 1, 1), ramp(n, -5, 0.5)
	dx, dy := upload(t, ctx, x), upload(t, ctx, y0)
	s, err := ctx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := ctx.Launch(fn, blocks(n), driver.D1(256), 0, s, axpyArgs(3, dx, dy)); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	checkAxpy(t, "axpy", dy.download(t), x, y0, 3)
	t.Logf("METRIC axpy_cold compile_ms=%.1f load_ms=%.3f image_bytes=%d", a.Elapsed.Seconds()*1e3, loadTime.Seconds()*1e3, len(a.Image))
}

// childResult mirrors the JSON the jit test binary prints when started with
// GDN_JIT_TEST_CHILD=<variant> (see TestMain in main_test.go).
type childResult struct {
	Key       string `json:"key"`
	FromDisk  bool   `json:"from_disk"`
	ElapsedNs int64  `json:"elapsed_ns"`
	Error     string `json:"error,omitempty"`
}

// TestGPUWarmCache times the three ways to get a module: a cold NVRTC
// compile, a disk-cache hit in a fresh process, and a MemCache hit.
func TestGPUWarmCache(t *testing.T) {
	ctx := gpu(t)
	dir := t.TempDir()
	disk, _ := jit.OpenDiskCache(dir)
	c := jit.NewCompiler(disk)
	cold, v := compileVariant(t, c, ctx, "test_axpy")
	if cold.FromDisk {
		t.Fatal("cold compile came from disk")
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "GDN_JIT_TEST_CHILD=test_axpy", jit.CacheDirEnv+"="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var child childResult
	if err := json.Unmarshal(out, &child); err != nil || child.Error != "" {
		t.Fatalf("child output %q: %v %s", out, err, child.Error)
	}
	if !child.FromDisk || child.Key != cold.Key {
		t.Errorf("child: FromDisk=%v key %s, want a disk hit on %s", child.FromDisk, child.Key, cold.Key)
	}

	mc := newMemCache(t)
	start := time.Now()
	h, _ := acquireKernel(t, mc, c, ctx, "test_axpy") // compile (disk hit) + load
	firstAcquire := time.Since(start)
	defer h.Release()
	const hits = 1000
	start = time.Now()
	for range hits {
		h2, err := mc.Acquire(cold.Key, func() (any, int64, func(), error) {
			return nil, 0, nil, errors.New("a cached module was created again")
		})
		if err != nil {
			t.Fatal(err)
		}
		h2.Release()
	}
	hit := time.Since(start) / hits
	t.Logf("METRIC warm_cache variant=%s cold_compile_ms=%.1f child_disk_load_ms=%.3f disk_plus_module_load_ms=%.3f memcache_hit_us=%.3f",
		v.Name, cold.Elapsed.Seconds()*1e3, float64(child.ElapsedNs)/1e6, firstAcquire.Seconds()*1e3, hit.Seconds()*1e6)
}

// TestGPUGraphUpdate captures three launches into a graph, replays it, points
// its kernel nodes at other buffers with SetKernelNodeArgs and replays again.
func TestGPUGraphUpdate(t *testing.T) {
	ctx := gpu(t)
	mc := newMemCache(t)
	h, k := acquireKernel(t, mc, newCompiler(t), ctx, "test_axpy")
	defer h.Release()
	const n = 4096 + 17
	x1, y1 := ramp(n, 1, 1), ramp(n, 2, 1)
	x2, y2 := ramp(n, -3, 2), ramp(n, 7, -1)
	dx1, dy1, dx2, dy2 := upload(t, ctx, x1), upload(t, ctx, y1), upload(t, ctx, x2), upload(t, ctx, y2)
	s, err := ctx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()

	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := ctx.Launch(k.fn, blocks(n), driver.D1(256), 0, s, axpyArgs(1, dx1, dy1)); err != nil {
			s.EndCapture()
			t.Fatal(err)
		}
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	ge, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer ge.Destroy()
	// The graph uses the module: the handle is held for the exec's lifetime
	// (the deferred Release above runs after ge.Destroy).
	if got := dy1.download(t); got[5] != y1[5] {
		t.Fatalf("capture ran the kernels: y[5] = %v, want %v", got[5], y1[5])
	}
	if err := ge.Launch(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	checkAxpy(t, "replay 1", dy1.download(t), x1, y1, 3)

	nodes, err := g.KernelNodes()
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 {
		t.Fatalf("%d kernel nodes, want 3", len(nodes))
	}
	for _, node := range nodes {
		if err := ge.SetKernelNodeArgs(node, k.fn, blocks(n), driver.D1(256), 0, axpyArgs(2, dx2, dy2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ge.Launch(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	checkAxpy(t, "replay 2 (updated)", dy2.download(t), x2, y2, 6)
	checkAxpy(t, "replay 2 left the first buffers", dy1.download(t), x1, y1, 3)
}

// TestGPUConcurrentLaunches launches from 16 goroutines at once, each on its
// own stream with its own buffers, sharing one module from the MemCache.
func TestGPUConcurrentLaunches(t *testing.T) {
	ctx := gpu(t)
	mc := newMemCache(t)
	c := newCompiler(t)
	const workers, n = 16, 1 << 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := make(chan struct{})
	type work struct {
		x, y0  []float32
		dx, dy *buffer
	}
	ws := make([]work, workers)
	for i := range ws {
		ws[i].x, ws[i].y0 = ramp(n, float32(i), 1), ramp(n, float32(-i), 2)
		ws[i].dx, ws[i].dy = upload(t, ctx, ws[i].x), upload(t, ctx, ws[i].y0)
	}
	a, v := compileVariant(t, c, ctx, "test_axpy")
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			h, k, err := acquire(mc, ctx, a, v) // one goroutine loads, the others wait for it
			if err != nil {
				errs <- err
				return
			}
			defer h.Release()
			s, err := ctx.NewStream()
			if err != nil {
				errs <- err
				return
			}
			defer s.Destroy()
			for range 4 {
				if err := ctx.Launch(k.fn, blocks(n), driver.D1(256), 0, s, axpyArgs(float32(i), ws[i].dx, ws[i].dy)); err != nil {
					errs <- fmt.Errorf("worker %d: %w", i, err)
					return
				}
			}
			if err := s.Synchronize(); err != nil {
				errs <- fmt.Errorf("worker %d: %w", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, w := range ws {
		checkAxpy(t, fmt.Sprint("worker ", i), w.dy.download(t), w.x, w.y0, 4*float32(i))
	}
	if mc.Len() != 1 {
		t.Errorf("MemCache holds %d modules, want 1 shared", mc.Len())
	}
}

// TestGPUSmemReverse launches with 100 KB of dynamic shared memory after
// opting in, and checks that asking for 300 KB is a Go error.
func TestGPUSmemReverse(t *testing.T) {
	ctx := gpu(t)
	mc := newMemCache(t)
	h, k := acquireKernel(t, mc, newCompiler(t), ctx, "test_smem_reverse")
	defer h.Release()
	const smem = 100 << 10
	const per, nblocks = smem / 4, 8
	x := make([]float32, per*nblocks)
	for i := range x {
		x[i] = float32(i)
	}
	dx, dy := upload(t, ctx, x), upload(t, ctx, make([]float32, len(x)))
	if err := k.fn.SetMaxDynamicShared(smem); err != nil {
		t.Fatalf("SetMaxDynamicShared(100 KB): %v", err)
	}
	args := new(driver.Args).Ptr(dx.ptr).Ptr(dy.ptr).Int32(per)
	if err := ctx.Launch(k.fn, driver.D1(nblocks), driver.D1(256), smem, nil, args); err != nil {
		t.Fatalf("launch with 100 KB: %v", err)
	}
	if err := ctx.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := dy.download(t)
	for b := range nblocks {
		for i := range per {
			if want := x[b*per+per-1-i]; got[b*per+i] != want {
				t.Fatalf("block %d: y[%d] = %v, want %v", b, i, got[b*per+i], want)
			}
		}
	}

	const tooMuch = 300 << 10
	setErr := k.fn.SetMaxDynamicShared(tooMuch)
	launchErr := ctx.Launch(k.fn, driver.D1(1), driver.D1(256), tooMuch, nil, new(driver.Args).Ptr(dx.ptr).Ptr(dy.ptr).Int32(tooMuch/4))
	t.Logf("METRIC smem_300KB set_err=%q launch_err=%q optin_max=%d", fmt.Sprint(setErr), fmt.Sprint(launchErr), ctx.Info().MaxSharedPerBlockOptin)
	if setErr == nil && launchErr == nil {
		t.Fatal("300 KB of dynamic shared memory was accepted")
	}
	if launchErr == nil {
		t.Error("a launch with 300 KB of dynamic shared memory returned no error")
	}
	// The context must still work.
	if err := ctx.Launch(k.fn, driver.D1(nblocks), driver.D1(256), smem, nil, args); err != nil {
		t.Fatalf("launch after the refused one: %v", err)
	}
	if err := ctx.Synchronize(); err != nil {
		t.Fatalf("context broken after the refused launch: %v", err)
	}
}

// BenchmarkGPULaunch measures the host time of enqueuing a small kernel:
// a plain launch, and a graph replay of one and of ten launches. ns/op is
// host time per enqueue; gpu-us/op is the GPU time per enqueue (CUDA events
// around the loop), which the host time must stay under for the GPU to be
// the bound.
//
//	go test -tags cuda -run '^$' -bench GPULaunch ./jit
func BenchmarkGPULaunch(b *testing.B) {
	ctx := gpu(b)
	mc := newMemCache(b)
	h, k := acquireKernel(b, mc, newCompiler(b), ctx, "test_axpy")
	defer h.Release()
	const n = 1024
	dx, dy := upload(b, ctx, ramp(n, 0, 0)), upload(b, ctx, ramp(n, 0, 0))
	s, err := ctx.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	args := axpyArgs(1, dx, dy)
	launch := func() error { return ctx.Launch(k.fn, blocks(n), driver.D1(256), 0, s, args) }

	// timed runs enqueue b.N times and reports the GPU time per enqueue.
	timed := func(b *testing.B, enqueue func() error) {
		for range 100 { // warm up
			if err := enqueue(); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
		e0, _ := ctx.NewEvent()
		e1, _ := ctx.NewEvent()
		defer e0.Destroy()
		defer e1.Destroy()
		e0.Record(s)
		for b.Loop() {
			if err := enqueue(); err != nil {
				b.Fatal(err)
			}
		}
		e1.Record(s)
		e1.Synchronize()
		gpuMs, _ := driver.ElapsedMs(e0, e1)
		b.ReportMetric(float64(gpuMs)*1e3/float64(b.N), "gpu-us/op")
	}

	b.Run("plain", func(b *testing.B) { timed(b, launch) })
	// One kernel per graph compares a replay with one launch; ten show the
	// per-kernel cost inside a replay.
	for _, per := range []int{1, 10} {
		b.Run(fmt.Sprintf("graph%d", per), func(b *testing.B) {
			if err := s.BeginCapture(); err != nil {
				b.Fatal(err)
			}
			for range per {
				if err := launch(); err != nil {
					s.EndCapture()
					b.Fatal(err)
				}
			}
			g, err := s.EndCapture()
			if err != nil {
				b.Fatal(err)
			}
			defer g.Destroy()
			ge, err := g.Instantiate()
			if err != nil {
				b.Fatal(err)
			}
			defer ge.Destroy()
			timed(b, func() error { return ge.Launch(s) })
		})
	}
}
