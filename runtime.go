package gdn

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/jit"
	"github.com/gdnjit/gdn/kernsrc"
)

// Options configure a Runtime. The zero value is ready to use.
type Options struct {
	// Device is the CUDA device ordinal.
	Device int
	// CacheDir holds compiled kernels on disk; "" uses GDN_CACHE_DIR or the
	// user cache directory (see package jit).
	CacheDir string
	// NoGraphs turns off the replay of cached CUDA graphs for repeated calls.
	NoGraphs bool
	// Variant, when set, runs every core forward with this kernel variant
	// (a name from kernsrc's catalogue, e.g. "gdn_hopper_bf16_bv64") instead
	// of the planner's choice: tests and benchmarks use it to cover every
	// variant the planner can pick, whatever the device's size.
	Variant string
	// SegmentChunks controls sequence parallelism: 0 lets the planner cut
	// long sequences into segments run on many SMs at once when its cost
	// model says that is faster (see PlanCoreSplit); > 0 cuts every sequence
	// longer than that many 64-token chunks into segments of it (tests,
	// benchmarks; not when that would make more than 65535 segments, the
	// grid rows of the output pass); < 0 never cuts. Results are exact
	// either way.
	SegmentChunks int
	// TransferTile, when positive, is the value-tile width (64 or 128) of
	// every split call's transfer pass, whatever the planner would choose
	// (tests, and the benchmarks that fit the split cost model: docs/PERF.md
	// v18); 0 lets the planner choose. It does not decide whether a call is
	// split, only that pass's tile when it is. Other values are an
	// *ArgError.
	TransferTile int
	// ScanColumns, when positive, is the value columns (8, 16 or 32) of
	// one CTA of every split call's scan, whatever the planner would choose
	// (tests, benchmarks); 0 lets the planner choose by the waves of the
	// scan's grid (split.go). Results are the same to the bit at every
	// width. Other values are an *ArgError.
	ScanColumns int
	// EarlyFirstSegment decides whether a split call runs each sequence's
	// first segment (whose true start is h0) as an output pass of its own
	// beside the transfer pass, which then needs no B or M for it. 0 lets
	// the planner's cost model decide. > 0 weighs early plans first: the
	// best of them where one applies (every sequence cut in at least two
	// segments and one in three or more, the early pass's CTAs fewer than
	// the SMs) and the model puts it ahead of running unsplit, else the
	// plain planner's choice. < 0 weighs plain split plans only, so a call
	// whose only split worth making is early runs unsplit (tests,
	// benchmarks). Results are exact either way.
	EarlyFirstSegment int
	// PrepHeads, when positive, caps how many value heads of one key head
	// each block of the full forward's preparation kernel takes (it loads
	// the chunk's k rows and forms K K^T once for all of them): the most of
	// 4 and 1 that is at most PrepHeads and divides Hv / Hq, whatever the
	// grid's size (tests, benchmarks). 0 lets the full forward choose by
	// shape. Results are exact either way; a negative count is an
	// *ArgError.
	PrepHeads int
	// L2NormInPrep keeps the full forward's L2 norm in its preparation
	// kernel, which writes normalised fp16 copies of q and k for the core,
	// everywhere. By default the core kernel normalises q and k itself
	// wherever it runs unsplit at BV 128 on bf16 inputs, and then does the
	// whole preparation too (see PrepKernel). With PrepKernel the core still
	// normalises them where G = Hv / Hq is at most 2
	// (kernsrc.CoreBF16L2Norm), the preparation kernel then neither reading
	// q nor writing the copies, with results equal to the bit to the
	// copies'. This is for tests and benchmarks that compare the paths.
	L2NormInPrep bool
	// PrepKernel runs the full forward's preparation (the chunk sums of
	// the gates, A2) as a kernel of its own everywhere. By default, on
	// bf16 inputs wherever the core runs unsplit at BV 128 (any G), the
	// core kernel does the whole preparation itself (kernsrc.CoreBF16Fused
	// with L2Norm, kernsrc.CoreBF16FusedNoNorm without): no kernel runs
	// before it and the call needs no scratch. The results differ in the
	// last bits (A2's inverse is computed in another order, with fp16
	// block products), equally close to the float64 reference; this is
	// for tests and benchmarks that compare the two.
	PrepKernel bool
	// SMs, when positive, runs the Runtime on a slice of at least that many
	// of the device's SMs, through a CUDA green context (driver.OpenGreen);
	// 0 is the whole device. The driver rounds the count up to its
	// granularity (a multiple of 8 on Hopper: 14 gives 16, 66 gives 72);
	// Device().SMs is the count obtained, which the planner sizes grids for,
	// and Device().SMsAsked the count asked. More than the device has, or a
	// negative count, is an *ArgError naming Options.SMs. A driver without
	// green contexts (before CUDA 12.4) runs the Runtime on the whole device
	// and says why in Device().GreenFallback.
	//
	// The slice applies to work on the Runtime's own streams: pass Forward
	// a stream from rt.Context().NewStream() (or stream 0, which in a green
	// context is the green context's default stream). A stream created in
	// another context, e.g. by the CUDA runtime in the primary context, does
	// not run on the slice.
	SMs int
}

