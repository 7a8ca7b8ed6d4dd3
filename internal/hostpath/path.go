// Package hostpath runs forward calls on host slices, as a layer on top of
// a Runtime's device forwards: it lays a call's tensors out in one block,
// converts the inputs to their device dtypes on every core while pieces
// copy, runs the device forward, and widens the outputs back piece by
// piece behind events. It keeps what makes a repeated call cheap: a pinned
// staging set (staging.go) and spare results prepared between calls
// (resultpool.go).
package hostpath

import (
	"cmp"
	"fmt"
	"sync"
	"unsafe"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/problem"
)

// Forwarder is the device forward a host call runs (launch.Launcher's).
// The host path calls it with the Runtime's guard held, so it must not take
// that guard again. The arguments travel by value: through an interface a
// pointer would escape, and Forward must not allocate.
type Forwarder interface {
	Forward(a problem.Core, s uintptr) error
	ForwardFull(a problem.Full, s uintptr) error
}

// Guard is the Runtime's Close guard: Enter fails once the Runtime is
// closed, and Close waits for every Enter to Leave. The Runtime holds it
// around its calls of Forward and Upload; a Block, used later, takes it
// itself.
type Guard interface {
	Enter() error
	Leave()
}

// Path is a Runtime's host path: its staging set and spare results, on
// the Runtime's context, forwards and guard. Safe for concurrent use.
type Path struct {
	ctx     *driver.Context
	dev     Forwarder
	guard   Guard
	staging staging
	spares  resultPool
}

// New returns the host path of a Runtime.
func New(ctx *driver.Context, dev Forwarder, guard Guard) *Path {
	return &Path{ctx: ctx, dev: dev, guard: guard}
}

// Close frees the staging set and drops the spare results, waiting for
// those being prepared. The Runtime calls it from Close, holding its
// guard for writing: no host call is in flight.
func (h *Path) Close() {
	h.staging.free(h.ctx)
	h.spares.close()
}

// SpareCounts waits until no spare result is being prepared and returns
// the pool's counters: calls that took a spare, calls that found none, and
// calls that took one before it was ready (tests and benchmarks).
func (h *Path) SpareCounts() (hits, misses, waited int64) {
	h.spares.settle()
	return h.spares.hits.Load(), h.spares.misses.Load(), h.spares.waited.Load()
}

// Forward runs the host call laid out by l into res and waits for it; the
// caller holds the Runtime's guard. fresh (gdn's ForwardHost and
// ForwardFullHost: res is new and empty) takes the result slices from the
// spares: a spare prepared since the last call of the shape, or slices
// prepared while the inputs convert; else res's slices are reused where
// large enough.
func (h *Path) Forward(l *Layout, res *Result, fresh bool) error {
	set, err := h.staging.take(h.ctx, l.total)
	if err != nil {
		return fmt.Errorf("gdn: allocate %d bytes: %w", l.total, err)
	}
	defer h.staging.put(h.ctx, set)
	if !fresh {
		return h.run(l, set, func() [][]float32 { return l.results(res) })
	}
	results, end := h.spares.fresh(l, res)
	err = h.run(l, set, results)
	end(err)
	return err
}

// run runs one host call through a staging set, everything on the
// legacy default stream, which orders the copies, the NaN fill, the kernel
// and the copies back one after the other. results returns the slices the
// outputs are widened into (res's, fitted to the outputs); run
// calls it once the kernel is queued.
func (h *Path) run(l *Layout, set *stagingSet, results func() [][]float32) (err error) {
	ctx, legacy := h.ctx, h.ctx.WrapStream(0)
	host := unsafe.Pointer(&set.host[0])
	// The copies read and write set.host after their calls return: once one
	// is queued, the set must not go back to the pool (where the next call
	// writes it) before the stream has drained, error or not.
	defer func() {
		if err != nil {
			legacy.Synchronize()
		}
	}()

	// Upload: each piece of an input is queued as soon as it is converted
	// (by the goroutine that finished it), and copies while the next pieces
	// convert. cu_seqlens, tiny, goes first.
	var mu sync.Mutex
	var upErr error
	upload := func(off, bytes int) {
		if e := ctx.CopyToDeviceAsync(set.dev.Offset(off), unsafe.Add(host, off), bytes, nil); e != nil {
			mu.Lock()
			upErr = cmp.Or(upErr, e)
			mu.Unlock()
		}
	}
	l.encodeInts(set.host)
	for _, s := range l.in {
		if s.ints != nil {
			upload(s.off, s.t.Bytes)
		}
	}
	in := cutPieces(l.in, pieceBytes)
	enc := l.encodeRun(set.host, in)
	enc.done = func(p int) { upload(in[p].off, in[p].bytes) }
	enc.run()
	if upErr != nil {
		return fmt.Errorf("gdn: upload: %w", upErr)
	}

	if err := l.poisonOutputs(ctx, set.dev); err != nil {
		return fmt.Errorf("gdn: %w", err)
	}
	if l.full {
		err = h.dev.ForwardFull(*l.fullArgs(set.dev), 0)
	} else {
		err = h.dev.Forward(*l.coreArgs(set.dev), 0)
	}
	if err != nil {
		return err
	}

	// Download: every piece of the outputs is queued at once, an event
	// after each; a piece is widened as soon as its event has passed, while
	// the later ones copy. The last event passing means the stream has run
	// everything of this call.
	out := cutPieces(l.out, pieceBytes)
	evs, err := set.eventsFor(ctx, len(out))
	if err != nil {
		return fmt.Errorf("gdn: download: %w", err)
	}
	for i, p := range out {
		if err := ctx.CopyToHostAsync(unsafe.Add(host, p.off), set.dev.Offset(p.off), p.bytes, nil); err != nil {
			return fmt.Errorf("gdn: download: %w", err)
		}
		if err := evs[i].Record(nil); err != nil {
			return fmt.Errorf("gdn: download: %w", err)
		}
	}
	dec := l.decodeRun(set.host, results(), out)
	dec.ready = func(p int) error { return evs[p].Synchronize() }
	if err := dec.run(); err != nil {
		return fmt.Errorf("gdn: forward: %w", err)
	}
	return nil
}

// orDefault returns d, or def when d is unset.
func orDefault(d, def dtype.Dtype) dtype.Dtype {
	if d == dtype.Invalid {
		return def
	}
	return d
}
