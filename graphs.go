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
// its launch into a graph, later ones replay it. A graph keeps its module
// loaded through its own handle, so evicting either cache never unloads code
// a cached graph still runs.
//
// Capture happens on the caller's stream. A stream that cannot be captured
// (the legacy default stream, or one the caller is capturing already) makes
// the call launch directly; that outcome is remembered per argument set.
type graphCache struct {
	execs *jit.MemCache // launch key -> *cachedGraph

	mu   sync.Mutex
	seen map[string]int // launch key -> identical calls seen; -1: not capturable
}

// graphSeenLimit bounds the bookkeeping of argument sets seen only once.
const graphSeenLimit = 4096

type cachedGraph struct {
	exec   *driver.GraphExec
	module *jit.Handle
}

func newGraphCache() (*graphCache, error) {
	execs, err := jit.NewMemCache(256)
	if err != nil {
		return nil, fmt.Errorf("gdn: graph cache: %w", err)
	}
	return &graphCache{execs: execs, seen: map[string]int{}}, nil
}

func (g *graphCache) close() { g.execs.Close() }

// run replays (capturing first if needed) the graph of this launch on s.
// done reports whether the launch was issued; when false the caller launches
// directly.
func (g *graphCache) run(l launchSpec, s *driver.Stream, retain func() (*jit.Handle, error)) (done bool, err error) {
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
	if n < 1 { // first call, or not capturable
		return false, nil
	}
	h, err := g.execs.Acquire(key, func() (any, int64, func(), error) {
		module, err := retain()
		if err != nil {
			return nil, 0, nil, err
		}
		exec, err := capture(l, s)
		if err != nil {
			module.Release()
			return nil, 0, nil, err
		}
		cg := &cachedGraph{exec: exec, module: module}
		return cg, 1, func() { exec.Destroy(); module.Release() }, nil
	})
	if err != nil {
		g.mu.Lock()
		g.seen[key] = -1
		g.mu.Unlock()
		return false, nil
	}
	defer h.Release()
	if err := h.Value().(*cachedGraph).exec.Launch(s); err != nil {
		return true, fmt.Errorf("gdn: graph replay of %s: %w", l.plan.Variant.Name, err)
	}
	return true, nil
}

// capture records the launch into a graph on s and instantiates it. The
// captured launch does not run; the caller replays the graph.
func capture(l launchSpec, s *driver.Stream) (*driver.GraphExec, error) {
	if err := s.BeginCapture(); err != nil {
		return nil, err
	}
	launchErr := l.enqueue(s)
	graph, err := s.EndCapture()
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
