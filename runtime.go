package gdn

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/hostpath"
	"github.com/gdnjit/gdn/internal/launch"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/tuning"
)

// Options configure a Runtime. The zero value is ready to use. (Its
// unexported field carries the overrides that gdn's own tests and
// benchmark tool set.)
type Options struct {
	// Device is the CUDA device ordinal.
	Device int
	// CacheDir holds compiled kernels on disk; "" uses GDN_CACHE_DIR or the
	// user cache directory (see package jit).
	CacheDir string
	// NoGraphs turns off the replay of cached CUDA graphs for repeated calls.
	NoGraphs bool
	// SMs, when positive, runs the Runtime on a slice of at least that many
	// of the device's SMs, through a CUDA green context; 0 is the whole
	// device. The driver rounds the count up to its granularity (a multiple
	// of 8 on Hopper: 14 gives 16, 66 gives 72); Device().SMs is the count
	// obtained, which the planner sizes grids for, and Device().SMsAsked the
	// count asked. More than the device has, or a negative count, is an
	// *ArgError naming Options.SMs. A driver without green contexts (before
	// CUDA 12.4) runs the Runtime on the whole device and says why in
	// Device().GreenFallback.
	//
	// The slice applies to work on the Runtime's own streams: pass Forward
	// a stream from NewStream (or stream 0, which in a green context is the
	// green context's default stream). A stream created in another context,
	// e.g. by the CUDA runtime in the primary context, does not run on the
	// slice.
	SMs int

	// knobs are the overrides of tests and benchmarks (internal/tuning).
	knobs tuning.Knobs
}

// DeviceInfo describes the GPU a Runtime runs on: the driver's
// description, named here so that a program needs no other import.
type DeviceInfo = driver.DeviceInfo

// Runtime runs gdn's kernels on one GPU. Kernels are compiled on first use
// (NVRTC, for the GPU found), kept on disk and in memory; calls are safe from
// many goroutines at once.
type Runtime struct {
	ctx   *driver.Context
	info  DeviceInfo
	dev   device         // the device forwards: prepared calls, kernels, graphs
	host  *hostpath.Path // the host-slice forwards, on top of dev
	guard closeGuard

	streamsMu sync.Mutex
	streams   map[Stream]*driver.Stream // from NewStream, destroyed at Close at the latest
}

// Open creates a Runtime on a device (or on a slice of its SMs, with
// Options.SMs). Without the cuda build tag, or without a GPU, it returns an
// error wrapping ErrNoCUDA; on a GPU the kernels cannot run on, one
// wrapping ErrUnsupportedGPU.
func Open(opts Options) (*Runtime, error) {
	if err := opts.knobs.Check(); err != nil {
		return nil, err
	}
	if opts.SMs < 0 {
		return nil, gdnerr.Argf("Options.SMs", "is %d; want 0 (the whole device) or a count of SMs", opts.SMs)
	}
	ctx, err := driver.OpenSMs(opts.Device, opts.SMs)
	if err != nil {
		if e := (*driver.SMCountError)(nil); errors.As(err, &e) {
			return nil, gdnerr.Argf("Options.SMs", "asks %d SMs; device %d has %d", e.Asked, opts.Device, e.Have)
		}
		return nil, fmt.Errorf("gdn: open device %d: %w", opts.Device, err)
	}
	dev, err := launch.New(ctx, launch.Config{CacheDir: opts.CacheDir, NoGraphs: opts.NoGraphs, Knobs: opts.knobs})
	if err != nil {
		ctx.Close()
		return nil, err
	}
	rt := &Runtime{ctx: ctx, info: ctx.Info(), dev: dev}
	rt.host = hostpath.New(ctx, dev, &rt.guard)
	rt.guard.open.Store(true)
	return rt, nil
}

// Device describes the GPU.
func (rt *Runtime) Device() DeviceInfo { return rt.info }

// Target is the architecture kernels are compiled for, e.g. sm_90a.
func (rt *Runtime) Target() string { return rt.dev.Target() }

