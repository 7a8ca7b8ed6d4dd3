package gdn

import (
	"math/bits"
	"sync"

	"github.com/gdnjit/gdn/driver"
)

// The full forward's working buffers (the cumulative gates, A and the
// normalised q and k: hundreds of MB at long prompts), and a split plan's
// states (B, M and start states: tens of MB), are shared by the prepared
// calls that write the same outputs, whatever their sequence boundaries: a serving loop whose batches change on every call then
// prepares a new call each time (a new chunk table of a few KB) but reuses
// one set of buffers, instead of allocating them on every call and freeing
// the evicted ones behind a context synchronisation.
//
// Sharing adds no race the outputs do not already have. The buffers are
// written and read only by a call's own kernels, in stream order (nothing
// is uploaded into them from the host), and two calls that share them write
// the same o (and ht): run on two streams unordered, they race on o anyway
// (the Forward contract); ordered, the later call's kernels use the buffers
// after the earlier call's have finished with them.

// slabKey names the outputs whose calls share a slab, and what the slab
// holds.
type slabKey struct {
	kind  slabKind
	o, ht uintptr
}

// slabKind tells the slabs of full calls from those of split calls: a full
// call whose core forward is split uses one of each.
type slabKind uint8

const (
	slabFull  slabKind = iota // g_cumsum, A2, the normalised q and k
	slabSplit                 // a split plan's B, M and start states
)

// scratchSlab is one device allocation of full-forward buffers. A call takes
// what it needs from its start; a longer call than the slab holds gets a new,
// larger slab under the same key, and the old one lives on with the calls
// prepared on it.
type scratchSlab struct {
	mem   driver.DevicePtr
	bytes int
	// Guarded by scratchSlabs.mu:
	refs    int  // prepared calls using it
	current bool // the slab new calls of its key get
	pinned  bool // a call on it was captured into a caller's graph: kept until Close
}

// scratchSlabs hands out slabs by key: a Runtime's full and split calls
// draw their buffers from it. Its map holds only slabs some prepared call uses: one
// that no call uses any more leaves it and goes to the graveyard (parked,
// or kept until Close when pinned), as a call's own scratch did.
type scratchSlabs struct {
	dev   scratchDevice
	grave *scratchGraveyard

	mu     sync.Mutex
	slabs  map[slabKey]*scratchSlab
	closed bool
	allocs [2]int // slabs allocated so far, by kind (tests)
}

// acquire returns k's slab, holding it, with at least bytes; a new slab is
// allocated when k has none or a smaller one.
func (s *scratchSlabs) acquire(k slabKey, bytes int) (*scratchSlab, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if sl := s.slabs[k]; sl != nil && sl.bytes >= bytes {
		sl.refs++
		s.mu.Unlock()
		return sl, nil
	}
	s.mu.Unlock()

	// Allocated outside the lock (it may take a while); two calls racing
	// for a new key may both allocate, and the loser's slab is kept apart.
	var mem driver.DevicePtr
	size := slabSize(bytes)
	err := s.dev.RelaxedCapture(func() error {
		var err error
		mem, err = s.dev.Alloc(size)
		return err
	})
	if err != nil {
		return nil, err
	}
	sl := &scratchSlab{mem: mem, bytes: size, refs: 1}

	s.mu.Lock()
	old := s.slabs[k]
	switch {
	case s.closed:
		s.mu.Unlock()
		s.free(mem)
		return nil, ErrClosed
	case old != nil && old.bytes >= bytes:
		// Another call put a large enough slab there meanwhile: use it.
		old.refs++
		s.mu.Unlock()
		s.free(mem)
		return old, nil
	}
	if s.slabs == nil {
		s.slabs = map[slabKey]*scratchSlab{}
	}
	s.allocs[k.kind]++
	if old != nil {
		old.current = false // buried by its last release
	}
	sl.current = true
	s.slabs[k] = sl
	s.mu.Unlock()
	return sl, nil
}

// slabSize rounds a slab's bytes up to a multiple of an eighth of the
// largest power of two at most bytes (at most 12.5% more): batches that
// grow a little at a time (serving) then replace their slab a few times,
// not on every new maximum.
func slabSize(bytes int) int {
	if bytes <= 8 {
		return bytes
	}
	step := 1 << (bits.Len(uint(bytes)) - 4) // an eighth of the power of two
	return (bytes + step - 1) / step * step
}

// pin marks sl as used by a call captured into a caller's graph.
func (s *scratchSlabs) pin(sl *scratchSlab) {
	if sl == nil { // a call without scratch (the fused preparation)
		return
	}
	s.mu.Lock()
	sl.pinned = true
	s.mu.Unlock()
}

// release drops a call's hold on sl; a slab no call uses is handed to the
// graveyard and forgotten (the key's next call allocates afresh: the
// full-call cache keeps calls, and so slabs, while a caller repeats them).
func (s *scratchSlabs) release(k slabKey, sl *scratchSlab) {
	s.mu.Lock()
	sl.refs--
	if sl.refs > 0 {
		s.mu.Unlock()
		return
	}
	if sl.current {
		delete(s.slabs, k)
		sl.current = false
	}
	s.mu.Unlock()
	s.bury(sl)
}

// bury hands the memory of a slab no call uses to the graveyard (a
// launched graph may still read it), outside s.mu: the graveyard may
// synchronise.
func (s *scratchSlabs) bury(sl *scratchSlab) {
	s.mu.Lock()
	pinned := sl.pinned
	s.mu.Unlock()
	switch {
	case s.grave != nil && pinned:
		s.grave.keep(sl.mem, sl.bytes)
	case s.grave != nil:
		s.grave.park(sl.mem, sl.bytes)
	default:
		s.free(sl.mem)
	}
}

// free frees memory no launch has read.
func (s *scratchSlabs) free(mem driver.DevicePtr) {
	s.dev.RelaxedCapture(func() error { return s.dev.Free(mem) })
}

// close refuses later acquires. Slabs still held are buried by their last
// release (the full-call cache's close releases every call it holds).
func (s *scratchSlabs) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// counts returns the slabs of a kind in use, and those allocated so far.
func (s *scratchSlabs) counts(kind slabKind) (live, allocs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.slabs {
		if k.kind == kind {
			live++
		}
	}
	return live, s.allocs[kind]
}