// DeviceInfo describes the GPU a Runtime runs on.
type DeviceInfo = driver.DeviceInfo

// Runtime runs gdn's kernels on one GPU. Kernels are compiled on first use
// (NVRTC, for the GPU found), kept on disk and in memory; calls are safe from
// many goroutines at once.
type Runtime struct {
	ctx        *driver.Context
	info       DeviceInfo
	target     jit.Target
	compiler   *jit.Compiler
	modules    *jit.MemCache // compiled-module key -> *loadedKernel (singleflight on first use)
	calls      *callCache    // Forward's prepared calls (plans, parameter blocks, graphs)
	prepHeads  int           // Options.PrepHeads
	normInPrep bool          // Options.L2NormInPrep
	prepKernel bool          // Options.PrepKernel
	graphs     *graphCache   // nil with Options.NoGraphs
	staging    hostStaging   // ForwardHost's buffers, kept between calls
	spares     resultPool    // ForwardHost's next results, prepared between calls
	full       *fullCache    // ForwardFull's prepared calls (scratch, prep launches)

	// kernels maps a variant name to its *loadedKernel once loaded: the hot
	// path looks a kernel up by name, without hashing sources for its key.
	// The Runtime keeps one handle on each (held) until Close, so a loaded
	// module is never unloaded while the Runtime can launch it.
	kernels sync.Map
	heldMu  sync.Mutex
	held    []*jit.Handle
	// testBuild, set only by the GPU tests (export_test.go) before a
	// runtime's first call, builds each variant as a test build of the
	// kernel (kernsrc.HopperHooked).
	testBuild func(kernsrc.Variant) kernsrc.Variant

	closed  atomic.Bool
	closeMu sync.RWMutex // held for reading by calls in flight, for writing by Close
}

// loadedKernel is a loaded module and its entry point.
type loadedKernel struct {
	module *driver.Module
	fn     *driver.Function
	report jit.Report
}

// Open creates a Runtime on a device (or on a slice of its SMs, with
// Options.SMs). Without the cuda build tag, or without a GPU, it returns an
// error wrapping ErrNoCUDA.
func Open(opts Options) (*Runtime, error) {
	if opts.TransferTile != 0 && opts.TransferTile != 64 && opts.TransferTile != 128 {
		return nil, argErrorf("Options.TransferTile", "is %d; want 0 (the planner's), 64 or 128", opts.TransferTile)
	}
	if opts.ScanColumns != 0 && !slices.Contains(kernsrc.ScanColumnChoices(), opts.ScanColumns) {
		return nil, argErrorf("Options.ScanColumns", "is %d; want 0 (the planner's) or one of %v", opts.ScanColumns, kernsrc.ScanColumnChoices())
	}
	if opts.PrepHeads < 0 {
		return nil, argErrorf("Options.PrepHeads", "is %d; want 0 (chosen by shape) or a count of value heads", opts.PrepHeads)
	}
	if opts.SMs < 0 {
		return nil, argErrorf("Options.SMs", "is %d; want 0 (the whole device) or a count of SMs", opts.SMs)
	}
	if opts.Variant != "" && !isCoreVariant(opts.Variant) {
		return nil, argErrorf("Options.Variant", "%q is not a core-forward kernel variant (gdn warmup lists them)", opts.Variant)
	}
	ctx, err := driver.OpenSMs(opts.Device, opts.SMs)
	if err != nil {
		if e := (*driver.SMCountError)(nil); errors.As(err, &e) {
			return nil, argErrorf("Options.SMs", "asks %d SMs; device %d has %d", e.Asked, opts.Device, e.Have)
		}
		return nil, fmt.Errorf("gdn: open device %d: %w", opts.Device, err)
	}
	rt, err := newRuntime(ctx, opts)
	if err != nil {
		ctx.Close()
		return nil, err
	}
	return rt, nil
}

