package jit

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
)

// ErrClosed is returned by Acquire on a closed MemCache.
var ErrClosed = errors.New("jit: memory cache is closed")

// MemCache holds loaded modules, CUDA graph execs and the like (opaque
// values) by key, with reference-counted handles.
//
// Design. An authoritative map holds every live entry with its reference
// count; ristretto only decides what to evict. A value is destroyed when it
// is both out of ristretto (evicted, refused by the admission policy,
// removed, or the cache closed) and no handle to it is held, so eviction
// never unloads a module a running launch or a cached graph still uses.
// Ristretto's Set is asynchronous and may be dropped or refused: a refused
// value is still returned to the caller, stays in the map while handles to
// it are held (later Acquires share it and offer it to ristretto again) and
// is destroyed when its last handle is released. Concurrent Acquires of one
// missing key call create once; the others wait for it.
type MemCache struct {
	mu      sync.Mutex
	entries map[string]*entry
	closed  bool

	// rcMu keeps ristretto calls out of rc.Close: ristretto's Set may send
	// on a channel that Close has closed. Never taken while holding mu.
	rcMu sync.RWMutex
	rc   *ristretto.Cache[string, *slot]
}

// entry is one key's value and its life state; mu guards the mutable fields.
type entry struct {
	key   string
	ready chan struct{} // closed once create has returned
	err   error         // create's error, set before ready closes

	value   any
	cost    int64
	destroy func()

	refs      int   // handles held, plus waiters for ready
	slot      *slot // non-nil while ristretto holds (or is about to hold) the entry
	destroyed bool
}

// slot is one admission of an entry into ristretto. A fresh slot per Set
// lets a late callback about an earlier admission be told apart and ignored.
type slot struct{ e *entry }

// Handle is a reference to a cached value; the value stays alive until
// Release. A Handle is for one owner: Release it once (again is a no-op).
type Handle struct {
	m        *MemCache
	e        *entry
	released atomic.Bool
}

// Value returns the cached value, or nil after Release.
func (h *Handle) Value() any {
	if h == nil || h.released.Load() {
		return nil
	}
	return h.e.value
}

// Key returns the key the handle was acquired with.
func (h *Handle) Key() string { return h.e.key }

// Release drops the reference. The value is destroyed when this was the last
// handle and ristretto no longer holds the entry. Releasing twice is a no-op.
func (h *Handle) Release() {
	if h == nil || !h.released.CompareAndSwap(false, true) {
		return
	}
	h.m.release(h.e)
}

// NewMemCache returns a cache that keeps values of total cost up to maxCost
// (in the unit create reports, e.g. bytes of module image) before evicting.
func NewMemCache(maxCost int64) (*MemCache, error) {
	if maxCost <= 0 {
		return nil, fmt.Errorf("jit: memory cache max cost %d must be positive", maxCost)
	}
	m := &MemCache{entries: map[string]*entry{}}
	rc, err := ristretto.NewCache(&ristretto.Config[string, *slot]{
		NumCounters:        10_000, // ~10x the modules and graphs a process keeps
		MaxCost:            maxCost,
		BufferItems:        64,
		IgnoreInternalCost: true,
		// OnExit runs for every way out: eviction, refusal, replacement,
		// deletion and Clear/Close.
		OnExit: m.exit,
	})
	if err != nil {
		return nil, fmt.Errorf("jit: memory cache: %w", err)
	}
	m.rc = rc
	return m, nil
}

// Acquire returns a handle to key's value, calling create to make it when
// the cache has none. create returns the value, its cost, and destroy (may be
// nil), which runs once when the value leaves the cache and its last handle
// is released. An error from create is returned to every waiter and nothing
// is cached. Acquire on a closed cache returns ErrClosed.
func (m *MemCache) Acquire(key string, create func() (value any, cost int64, destroy func(), err error)) (*Handle, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if e, ok := m.entries[key]; ok {
		e.refs++
		m.mu.Unlock()
		<-e.ready
		if e.err != nil {
			m.release(e)
			return nil, e.err
		}
		m.touch(e)
		return &Handle{m: m, e: e}, nil
	}
	e := &entry{key: key, ready: make(chan struct{}), refs: 1}
	m.entries[key] = e
	m.mu.Unlock()

	if err := m.create(e, create); err != nil {
		return nil, err
	}
	return &Handle{m: m, e: e}, nil
}

// create runs the user's create for the new entry e and publishes the
// result; a panic in create fails the waiters and then propagates.
func (m *MemCache) create(e *entry, create func() (any, int64, func(), error)) (err error) {
	start := time.Now()
	finished := false
	defer func() {
		if !finished { // create panicked
			m.fail(e, fmt.Errorf("jit: memory cache: create for %s panicked", short(e.key)))
		}
	}()
	value, cost, destroy, err := create()
	finished = true
	if err != nil {
		m.fail(e, err)
		return err
	}
	if cost <= 0 {
		cost = 1
	}
	m.mu.Lock()
	e.value, e.cost, e.destroy = value, cost, destroy
	var s *slot
	if !m.closed && m.entries[e.key] == e { // not Removed meanwhile
		s = &slot{e: e}
		e.slot = s
	}
	m.mu.Unlock()
	close(e.ready)
	debugf("memcache: created %s (cost %d) in %s", short(e.key), cost, time.Since(start).Round(time.Microsecond))
	if s != nil {
		m.admit(s)
	}
	return nil
}

