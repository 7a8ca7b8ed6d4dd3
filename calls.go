package gdn

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/kernsrc"
)

// callEntry is one prepared call of the core kernel: its plan, its
// parameter block (encoded tensor maps included) in Go and in C memory, the
// kernel's entry point once resolved, and the CUDA graph of the call once
// captured. Everything in it is a function of its key, so an entry serves
// every call with that key, from any goroutine.
type callEntry struct {
	key    hopperCall
	plan   Plan
	block  [kernsrc.HopperParamsBytes]byte
	params *driver.KernelParams // block, packed for cuLaunchKernel; nil in the CPU tests

	fn    atomic.Pointer[driver.Function] // the plan's kernel, set on the first launch
	split *splitCall                      // a sequence-parallel plan's passes, or nil
	graph callGraph

	// Guarded by callCache.mu.
	refs    int  // calls holding the entry
	evicted bool // out of the map: freed when refs drops to 0

	freed atomic.Bool
}

// free releases the entry's graph and C memory. It runs once, when the
// entry is out of the cache and no call holds it.
func (e *callEntry) free() {
	if e == nil || e.freed.Swap(true) {
		return
	}
	if x := e.graph.exec.Swap(nil); x != nil {
		x.Destroy()
	}
	e.params.Free()
	e.split.free()
}

// callCacheLimit bounds the prepared calls a Runtime keeps: each holds about
// 2 KB of host memory and at most one graph exec.
const callCacheLimit = 256

// splitScratchLimit bounds the device memory that the split calls in the
// cache hold (about 192 KB per segment and head each): a caller whose every
// call is a new argument set (packed sequences with other boundaries) must
// not pile up 256 calls' scratch. The newest call is kept whatever its size.
const splitScratchLimit = 2 << 30

// callCache is Forward's host path: it validates arguments and maps them to
// a prepared call, so that a call repeated with the same arguments (same
// buffers, shapes, dtypes and scale) allocates nothing and encodes no tensor
// map. Entries are reference counted: an entry evicted (the cache is full)
// or dropped by close while a call holds it is freed when that call
// releases it, so a launch never reads freed parameters or graphs.
type callCache struct {
	plans  *planCache
	encode tiledEncoder
	// pack copies a block into C memory for the driver; nil (CPU tests)
	// leaves callEntry.params nil.
	pack  func(block []byte) (*driver.KernelParams, error)
	limit int
	// dev gives split plans their scratch memory; nil (CPU tests) never
	// splits. segChunks is Options.SegmentChunks.
	dev          scratchDevice
	grave        *scratchGraveyard
	segChunks    int
	scratchLimit int // splitScratchLimit

	mu      sync.Mutex
	entries map[hopperCall]*callEntry
	scratch int // bytes of split scratch held by entries in the map
	closed  bool
}

func newCallCache(plans *planCache, encode tiledEncoder, pack func([]byte) (*driver.KernelParams, error)) *callCache {
	return &callCache{plans: plans, encode: encode, pack: pack, limit: callCacheLimit, scratchLimit: splitScratchLimit,
		entries: map[hopperCall]*callEntry{}}
}

// scratchBytes is the split scratch e holds (0 for an unsplit call).
func (e *callEntry) scratchBytes() int {
	if e.split == nil {
		return 0
	}
	return e.split.memBytes
}

// evictLocked takes e out of the map (c.mu held); it returns e when no call
// holds it, to be freed once c.mu is released.
func (c *callCache) evictLocked(k hopperCall, e *callEntry) *callEntry {
	delete(c.entries, k)
	c.scratch -= e.scratchBytes()
	e.evicted = true
	if e.refs == 0 {
		return e
	}
	return nil
}

// packParams packs a Hopper parameter block (64-byte aligned: it holds
// tensor maps) as the kernel's only argument, in C memory.
func packParams(block []byte) (*driver.KernelParams, error) {
	return driver.NewKernelParams(new(driver.Args).Bytes(block, 64))
}

// prepare validates a (errors wrap ErrInvalidArgument and name the
// argument) and returns its prepared call, held until release. A cached
// call costs the validation and one map lookup, and allocates nothing.
func (c *callCache) prepare(a *CoreArgs) (*callEntry, error) {
	if a == nil {
		return nil, argErrorf("args", "nil *CoreArgs")
	}
	args := *a // what is validated is what is launched, whatever the caller does meanwhile
	p, err := ValidateCore(&args)
	if err != nil {
		return nil, err
	}
	key := newHopperCall(&args, p)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if e, ok := c.entries[key]; ok {
		if e.sameSeqs(p.Seqs) {
			e.refs++
			c.mu.Unlock()
			return e, nil
		}
		// Two boundary sets with one hash (the key holds a 64-bit hash of
		// them): this call gets an entry of its own, used once.
		c.mu.Unlock()
		return c.createAlone(key, p)
	}
	c.mu.Unlock()
	return c.create(key, p)
}