func newRuntime(ctx *driver.Context, opts Options) (*Runtime, error) {
	info := ctx.Info()
	if err := CheckDevice(info); err != nil {
		return nil, err
	}
	// The core kernel keeps a ring of chunk slots in shared memory: a GPU
	// that cannot give a block that much (anything before Hopper) cannot run
	// it, and should hear so now rather than from a failed launch.
	need := kernsrc.HopperSharedBytes(kernsrc.CoreBF16Fused, 2)
	if info.MaxSharedPerBlockOptin < need {
		return nil, fmt.Errorf("gdn: device %d (%s, compute capability %d.%d) offers %d bytes of shared memory per block; the core kernel needs %d (an H100/H200-class GPU)",
			opts.Device, info.Name, info.Major, info.Minor, info.MaxSharedPerBlockOptin, need)
	}
	nv, err := jit.LoadNVRTC()
	if err != nil {
		return nil, fmt.Errorf("gdn: %w", err)
	}
	target, err := jit.TargetFor(info.Major, info.Minor, nv)
	if err != nil {
		return nil, fmt.Errorf("gdn: %w", err)
	}
	disk, err := jit.OpenDiskCache(opts.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("gdn: %w", err)
	}
	modules, err := jit.NewMemCache(64)
	if err != nil {
		return nil, fmt.Errorf("gdn: %w", err)
	}
	rt := &Runtime{
		ctx:      ctx,
		info:     info,
		target:   target,
		compiler: jit.NewCompiler(disk),
		modules:  modules,
		calls:    newCallCache(newPlanCache(info.SMs, opts.Variant), ctx.EncodeTiled, packParams),
	}
	rt.calls.dev, rt.calls.segChunks, rt.calls.xferTile = contextScratch{ctx}, opts.SegmentChunks, opts.TransferTile
	rt.calls.scanCols, rt.calls.early = opts.ScanColumns, opts.EarlyFirstSegment
	rt.prepHeads = opts.PrepHeads
	rt.normInPrep = opts.L2NormInPrep
	rt.prepKernel = opts.PrepKernel
	rt.full = newFullCache()
	rt.calls.grave = &scratchGraveyard{dev: rt.calls.dev}
	rt.calls.slabs = &scratchSlabs{dev: rt.calls.dev, grave: rt.calls.grave}
	if !opts.NoGraphs {
		g, err := newGraphCache(ctx)
		if err != nil {
			modules.Close()
			return nil, err
		}
		rt.graphs = g
	}
	return rt, nil
}

// Device describes the GPU.
func (rt *Runtime) Device() DeviceInfo { return rt.info }

// Target is the architecture kernels are compiled for, e.g. sm_90a.
func (rt *Runtime) Target() string { return rt.target.String() }

// Close releases cached graphs, modules, ForwardHost's buffers and the
// device context, and drops ForwardHost's spare results (waiting for those
// being prepared). Calls in flight finish first; later calls return
// ErrClosed.
func (rt *Runtime) Close() error {
	rt.closeMu.Lock()
	defer rt.closeMu.Unlock()
	if rt.closed.Swap(true) {
		return nil
	}
	rt.full.held.close() // parks its scratch in the graveyard calls.close drains
	rt.calls.close()     // their graphs first: they launch the modules' kernels
	if rt.graphs != nil {
		rt.graphs.close()
	}
	rt.staging.free(rt.ctx)
	rt.spares.close()
	rt.heldMu.Lock()
	for _, h := range rt.held {
		h.Release()
	}
	rt.held = nil
	rt.heldMu.Unlock()
	rt.modules.Close()
	return rt.ctx.Close()
}

