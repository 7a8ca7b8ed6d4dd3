package scratch

import "sync"

// retired holds released scratch until it can be freed safely. A launched
// graph may still be reading it, and making sure it is not takes a context
// synchronisation, which fails (and breaks the capture) while any stream
// of the context captures a graph: a caller capturing its own graph when a
// prepared call is evicted must not see that. So released memory waits,
// and is freed after one synchronisation once retiredLimit bytes have
// gathered, and at Close.
//
// Memory of a call launched into a caller's own stream capture is another
// matter: the caller's graph holds the call's kernel parameters, which point
// into it, and may be replayed at any time until the Runtime closes (as it
// may for an unsplit call, whose parameters the graph copies). Such memory
// is kept until Close whatever the synchronisations.
type retired struct {
	dev   Device
	mu    sync.Mutex
	mem   []region // waiting for a synchronisation
	bytes int
	kept  []region // of calls captured into callers' graphs: freed at Close
}

// retiredLimit is the released memory kept waiting before it is freed.
const retiredLimit = 256 << 20

// add takes released memory (r.p 0: nothing); it frees everything waiting
// once the limit is passed. kept memory is freed at Close only.
func (r *retired) add(m region, kept bool) {
	if m.p == 0 {
		return
	}
	r.mu.Lock()
	if kept {
		r.kept = append(r.kept, m)
		r.mu.Unlock()
		return
	}
	r.mem = append(r.mem, m)
	r.bytes += m.bytes
	full := r.bytes >= retiredLimit
	r.mu.Unlock()
	if full {
		r.free()
	}
}

// free waits until no launch can read the waiting memory and frees it,
// and reports whether it freed any. When the synchronisation fails (a
// stream of the context kept capturing), a launch may still read the
// memory: it waits for a later free.
func (r *retired) free() bool {
	r.mu.Lock()
	mem := r.mem
	r.mem, r.bytes = nil, 0
	r.mu.Unlock()
	if len(mem) == 0 {
		return false
	}
	if err := r.dev.SynchronizeOrWait(); err != nil {
		r.mu.Lock()
		for _, m := range mem {
			r.bytes += m.bytes
		}
		r.mem = append(mem, r.mem...)
		r.mu.Unlock()
		return false
	}
	r.dev.RelaxedCapture(func() error {
		for _, m := range mem {
			r.dev.Free(m.p)
		}
		return nil
	})
	return true
}

// close frees everything waiting and kept.
func (r *retired) close() {
	r.mu.Lock()
	r.mem, r.kept = append(r.mem, r.kept...), nil
	r.mu.Unlock()
	r.free()
}