// sameSeqs reports whether e was prepared for these sequence boundaries:
// a split call's tables hold them, so a hash match is checked exactly.
func (e *callEntry) sameSeqs(seqs []int) bool {
	return e.split == nil || slices.Equal(e.split.seqs, seqs)
}

// createAlone prepares a call outside the cache: its entry is freed when
// the call releases it.
func (c *callCache) createAlone(key hopperCall, p Problem) (*callEntry, error) {
	e, err := c.build(key, p)
	if err != nil {
		return nil, err
	}
	e.refs, e.evicted = 1, true
	return e, nil
}

// create prepares a call not in the cache: plan, tensor maps, C copy. Two
// goroutines preparing the same call at once both build it; the second to
// finish uses the first's entry and frees its own.
func (c *callCache) create(key hopperCall, p Problem) (*callEntry, error) {
	e, err := c.build(key, p)
	if err != nil {
		return nil, err
	}
	var victim *callEntry
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		e.free()
		return nil, ErrClosed
	}
	if old, ok := c.entries[key]; ok {
		if !old.sameSeqs(p.Seqs) { // a hash collision (see prepare): e serves this call alone
			c.mu.Unlock()
			e.refs, e.evicted = 1, true
			return e, nil
		}
		old.refs++
		c.mu.Unlock()
		e.free()
		return old, nil
	}
	if len(c.entries) >= c.limit {
		// Evict one entry, whichever the map's randomised iteration
		// yields first: simple, and no entry is favoured over time.
		for k, v := range c.entries {
			victim = c.evictLocked(k, v)
			break
		}
	}
	// Split calls beyond the scratch limit go too, in the same order.
	var victims []*callEntry
	if sb := e.scratchBytes(); sb > 0 {
		for k, v := range c.entries {
			if c.scratch+sb <= c.scratchLimit {
				break
			}
			if v.split != nil {
				if x := c.evictLocked(k, v); x != nil {
					victims = append(victims, x)
				}
			}
		}
	}
	e.refs = 1
	c.entries[key] = e
	c.scratch += e.scratchBytes()
	c.mu.Unlock()
	victim.free()
	for _, v := range victims {
		v.free()
	}
	return e, nil
}

// build prepares a call: plan (split or not), tensor maps, C copy, scratch.
func (c *callCache) build(key hopperCall, p Problem) (*callEntry, error) {
	plan, err := c.plans.plan(p)
	if err != nil {
		return nil, err
	}
	e := &callEntry{key: key, plan: plan}
	if err := key.params(c.encode, &e.block); err != nil {
		return nil, err
	}
	if c.dev != nil {
		forced := 0
		if c.plans.variant != "" {
			forced = plan.TileWidth / 64
		}
		if sp := planSplit(p, c.plans.sms, c.segChunks, forced); sp.segChunks > 0 {
			if e.plan, err = planHopper(p, sp.consumers); err != nil {
				return nil, err
			}
			e.plan.SegmentChunks, e.plan.Segments = sp.segChunks, sp.transfer
			if e.split, err = newSplitCall(c.dev, c.grave, c.encode, c.pack, key, p, sp); err != nil {
				return nil, err
			}
		}
	}
	if c.pack != nil {
		if e.params, err = c.pack(e.block[:]); err != nil {
			e.free()
			return nil, fmt.Errorf("gdn: kernel parameters: %w", err)
		}
	}
	return e, nil
}

// release drops a call's hold on e, freeing e if it was evicted meanwhile
// and this was the last hold.
func (c *callCache) release(e *callEntry) {
	c.mu.Lock()
	e.refs--
	last := e.evicted && e.refs == 0
	c.mu.Unlock()
	if last {
		e.free()
	}
}

// close frees every entry (those held by a call, when released) and makes
// later prepares fail with ErrClosed.
func (c *callCache) close() {
	var idle []*callEntry
	c.mu.Lock()
	c.closed = true
	for k, e := range c.entries {
		if x := c.evictLocked(k, e); x != nil {
			idle = append(idle, x)
		}
	}
	c.mu.Unlock()
	for _, e := range idle {
		e.free()
	}
	if c.grave != nil {
		c.grave.close()
	}
}

// len returns the number of cached calls.
func (c *callCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