// enter guards a call against a concurrent Close. Calls that hold it must not
// call a method that enters again: a read lock taken twice deadlocks when
// Close is waiting between the two.
func (rt *Runtime) enter() error {
	rt.closeMu.RLock()
	if rt.closed.Load() {
		rt.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (rt *Runtime) leave() { rt.closeMu.RUnlock() }

// kernel returns the loaded kernel of a variant, compiling it (or reading
// the disk cache) and loading it on first use; concurrent first uses compile
// once. The variant's request (sources, options, GDN_JIT_DEFINES) is read on
// that first use only.
func (rt *Runtime) kernel(v kernsrc.Variant, sharedBytes int) (*loadedKernel, error) {
	if rt.testBuild != nil {
		v = rt.testBuild(v)
	}
	if k, ok := rt.kernels.Load(v.Name); ok {
		return k.(*loadedKernel), nil
	}
	req, err := jit.RequestFor(v, rt.target)
	if err != nil {
		return nil, err
	}
	key, err := rt.compiler.Key(req)
	if err != nil {
		return nil, err
	}
	h, err := rt.modules.Acquire(key, func() (any, int64, func(), error) {
		art, err := rt.compiler.Compile(req)
		if err != nil {
			return nil, 0, nil, err
		}
		// A first call may come inside a caller's stream capture, where
		// loading a module is a call CUDA refuses in the default (global)
		// capture mode; relaxed mode allows it.
		var mod *driver.Module
		var fn *driver.Function
		var loadErr error
		err = rt.ctx.RelaxedCapture(func() error {
			if mod, loadErr = rt.ctx.LoadModule(art.Image); loadErr != nil {
				return nil
			}
			fn, err = mod.Function(art.Symbol(v.Kernel))
			if err == nil && sharedBytes > 48<<10 {
				err = fn.SetMaxDynamicShared(sharedBytes)
			}
			if err != nil {
				mod.Unload()
			}
			return err
		})
		if loadErr != nil {
			return nil, 0, nil, fmt.Errorf("gdn: load %s: %w", v.Name, loadErr)
		}
		if err != nil {
			return nil, 0, nil, fmt.Errorf("gdn: %s: %w", v.Name, err)
		}
		k := &loadedKernel{module: mod, fn: fn, report: art.Report}
		// Runs at Close only (the Runtime holds every module until then);
		// launches enqueued earlier may still be running the module's code.
		destroy := func() { rt.ctx.SynchronizeOrWait(); mod.Unload() }
		return k, 1, destroy, nil
	})
	if err != nil {
		return nil, err
	}
	k := h.Value().(*loadedKernel)
	if _, loaded := rt.kernels.LoadOrStore(v.Name, k); loaded {
		h.Release() // another goroutine stored it first and holds it
	} else {
		rt.heldMu.Lock()
		rt.held = append(rt.held, h)
		rt.heldMu.Unlock()
	}
	return k, nil
}

// Forward runs the core forward (g_cumsum and A given) on device buffers,
// enqueued on stream s. Arguments are validated first (errors wrap
// ErrInvalidArgument and name the argument); nothing is launched or written
// when they are wrong. The call does not synchronise the stream, so it may
// itself be captured into a CUDA graph. A call repeated with the same
// arguments allocates nothing, on the host or the device: the Runtime keeps
// its plan, encoded tensor maps, graph and, for a plan that splits long
// sequences across SMs (see Options.SegmentChunks), its scratch device
// memory, allocated when the arguments are first seen (see callCache).
func (rt *Runtime) Forward(a *CoreArgs, s Stream) error {
	if err := rt.enter(); err != nil {
		return err
	}
	defer rt.leave()
	return rt.forward(a, s)
}

// forward is Forward without the Close guard, for callers that hold it. Its
// host path is callCache.prepare; a repeated call (same arguments, same
// stream) allocates nothing and encodes no tensor map.
func (rt *Runtime) forward(a *CoreArgs, s Stream) error {
	e, err := rt.calls.prepare(a)
	if err != nil {
		return err
	}
	defer rt.calls.release(e)
	return rt.launch(e, s)
}

// PlanOf returns the plan Forward runs a with (validated as Forward does):
// the kernel variant, its geometry and, when sequences are split across
// SMs, the segments. The call is prepared (and kept) as Forward would.
func (rt *Runtime) PlanOf(a *CoreArgs) (Plan, error) {
	if err := rt.enter(); err != nil {
		return Plan{}, err
	}
	defer rt.leave()
	e, err := rt.calls.prepare(a)
	if err != nil {
		return Plan{}, err
	}
	defer rt.calls.release(e)
	return e.plan, nil
}

// Malloc allocates device memory on the Runtime's GPU.
func (rt *Runtime) Malloc(bytes int) (uintptr, error) {
	if err := rt.enter(); err != nil {
		return 0, err
	}
	defer rt.leave()
	p, err := rt.ctx.Alloc(bytes)
	return uintptr(p), err
}

// Free releases memory from Malloc.
func (rt *Runtime) Free(p uintptr) error {
	if err := rt.enter(); err != nil {
		return err
	}
	defer rt.leave()
	return rt.ctx.Free(driver.DevicePtr(p))
}

// CopyToDevice copies bytes from host memory at src to device address dst
// (synchronous with respect to the host; ordered on the legacy default
// stream, so work on a non-blocking stream that reads dst should wait for
// the context or that stream first).
func (rt *Runtime) CopyToDevice(dst uintptr, src unsafe.Pointer, bytes int) error {
	if err := rt.enter(); err != nil {
		return err
	}
	defer rt.leave()
	return rt.ctx.CopyToDevice(driver.DevicePtr(dst), src, bytes)
}

// CopyToHost copies bytes from device address src to host memory at dst
// (synchronous).
func (rt *Runtime) CopyToHost(dst unsafe.Pointer, src uintptr, bytes int) error {
	if err := rt.enter(); err != nil {
		return err
	}
	defer rt.leave()
	return rt.ctx.CopyToHost(dst, driver.DevicePtr(src), bytes)
}

// Context exposes the driver context for tools that time or manage streams
// (the bench command, tests). It belongs to the Runtime: do not Close it.
func (rt *Runtime) Context() *driver.Context { return rt.ctx }

// TimeMs measures GPU time: it records a CUDA event on stream s, runs region
// (which should enqueue work on s, e.g. calls of Forward), records a second
// event, waits for it and returns the milliseconds between the two.
func (rt *Runtime) TimeMs(s Stream, region func() error) (float64, error) {
	// The Close guard is held around the event calls, not around region,
	// whose own calls take it again (a reader waiting behind a pending
	// Close would deadlock).
	if err := rt.enter(); err != nil {
		return 0, err
	}
	stream := rt.ctx.WrapStream(uintptr(s))
	start, end, err := rt.newEventPair()
	if err == nil {
		err = start.Record(stream)
	}
	rt.leave()
	defer destroyEvents(start, end)
	if err != nil {
		return 0, err
	}
	if err := region(); err != nil {
		return 0, err
	}
	if err := rt.enter(); err != nil {
		return 0, err
	}
	defer rt.leave()
	if err := end.Record(stream); err != nil {
		return 0, err
	}
	if err := end.Synchronize(); err != nil {
		return 0, err
	}
	ms, err := driver.ElapsedMs(start, end)
	return float64(ms), err
}

// newEventPair creates TimeMs's two events (nil where not created).
func (rt *Runtime) newEventPair() (start, end *driver.Event, err error) {
	if start, err = rt.ctx.NewEvent(); err != nil {
		return nil, nil, err
	}
	end, err = rt.ctx.NewEvent()
	return start, end, err
}

// destroyEvents destroys the events that exist.
func destroyEvents(evs ...*driver.Event) {
	for _, e := range evs {
		if e != nil {
			e.Destroy()
		}
	}
}

// isCoreVariant says whether name is one of the core forward's kernel
// variants (a transfer-pass variant is not one: the planner runs those
// itself). Whether it suits a call's dtypes is checked per call.
func isCoreVariant(name string) bool {
	for _, v := range kernsrc.HopperVariants() {
		if v.Name == name && !strings.HasSuffix(name, "_transfer") {
			return true
		}
	}
	return false
}
