package launch

import (
	"sync"

	"github.com/gdnjit/gdn/internal/gdnerr"
)

// Prepared calls (callCache's core calls, fullCache's full calls) are held
// by reference count: a call in flight holds its entry, and an entry that
// leaves the cache meanwhile (evicted, or the Runtime closing) is freed by
// the last release, so a launch never reads freed parameters, graphs or
// scratch. heldCache is that bookkeeping, shared by both.

// holdState is an entry's reference count and whether it left the cache.
type holdState struct {
	refs    int  // calls holding the entry
	evicted bool // out of the cache: freed when refs drops to 0
}

func (h *holdState) hold() *holdState { return h }

// holdable is an entry of a heldCache.
type holdable interface {
	hold() *holdState
	// scratchBytes is the device memory the entry holds (bounded by
	// heldCache.scratchLimit).
	scratchBytes() int
	// sameSeqs reports whether the entry was prepared for these sequence
	// boundaries: keys hold only a hash of them.
	sameSeqs(seqs []int) bool
	free()
}

// heldCache is a bounded, concurrent map of held entries: at most limit
// entries, holding at most scratchLimit bytes of scratch together (the
// newest entry is kept whatever its size). Eviction takes whichever entry
// the map's randomised iteration yields first: simple, and no entry is
// favoured over time. A lookup allocates nothing.
type heldCache[K comparable, E holdable] struct {
	limit, scratchLimit int

	mu      sync.Mutex
	entries map[K]E
	scratch int
	closed  bool
}

// get returns the entry of k prepared for seqs, held; found is false when
// there is none, and collided true when the entry there was prepared for
// other boundaries with the same hash (the call then needs one of its own,
// outside the cache: alone).
func (c *heldCache[K, E]) get(k K, seqs []int) (e E, found, collided bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return e, false, false, gdnerr.ErrClosed
	}
	e, found = c.entries[k]
	switch {
	case !found:
	case !e.sameSeqs(seqs):
		var zero E
		return zero, false, true, nil
	default:
		e.hold().refs++
	}
	return e, found, false, nil
}

// put stores e, prepared for seqs, under k and returns it held. When
// another goroutine stored an entry for k first, that one is returned held
// and e is freed; when that one was prepared for other boundaries, e is
// returned alone. After Close, e is freed and gdnerr.ErrClosed returned.
func (c *heldCache[K, E]) put(k K, e E, seqs []int) (E, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		e.free()
		var zero E
		return zero, gdnerr.ErrClosed
	}
	if old, ok := c.entries[k]; ok {
		if !old.sameSeqs(seqs) {
			c.mu.Unlock()
			alone(e.hold())
			return e, nil
		}
		old.hold().refs++
		c.mu.Unlock()
		e.free()
		return old, nil
	}
	if c.entries == nil {
		c.entries = map[K]E{}
	}
	var victims []E
	sb := e.scratchBytes()
	for k2, v := range c.entries {
		over := len(c.entries) >= c.limit
		if !over && (sb == 0 || c.scratch+sb <= c.scratchLimit) {
			break
		}
		if !over && v.scratchBytes() == 0 {
			continue // evicting it frees no scratch
		}
		if c.evict(k2, v) {
			victims = append(victims, v)
		}
	}
	e.hold().refs = 1
	c.entries[k] = e
	c.scratch += sb
	c.mu.Unlock()
	for _, v := range victims {
		v.free()
	}
	return e, nil
}

// evict takes k's entry out of the map (c.mu held); it reports whether no
// call holds it, so that the caller frees it once c.mu is released.
func (c *heldCache[K, E]) evict(k K, e E) bool {
	delete(c.entries, k)
	c.scratch -= e.scratchBytes()
	h := e.hold()
	h.evicted = true
	return h.refs == 0
}

// release drops a call's hold on e, freeing e if it left the cache
// meanwhile and this was the last hold.
func (c *heldCache[K, E]) release(e E) {
	c.mu.Lock()
	h := e.hold()
	h.refs--
	last := h.evicted && h.refs == 0
	c.mu.Unlock()
	if last {
		e.free()
	}
}

// close empties the cache for good: entries no call holds are freed now,
// the others by their last release; later gets and puts fail with
// gdnerr.ErrClosed.
func (c *heldCache[K, E]) close() {
	var idle []E
	c.mu.Lock()
	c.closed = true
	for k, e := range c.entries {
		if c.evict(k, e) {
			idle = append(idle, e)
		}
	}
	c.mu.Unlock()
	for _, e := range idle {
		e.free()
	}
}

// dropIdle evicts every entry no call holds and frees it, and reports
// whether there was any: what a Runtime gives back when the device runs
// out of memory (their scratch goes to the pool's released memory).
func (c *heldCache[K, E]) dropIdle() bool {
	var idle []E
	c.mu.Lock()
	for k, e := range c.entries {
		if e.hold().refs == 0 && c.evict(k, e) {
			idle = append(idle, e)
		}
	}
	c.mu.Unlock()
	for _, e := range idle {
		e.free()
	}
	return len(idle) > 0
}

// len returns the number of cached entries.
func (c *heldCache[K, E]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// alone marks an entry as held by one call outside any cache: its release
// frees it.
func alone(h *holdState) { h.refs, h.evicted = 1, true }