// Close releases cached graphs, modules, the streams from NewStream,
// ForwardHost's buffers and the device context, and drops ForwardHost's
// spare results (waiting for those being prepared). Calls in flight finish
// first; later calls return ErrClosed.
func (rt *Runtime) Close() error {
	rt.guard.mu.Lock()
	defer rt.guard.mu.Unlock()
	if !rt.guard.open.Swap(false) {
		return nil
	}
	rt.dev.Close()
	rt.host.Close()
	rt.streamsMu.Lock()
	for _, s := range rt.streams {
		s.Destroy()
	}
	rt.streams = nil
	rt.streamsMu.Unlock()
	return rt.ctx.Close()
}

// NewStream creates a stream of the Runtime's context: with Options.SMs,
// work on it runs on the Runtime's slice of the GPU. It does not
// synchronise with the legacy default stream. DestroyStream destroys it
// (Close destroys those left).
func (rt *Runtime) NewStream() (Stream, error) {
	if err := rt.guard.Enter(); err != nil {
		return 0, err
	}
	defer rt.guard.Leave()
	s, err := rt.ctx.NewStream()
	if err != nil {
		return 0, fmt.Errorf("gdn: new stream: %w", err)
	}
	rt.streamsMu.Lock()
	defer rt.streamsMu.Unlock()
	if rt.streams == nil {
		rt.streams = map[Stream]*driver.Stream{}
	}
	h := Stream(s.Handle())
	rt.streams[h] = s
	return h, nil
}

// DestroyStream destroys a stream from NewStream once the work queued on
// it has completed (it does not wait). Any other stream is an *ArgError.
func (rt *Runtime) DestroyStream(s Stream) error {
	if err := rt.guard.Enter(); err != nil {
		return err
	}
	defer rt.guard.Leave()
	rt.streamsMu.Lock()
	ds, ok := rt.streams[s]
	delete(rt.streams, s)
	rt.streamsMu.Unlock()
	if !ok {
		return gdnerr.Argf("stream", "%#x is not a stream of this Runtime's NewStream", uintptr(s))
	}
	return ds.Destroy()
}

// TimeMs measures GPU time: it records a CUDA event on stream s, runs region
// (which should enqueue work on s, e.g. calls of Forward), records a second
// event, waits for it and returns the milliseconds between the two.
func (rt *Runtime) TimeMs(s Stream, region func() error) (float64, error) {
	// The Close guard is held around the event calls, not around region,
	// whose own calls take it again (a reader waiting behind a pending
	// Close would deadlock).
	if err := rt.guard.Enter(); err != nil {
		return 0, err
	}
	stream := rt.ctx.WrapStream(uintptr(s))
	start, end, err := rt.newEventPair()
	if err == nil {
		err = start.Record(stream)
	}
	rt.guard.Leave()
	defer destroyEvents(start, end)
	if err != nil {
		return 0, err
	}
	if err := region(); err != nil {
		return 0, err
	}
	if err := rt.guard.Enter(); err != nil {
		return 0, err
	}
	defer rt.guard.Leave()
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

// device is the layer that runs calls on the GPU (launch.Launcher): what
// the Runtime hands every call to once it has taken its guard. The CPU
// tests put a recorder in its place.
type device interface {
	hostpath.Forwarder
	PlanOf(a problem.Core) (plan.Plan, error)
	PlanOfFull(a problem.Full) (plan.Plan, error)
	Decode(a problem.Decode, s uintptr) error
	ForwardMixed(a problem.Full, s uintptr) error
	Target() string
	Close()
}

// closeGuard guards a Runtime's calls against a concurrent Close: calls
// hold it for reading (Enter, Leave), Close for writing; open is set by
// Open and cleared by Close (a Runtime not made by Open is closed). A call
// that holds it must not call a method that enters again: a read lock taken
// twice deadlocks when Close is waiting between the two.
type closeGuard struct {
	mu   sync.RWMutex
	open atomic.Bool
}

// Enter starts a call; it fails with ErrClosed unless the Runtime is open.
func (g *closeGuard) Enter() error {
	g.mu.RLock()
	if !g.open.Load() {
		g.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// Leave ends a call.
func (g *closeGuard) Leave() { g.mu.RUnlock() }

func init() {
	tuning.Register(tuning.Hooks{
		Set:     func(opts any, k tuning.Knobs) { opts.(*Options).knobs = k },
		Context: func(rt any) *driver.Context { return rt.(*Runtime).ctx },
	})
}
