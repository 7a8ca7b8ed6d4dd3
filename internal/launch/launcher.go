// Package launch runs prepared forward calls on a GPU: it validates a
// call's arguments, finds or makes its prepared call (the plan, the
// parameter blocks with their tensor maps, the scratch of a split plan or
// of the full forward's preparation), loads the kernels and launches them,
// through a CUDA graph when the call repeats. A repeated call allocates
// nothing. The call caches are reference counted so that a launch never
// reads freed parameters, graphs or scratch.
package launch

import (
	"fmt"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/scratch"
	"github.com/gdnjit/gdn/internal/target"
	"github.com/gdnjit/gdn/jit"
	"github.com/gdnjit/gdn/kernsrc"
)

// Config is what a Launcher is made with.
type Config struct {
	CacheDir string     // the kernels' disk cache; "" for jit's default
	NoGraphs bool       // no replay of cached CUDA graphs
	Knobs    plan.Knobs // the overrides of tests and benchmarks
}

// Launcher runs forward calls on one context. Its methods are safe from
// many goroutines, but none may run during or after Close: the caller
// (gdn.Runtime) guards them.
type Launcher struct {
	ctx     *driver.Context
	sms     int
	knobs   plan.Knobs
	kernels *kernels
	calls   *callCache  // the core forward's prepared calls (plans, parameter blocks, graphs)
	full    *fullCache  // the full forward's prepared calls (scratch, prep launches)
	decode  decodeCache // the prepared decode calls (decodecall.go)
	graphs  *graphCache // nil with Config.NoGraphs
	pool    *scratch.Pool
}

// New makes a Launcher on ctx, which it uses but does not own. It refuses a
// GPU the kernels cannot run on, and fails when NVRTC or the kernel cache
// cannot be opened.
func New(ctx *driver.Context, cfg Config) (*Launcher, error) {
	info := ctx.Info()
	if err := target.CheckDevice(info); err != nil {
		return nil, err
	}
	// The core kernel keeps a ring of chunk slots in shared memory: a GPU
	// that cannot give a block that much (anything before Hopper) cannot run
	// it, and should hear so now rather than from a failed launch.
	need := kernsrc.HopperSharedBytes(kernsrc.CoreBF16Fused, 2)
	if info.MaxSharedPerBlockOptin < need {
		return nil, fmt.Errorf("gdn: device %d (%s, compute capability %d.%d) offers %d bytes of shared memory per block; the core kernel needs %d (an H100/H200-class GPU)",
			info.Ordinal, info.Name, info.Major, info.Minor, info.MaxSharedPerBlockOptin, need)
	}
	nv, err := jit.LoadNVRTC()
	if err != nil {
		return nil, fmt.Errorf("gdn: %w", err)
	}
	target, err := jit.TargetFor(info.Major, info.Minor, nv)
	if err != nil {
		return nil, fmt.Errorf("gdn: %w", err)
	}
	disk, err := jit.OpenDiskCache(cfg.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("gdn: %w", err)
	}
	modules, err := jit.NewMemCache(64)
	if err != nil {
		return nil, fmt.Errorf("gdn: %w", err)
	}
	l := &Launcher{
		ctx:     ctx,
		sms:     info.SMs,
		knobs:   cfg.Knobs,
		kernels: &kernels{ctx: ctx, target: target, compiler: jit.NewCompiler(disk), modules: modules},
		full:    newFullCache(),
		pool:    scratch.NewPool(scratch.ContextDevice{Context: ctx}),
	}
	l.calls = newCallCache(info.SMs, cfg.Knobs, ctx.EncodeTiled, packParams, l.pool)
	l.decode.init()
	l.pool.SetReclaim(l.dropIdleCalls)
	if !cfg.NoGraphs {
		g, err := newGraphCache(ctx)
		if err != nil {
			modules.Close()
			return nil, err
		}
		l.graphs = g
	}
	return l, nil
}

// UseTestBuild makes the Launcher compile every Hopper variant as a test
// build with the hooks' switches (kernsrc.HopperHooked), for the GPU tests
// of behaviours production never builds; call it before the first call.
func (l *Launcher) UseTestBuild(h kernsrc.HopperHooks) {
	l.kernels.testBuild = func(v kernsrc.Variant) kernsrc.Variant { return kernsrc.HopperHooked(v, h) }
}

// Target is the architecture kernels are compiled for, e.g. sm_90a.
func (l *Launcher) Target() string { return l.kernels.target.String() }

// Close releases the prepared calls (their graphs first: they launch the
// modules' kernels), the scratch, the graph cache's stream and the
// kernels. The context stays open.
func (l *Launcher) Close() {
	l.full.held.close() // releases its scratch to the pool
	l.decode.held.close()
	l.calls.close()
	l.pool.Close()
	if l.graphs != nil {
		l.graphs.close()
	}
	l.kernels.close()
}

// dropIdleCalls drops every prepared call no call holds, core, full and
// decode, and reports whether there was any: the pool calls it when the
// device runs out of memory. A dropped call is prepared again when it
// comes back.
func (l *Launcher) dropIdleCalls() bool {
	core := l.calls.held.dropIdle()
	full := l.full.held.dropIdle()
	decode := l.decode.held.dropIdle()
	return core || full || decode
}

// Forward runs the core forward of a on stream s (a CUstream handle).
// Arguments are validated first; nothing is launched or written when they
// are wrong. Its host path is callCache.prepare: a repeated call (same
// arguments, same stream) allocates nothing, on the host or the device, and
// encodes no tensor map.
func (l *Launcher) Forward(a problem.Core, s uintptr) error {
	e, err := l.calls.prepare(&a)
	if err != nil {
		return err
	}
	defer l.calls.release(e)
	return l.launch(e, s)
}

// PlanOf returns the plan Forward runs a with; the call is prepared (and
// kept) as Forward would.
func (l *Launcher) PlanOf(a problem.Core) (plan.Plan, error) {
	e, err := l.calls.prepare(&a)
	if err != nil {
		return plan.Plan{}, err
	}
	defer l.calls.release(e)
	return e.plan, nil
}

// PlanOfFull returns the plan of the core forward that ForwardFull runs a
// with, after its preparation; the call is prepared (and kept) as
// ForwardFull would: the first call with a set of arguments allocates its
// scratch.
func (l *Launcher) PlanOfFull(a problem.Full) (plan.Plan, error) {
	e, err := l.preparedFull(&a)
	if err != nil {
		return plan.Plan{}, err
	}
	defer l.full.held.release(e)
	return l.PlanOf(e.core)
}

// FullSlabCounts returns the full forward's working-buffer slabs in use
// and those allocated so far (tests).
func (l *Launcher) FullSlabCounts() (live, allocs int) { return l.pool.SlabCounts(scratch.FullBuffers) }
