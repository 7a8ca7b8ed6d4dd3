package launch

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gdnjit/gdn/driver"
)

// graphCache replays CUDA graphs for calls repeated with identical
// arguments (one callEntry): the second identical call captures its launch
// into a graph, that call and later ones replay it on the caller's stream.
// The graph lives in the call's entry and goes with it (eviction, Close).
//
// Capture happens on a stream of the cache's own, one capture at a time, so
// nothing another goroutine enqueues on the caller's stream can slip into a
// graph, and a caller building a graph of its own is left alone: when the
// caller's stream is capturing, the launch goes straight into the caller's
// graph instead. Graphs launch kernels of modules the Runtime holds until
// Close, which destroys the graphs first.
type graphCache struct {
	captureMu sync.Mutex
	capture   *driver.Stream // private, non-blocking
}

// callGraph is the graph state of one prepared call.
type callGraph struct {
	seen   atomic.Int32 // calls that could have replayed it, saturating at 2
	failed atomic.Bool  // capture failed: this call always launches directly
	exec   atomic.Pointer[driver.GraphExec]
	mu     sync.Mutex // held while recording, so one goroutine records
}

// due reports whether this call should go through the graph: from the
// second call on, unless capture failed. It allocates nothing.
func (g *callGraph) due() bool {
	if g.failed.Load() {
		return false
	}
	if g.seen.Load() >= 2 {
		return true
	}
	return g.seen.Add(1) >= 2
}

func newGraphCache(ctx *driver.Context) (*graphCache, error) {
	s, err := ctx.NewStream()
	if err != nil {
		return nil, fmt.Errorf("gdn: graph cache: %w", err)
	}
	return &graphCache{capture: s}, nil
}

// close destroys the capture stream; the graphs go with their entries.
func (g *graphCache) close() { g.capture.Destroy() }

// run replays (capturing first if needed) the graph of call e on s, a
// stream launch found not capturing (a call into the caller's own capture
// goes straight into the caller's graph instead). done reports whether the
// launch was issued; when false the caller launches directly. A replay
// allocates nothing.
func (g *graphCache) run(ctx *driver.Context, e *callEntry, s *driver.Stream) (done bool, err error) {
	if !e.graph.due() {
		return false, nil
	}
	x := e.graph.exec.Load()
	if x == nil {
		if x = g.record(ctx, e); x == nil {
			return false, nil
		}
	}
	// The driver finishes a launched graph even if it is destroyed
	// meanwhile; e is held, so it is not destroyed before this returns.
	if err := x.Launch(s); err != nil {
		return true, fmt.Errorf("gdn: graph replay of %s: %w", e.plan.Variant.Name, err)
	}
	return true, nil
}

// record captures e's launch into a graph on the private stream,
// instantiates it and stores it in e, once; it returns nil when capture
// fails (e is then marked so that it never tries again). Nothing runs.
func (g *graphCache) record(ctx *driver.Context, e *callEntry) *driver.GraphExec {
	e.graph.mu.Lock()
	defer e.graph.mu.Unlock()
	if x := e.graph.exec.Load(); x != nil || e.graph.failed.Load() { // another goroutine was first
		return x
	}
	x, err := g.captureGraph(ctx, e)
	if err != nil {
		e.graph.failed.Store(true)
		return nil
	}
	e.graph.exec.Store(x)
	return x
}

// captureGraph records e's launch on the private stream (one capture at a
// time: the stream is shared) and instantiates the graph.
func (g *graphCache) captureGraph(ctx *driver.Context, e *callEntry) (*driver.GraphExec, error) {
	g.captureMu.Lock()
	defer g.captureMu.Unlock()
	if err := g.capture.BeginCapture(); err != nil {
		return nil, err
	}
	launchErr := e.enqueue(ctx, g.capture)
	graph, err := g.capture.EndCapture()
	if launchErr != nil {
		if graph != nil {
			graph.Destroy()
		}
		return nil, launchErr
	}
	if err != nil {
		return nil, err
	}
	defer graph.Destroy()
	return graph.Instantiate()
}
