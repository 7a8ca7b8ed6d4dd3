package gdn

import (
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/jit"
)

// graphCache replays CUDA graphs for calls repeated with identical
// arguments (same buffers, same shape): the second identical call captures
// its launch into a graph, that call and later ones replay it on the caller's
// stream.
//
// Capture happens on a stream of the cache's own, one capture at a time, so
// nothing another goroutine enqueues on the caller's stream can slip into a
// graph, and a caller building a graph of its own is left alone: when the
// caller's stream is capturing, the launch goes straight into the caller's
// graph instead. Graphs launch kernels of modules the Runtime holds until
// Close, which destroys the graphs first.
type graphCache struct {
	execs *jit.MemCache // launch key -> *driver.GraphExec

	captureMu sync.Mutex
	capture   *driver.Stream // private, non-blocking

	mu   sync.Mutex
	seen map[string]int // launch key -> identical calls seen; -1: capture failed
}

// graphSeenLimit bounds the bookkeeping of argument sets seen only once.
const graphSeenLimit = 4096

func newGraphCache(ctx *driver.Context) (*graphCache, error) {
	execs, err := jit.NewMemCache(256)
	if err != nil {
		return nil, fmt.Errorf("gdn: graph cache: %w", err)
	}
	s, err := ctx.NewStream()
	if err != nil {
		execs.Close()
		return nil, fmt.Errorf("gdn: graph cache: %w", err)
	}
	return &graphCache{execs: execs, capture: s, seen: map[string]int{}}, nil
}

func (g *graphCache) close() {
	g.execs.Close()
	g.capture.Destroy()
}

// run replays (capturing first if needed) the graph of this launch on s.
// done reports whether the launch was issued; when false the caller launches
// directly.
func (g *graphCache) run(l launchSpec, s *driver.Stream) (done bool, err error) {
	if capturing, err := s.IsCapturing(); err != nil || capturing {
		return false, nil
	}
	key := l.plan.Variant.Name + ":" + hex.EncodeToString(l.params)
	g.mu.Lock()
	n := g.seen[key]
	if n >= 0 {
		if len(g.seen) >= graphSeenLimit && n == 0 {
			clear(g.seen)
		}
		g.seen[key] = n + 1
	}
	g.mu.Unlock()
	if n < 1 { // first call, or capture failed before
		return false, nil
	}
	h, err := g.execs.Acquire(key, func() (any, int64, func(), error) {
		exec, err := g.record(l)
		if err != nil {
			return nil, 0, nil, err
		}
		return exec, 1, func() { exec.Destroy() }, nil
	})
	if err != nil {
		g.mu.Lock()
		g.seen[key] = -1
		g.mu.Unlock()
		return false, nil
	}
	defer h.Release() // the driver finishes a launched graph even if it is destroyed meanwhile
	if err := h.Value().(*driver.GraphExec).Launch(s); err != nil {
		return true, fmt.Errorf("gdn: graph replay of %s: %w", l.plan.Variant.Name, err)
	}
	return true, nil
}

// record captures the launch into a graph on the private stream and
// instantiates it. Nothing runs: the graph is replayed by the caller.
func (g *graphCache) record(l launchSpec) (*driver.GraphExec, error) {
	g.captureMu.Lock()
	defer g.captureMu.Unlock()
	if err := g.capture.BeginCapture(); err != nil {
		return nil, err
	}
	launchErr := l.enqueue(g.capture)
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
