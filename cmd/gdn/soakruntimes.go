package main

import (
	"fmt"
	"sync"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/internal/tuning"
)

// soakOpenLimit is how many Runtimes a soak keeps open at once. Each one
// holds its loaded modules, its call and graph caches with their scratch
// (up to a few GB after long problems) and, on an SM slice, a green
// context of its own. A 10-minute soak draws about 170 combinations of
// forced variant, segment length, slice and preparation cap; all open
// together they filled an 80 GB H100 after five minutes, and every later
// problem, and whatever else shared the GPU, failed for want of memory.
// Twelve leaves room for the six workers' problems and the planner's
// Runtime, which stays open because the serving and auto problems use it.
const soakOpenLimit = 12

// soakRuntimes holds one Runtime per forced variant ("" for the planner's
// choice), segment length, SM slice and preparation cap, opened on first
// use and shared by the workers (a Runtime is safe for concurrent use and
// its variant is fixed when it opens). A problem holds its Runtime from
// get to the release get returns; when more than limit are open, the
// least recently used one that no problem holds is closed, and opened
// again if a later problem needs it.
type soakRuntimes struct {
	device int
	limit  int // 0: soakOpenLimit
	// open and shut open and close a Runtime (tests replace them).
	open func(gdn.Options) (*gdn.Runtime, error)
	shut func(*gdn.Runtime)

	mu     sync.Mutex
	rts    map[string]*soakRuntime
	clock  uint64 // ticks at each get: the order of use
	opened int    // Runtimes opened so far, reopened ones included
}

// soakRuntime is one Runtime of soakRuntimes, open or being opened.
type soakRuntime struct {
	ready chan struct{} // closed once the open has ended
	rt    *gdn.Runtime  // after ready: the Runtime, or nil with err
	err   error
	refs  int    // problems holding it (the one opening it included)
	used  uint64 // clock at its last get
}

func newSoakRuntimes(device int) *soakRuntimes {
	return &soakRuntimes{device: device, open: openRuntime, shut: closeSoakRuntime, rts: map[string]*soakRuntime{}}
}

// closeSoakRuntime closes a Runtime the soak no longer needs. Its error is
// dropped: a Runtime whose context was lost fails the problems that ran on
// it, and those failures are what the soak reports.
func closeSoakRuntime(rt *gdn.Runtime) { _ = rt.Close() }

// get returns the Runtime of a variant (and options), held, opening it on
// first use, and the function that releases it. Opening one beyond the
// limit closes the least recently used Runtime no problem holds.
func (s *soakRuntimes) get(variant string, segments, sms, prepHeads int) (*gdn.Runtime, func(), error) {
	key := soakRuntimeKey(variant, segments, sms, prepHeads)
	s.mu.Lock()
	s.clock++
	e, found := s.rts[key]
	if !found {
		e = &soakRuntime{ready: make(chan struct{})}
		s.rts[key] = e
	}
	e.refs++
	e.used = s.clock
	s.mu.Unlock()

	if found {
		<-e.ready // opened by another worker, perhaps still
	} else {
		// Opened outside the lock: a soak opens several Runtimes a second
		// (most combinations are drawn rarely, so the least recently used
		// ones come back), each taking a context and its modules, and
		// the other workers' problems need not wait for that. Workers
		// asking for this one meanwhile wait on ready.
		opts := gdn.Options{Device: s.device, SMs: sms}
		tuning.Set(&opts, tuning.Knobs{Variant: variant, SegmentChunks: segments, PrepHeads: prepHeads})
		rt, err := s.open(opts)
		s.mu.Lock()
		e.rt, e.err = rt, err
		var idle []*gdn.Runtime
		if err != nil {
			delete(s.rts, key) // the next problem that needs it tries again
		} else {
			s.opened++
			idle = s.trim()
		}
		s.mu.Unlock()
		close(e.ready)
		// Closed outside the lock: a Close frees memory and waits for the
		// Runtime's work.
		for _, rt := range idle {
			s.shut(rt)
		}
	}
	if e.err != nil {
		s.release(e)
		return nil, nil, e.err
	}
	var once sync.Once
	return e.rt, func() { once.Do(func() { s.release(e) }) }, nil
}

// release drops a problem's hold on e.
func (s *soakRuntimes) release(e *soakRuntime) {
	s.mu.Lock()
	e.refs--
	s.mu.Unlock()
}

// trim takes the least recently used idle Runtimes out of the set while
// more than the limit are open (s.mu held) and returns them, to be closed.
// Held ones stay (one being opened is held by its opener): with every one
// held (more workers than the limit) the set runs over the limit for a
// while.
func (s *soakRuntimes) trim() []*gdn.Runtime {
	limit := s.limit
	if limit == 0 {
		limit = soakOpenLimit
	}
	var idle []*gdn.Runtime
	for len(s.rts) > limit {
		var oldKey string
		var old *soakRuntime
		for k, e := range s.rts {
			if e.refs == 0 && (old == nil || e.used < old.used) {
				oldKey, old = k, e
			}
		}
		if old == nil {
			break
		}
		delete(s.rts, oldKey)
		idle = append(idle, old.rt)
	}
	return idle
}

// openedCount is how many Runtimes were opened so far, reopened ones
// included.
func (s *soakRuntimes) openedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened
}

// soakRuntimeKey names a Runtime of soakRuntimes by what it was opened with.
func soakRuntimeKey(variant string, segments, sms, prepHeads int) string {
	return fmt.Sprintf("%s/%d/%d/%d", variant, segments, sms, prepHeads)
}

// close closes every Runtime (the soak has ended: no problem holds one).
func (s *soakRuntimes) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.rts {
		if e.rt != nil {
			s.shut(e.rt)
		}
		delete(s.rts, k)
	}
}