// fail publishes create's error to e's waiters and forgets e.
func (m *MemCache) fail(e *entry, err error) {
	m.mu.Lock()
	e.err = err
	e.refs-- // the creator's reference
	if m.entries[e.key] == e {
		delete(m.entries, e.key)
	}
	m.mu.Unlock()
	close(e.ready)
}

// admit offers s's entry to ristretto. A Set dropped by a full buffer counts
// as a refusal; a refusal decided later arrives through exit.
func (m *MemCache) admit(s *slot) {
	m.rcMu.RLock()
	ok := false
	if m.rc != nil {
		ok = m.rc.Set(s.e.key, s, s.e.cost)
	}
	m.rcMu.RUnlock()
	if !ok {
		m.exit(s)
	}
}

// touch records a hit with ristretto's frequency counters, and offers an
// entry that had been evicted or refused (but is still held) again.
func (m *MemCache) touch(e *entry) {
	m.mu.Lock()
	var s *slot
	if e.slot == nil && !m.closed && m.entries[e.key] == e {
		s = &slot{e: e}
		e.slot = s
	}
	m.mu.Unlock()
	if s != nil {
		m.admit(s)
		return
	}
	m.rcMu.RLock()
	if m.rc != nil {
		m.rc.Get(e.key)
	}
	m.rcMu.RUnlock()
}

// exit is ristretto's OnExit: the admission s has ended (evicted, refused,
// replaced or deleted). It is a no-op for a stale or nil slot.
func (m *MemCache) exit(s *slot) {
	if s == nil {
		return
	}
	m.mu.Lock()
	e := s.e
	if e.slot != s {
		m.mu.Unlock()
		return
	}
	e.slot = nil
	destroy := m.finish(e)
	m.mu.Unlock()
	run(destroy)
}

// release drops one reference to e.
func (m *MemCache) release(e *entry) {
	m.mu.Lock()
	e.refs--
	if e.refs < 0 {
		panic("jit: memory cache reference count below zero")
	}
	destroy := m.finish(e)
	m.mu.Unlock()
	run(destroy)
}

// finish retires e when nothing holds it any more, returning the destroy
// function to run outside the lock (nil when e lives on). Called with mu held.
func (m *MemCache) finish(e *entry) func() {
	if e.refs > 0 || e.slot != nil || e.destroyed || e.err != nil {
		return nil
	}
	select {
	case <-e.ready:
	default:
		return nil // still being created; the creator holds a reference anyway
	}
	e.destroyed = true
	if m.entries[e.key] == e {
		delete(m.entries, e.key)
	}
	if e.destroy == nil {
		return nil
	}
	key, d := e.key, e.destroy
	return func() {
		start := time.Now()
		d()
		debugf("memcache: destroyed %s in %s", short(key), time.Since(start).Round(time.Microsecond))
	}
}

// run calls f when it is not nil.
func run(f func()) {
	if f != nil {
		f()
	}
}

// Remove takes key out of the cache: the next Acquire creates a new value,
// and the current one is destroyed once its handles are released.
func (m *MemCache) Remove(key string) {
	m.mu.Lock()
	e, ok := m.entries[key]
	var destroy func()
	if ok {
		delete(m.entries, key)
		e.slot = nil
		destroy = m.finish(e)
	}
	m.mu.Unlock()
	run(destroy)
	m.rcMu.RLock()
	if m.rc != nil {
		m.rc.Del(key)
	}
	m.rcMu.RUnlock()
}

// Len returns the number of live values: cached, or evicted but still held.
func (m *MemCache) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// Close empties the cache: values no handle holds are destroyed now, the
// others when their last handle is released. Later Acquires return
// ErrClosed. Closing twice is a no-op.
func (m *MemCache) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()

	m.rcMu.Lock()
	rc := m.rc
	m.rc = nil
	m.rcMu.Unlock()
	rc.Close() // OnExit for every stored and pending entry

	m.mu.Lock()
	var destroys []func()
	for _, e := range m.entries {
		e.slot = nil // ristretto is gone; nothing it held is resident now
		if d := m.finish(e); d != nil {
			destroys = append(destroys, d)
		}
	}
	m.mu.Unlock()
	for _, d := range destroys {
		d()
	}
}

// wait blocks until ristretto has applied every buffered Set (tests).
func (m *MemCache) wait() {
	m.rcMu.RLock()
	defer m.rcMu.RUnlock()
	if m.rc != nil {
		m.rc.Wait()
	}
}
