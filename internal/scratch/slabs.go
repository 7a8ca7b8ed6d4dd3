package scratch

import (
	"math/bits"
	"sync"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/gdnerr"
)

// The full forward's working buffers (the cumulative gates, A and the
// normalised q and k: hundreds of MB at long prompts), and a split plan's
// states (B, M and start states: tens of MB), are shared by the prepared
// calls that write the same outputs, whatever their sequence boundaries: a
// serving loop whose batches change on every call then prepares a new call
// each time (a new chunk table of a few KB) but reuses one set of buffers,
// instead of allocating them on every call and freeing the evicted ones
// behind a context synchronisation.
//
// A slab is zeroed when it is allocated. The Hopper kernels read a chunk's
// 64-token window whole, rows past its sequence's end included, and mask
// those rows by multiplying them with zeros: the rows must hold finite
// numbers. In a call that covers every token they are the next sequence's
// (written by the same call), but a run of a mixed call (problem.Run)
// writes only its own sequences' rows, so the others keep whatever the
// memory held before, and a freed buffer's NaN there made whole states
// NaN (0 x NaN). Zeroed once, a slab holds only zeros and what calls
// wrote into it, all finite.
//
// Sharing adds no race the outputs do not already have. The buffers are
// written and read only by a call's own kernels, in stream order (nothing
// is uploaded into them from the host), and two calls that share them write
// the same o (and ht): run on two streams unordered, they race on o anyway
// (the Forward contract); ordered, the later call's kernels use the buffers
// after the earlier call's have finished with them.

// Key names the outputs whose calls share a slab, and what the slab holds.
type Key struct {
	Kind  Kind
	O, Ht uintptr
}

// Kind tells the slabs of full calls from those of split calls: a full
// call whose core forward is split uses one of each.
type Kind uint8

const (
	FullBuffers Kind = iota // g_cumsum, A2, the normalised q and k
	SplitStates             // a split plan's B, M and start states
)

// slab is one device allocation of working buffers. A call takes what it
// needs from its start; a longer call than the slab holds gets a new,
// larger slab under the same key, and the old one lives on with the calls
// prepared on it.
type slab struct {
	mem   driver.DevicePtr
	bytes int
	// Guarded by slabTable.mu:
	refs    int  // prepared calls using it
	current bool // the slab new calls of its key get
	kept    bool // a call on it was captured into a caller's graph: freed at Close
}

// slabTable hands out slabs by key. It holds only slabs some prepared call
// uses: one that no call uses any more leaves it and is retired, as a
// call's own table is.
type slabTable struct {
	pool *Pool

	mu     sync.Mutex
	slabs  map[Key]*slab
	closed bool
	allocs [2]int // slabs allocated so far, by kind (tests)
}

// acquire returns k's slab, holding it, with at least bytes; a new slab is
// allocated when k has none or a smaller one.
func (s *slabTable) acquire(k Key, bytes int) (*slab, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, gdnerr.ErrClosed
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
	dev := s.pool.dev
	err := dev.RelaxedCapture(func() error {
		var err error
		if mem, err = s.pool.alloc(size); err != nil {
			return err
		}
		if err = dev.Zero(mem, size); err != nil {
			dev.Free(mem) // nothing read it
			mem = 0
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sl := &slab{mem: mem, bytes: size, refs: 1}

	s.mu.Lock()
	old := s.slabs[k]
	switch {
	case s.closed:
		s.mu.Unlock()
		s.pool.freeUnread(region{mem, size})
		return nil, gdnerr.ErrClosed
	case old != nil && old.bytes >= bytes:
		// Another call put a large enough slab there meanwhile: use it.
		old.refs++
		s.mu.Unlock()
		s.pool.freeUnread(region{mem, size})
		return old, nil
	}
	if s.slabs == nil {
		s.slabs = map[Key]*slab{}
	}
	s.allocs[k.Kind]++
	if old != nil {
		old.current = false // retired by its last release
	}
	sl.current = true
	s.slabs[k] = sl
	s.mu.Unlock()
	return sl, nil
}

// SlabSize is the size of the slab allocated for bytes: slabSize.
func SlabSize(bytes int) int { return slabSize(bytes) }

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

// keep marks sl as used by a call captured into a caller's graph.
func (s *slabTable) keep(sl *slab) {
	s.mu.Lock()
	sl.kept = true
	s.mu.Unlock()
}

// release drops a call's hold on sl; a slab no call uses is retired and
// forgotten (the key's next call allocates afresh: the call caches keep
// calls, and so slabs, while a caller repeats them).
func (s *slabTable) release(k Key, sl *slab) {
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
	kept := sl.kept
	s.mu.Unlock()
	s.pool.retired.add(region{sl.mem, sl.bytes}, kept)
}

// close refuses later acquires. Slabs still held are retired by their last
// release.
func (s *slabTable) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// counts returns the slabs of a kind in use, and those allocated so far.
func (s *slabTable) counts(kind Kind) (live, allocs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.slabs {
		if k.Kind == kind {
			live++
		}
	}
	return live, s.allocs[kind]
}
