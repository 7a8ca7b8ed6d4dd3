package launch

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/internal/scratch"
	"github.com/gdnjit/gdn/kernsrc"
)

// callEntry is one prepared call of the core kernel: its plan, its
// parameter block (encoded tensor maps included) in Go and in C memory, the
// kernel's entry point once resolved, and the CUDA graph of the call once
// captured. Everything in it is a function of its key, so an entry serves
// every call with that key, from any goroutine.
type callEntry struct {
	key    hopperCall
	plan   plan.Plan
	block  [kernsrc.HopperParamsBytes]byte
	params *driver.KernelParams // block, packed for cuLaunchKernel; nil in the CPU tests

	fn    atomic.Pointer[driver.Function] // the plan's kernel, set on the first launch
	split *splitCall                      // a sequence-parallel plan's passes, or nil
	graph callGraph

	holdState // guarded by the cache's heldCache.mu

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
	plans  *plan.Cache
	sms    int        // of the device, for the split decision
	knobs  plan.Knobs // of tests and benchmarks
	encode tiledEncoder
	// pack copies a block into C memory for the driver; nil (CPU tests)
	// leaves callEntry.params nil.
	pack func(block []byte) (*driver.KernelParams, error)
	// pool gives split plans their scratch memory; nil (CPU tests) never
	// splits.
	pool *scratch.Pool

	held heldCache[hopperCall, *callEntry] // callCacheLimit calls, splitScratchLimit bytes of scratch
}

func newCallCache(sms int, k plan.Knobs, encode tiledEncoder, pack func([]byte) (*driver.KernelParams, error), pool *scratch.Pool) *callCache {
	c := &callCache{plans: plan.NewCache(sms, k.Variant), sms: sms, knobs: k, encode: encode, pack: pack, pool: pool}
	c.held.limit, c.held.scratchLimit = callCacheLimit, splitScratchLimit
	return c
}

// scratchBytes is the split scratch e holds (0 for an unsplit call).
func (e *callEntry) scratchBytes() int {
	if e.split == nil {
		return 0
	}
	return e.split.lease.Bytes()
}

// packParams packs a Hopper parameter block (64-byte aligned: it holds
// tensor maps) as the kernel's only argument, in C memory.
func packParams(block []byte) (*driver.KernelParams, error) {
	return driver.NewKernelParams(new(driver.Args).Bytes(block, 64))
}

// prepare validates a (errors are *gdnerr.ArgError naming the argument)
// and returns its prepared call, held until release. A cached call costs
// the validation and one map lookup, and allocates nothing.
func (c *callCache) prepare(a *problem.Core) (*callEntry, error) {
	if a == nil {
		return nil, gdnerr.Argf("args", "nil *CoreArgs")
	}
	args := *a // what is validated is what is launched, whatever the caller does meanwhile
	p, err := problem.ValidateCore(&args)
	if err != nil {
		return nil, err
	}
	key := newHopperCall(&args, p)
	e, found, collided, err := c.held.get(key, p.Seqs)
	switch {
	case err != nil:
		return nil, err
	case found:
		return e, nil
	}
	if e, err = c.build(key, p); err != nil {
		return nil, err
	}
	if collided {
		// Two boundary sets with one hash (the key holds a 64-bit hash of
		// them): this call gets an entry of its own, used once.
		alone(&e.holdState)
		return e, nil
	}
	// Two goroutines preparing the same call at once both build it; the
	// second to store it uses the first's entry and frees its own.
	return c.held.put(key, e, p.Seqs)
}

// sameSeqs reports whether e was prepared for these sequence boundaries:
// a split call's tables hold them, so a hash match is checked exactly.
func (e *callEntry) sameSeqs(seqs []int) bool {
	return e.split == nil || slices.Equal(e.split.seqs, seqs)
}

// build prepares a call: plan (split or not), tensor maps, C copy, scratch.
func (c *callCache) build(key hopperCall, p problem.Problem) (*callEntry, error) {
	tile, err := c.plans.Tile(p)
	if err != nil {
		return nil, err
	}
	e := &callEntry{key: key, plan: tile}
	if err := key.params(c.encode, &e.block); err != nil {
		return nil, err
	}
	if c.pool != nil {
		var sp plan.Split
		if e.plan, sp, err = plan.WithSplit(p, tile, c.sms, c.knobs); err != nil {
			return nil, err
		}
		if sp.SegChunks > 0 {
			if e.split, err = newSplitCall(c.pool, c.encode, c.pack, key, p, sp); err != nil {
				return nil, err
			}
		}
	}
	if e.plan.Variant, err = statesVariant(key, e.plan.Variant); err != nil {
		e.free()
		return nil, err
	}
	if c.pack != nil {
		if e.params, err = c.pack(e.block[:]); err != nil {
			e.free()
			return nil, fmt.Errorf("gdn: kernel parameters: %w", err)
		}
	}
	return e, nil
}

// statesVariant is the kernel of a call's plan: v itself, or where the
// call's states are in one of the serving layer's formats (a pool, [V,K])
// or it keeps checkpoints, its states variant (kernsrc.HopperStatesVariant), the same kernel with
// the code for them. A split plan's output and early passes run it too;
// its transfer pass touches only its own states.
func statesVariant(key hopperCall, v kernsrc.Variant) (kernsrc.Variant, error) {
	if key.stateFlags() == 0 && key.ckpt == 0 {
		return v, nil
	}
	if key.ckpt != 0 && key.fused {
		// The fused states variants write no checkpoints (their consumers
		// have no registers to spare): the full forward runs its
		// preparation kernel instead (fullcall.go).
		return kernsrc.Variant{}, fmt.Errorf("gdn: checkpoints with the core's fused preparation (%s)", v.Name)
	}
	return kernsrc.HopperStatesVariant(v)
}

// release drops a call's hold on e (see heldCache.release).
func (c *callCache) release(e *callEntry) { c.held.release(e) }

// close frees every entry (those held by a call, when released) and makes
// later prepares fail with ErrClosed.
func (c *callCache) close() { c.held.close() }

// len returns the number of cached calls.
func (c *callCache) len() int { return c.held.len() }
