package hostpath

import (
	"cmp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// ForwardHost's spare results (ForwardFullHost's too: one pool, results
// of one shape are interchangeable). A result made with make costs a
// zeroing pass over every byte on one core (heap memory Go reuses), or a
// page fault per 4 KiB page (memory new from the OS): for the 137 MB of o
// and ht of a 7,896-token prefill, ForwardHost called back to back took
// 22.8 ms on the H200 against 14.1 ms for ForwardHostInto, which reuses
// the caller's result (docs/PERF.md), because that pass, one goroutine's
// work, was not done when the next call needed its result. So:
//
//   - results are allocated without the zeroing pass (makeNoZero; a call
//     overwrites every element before it hands the result over), which
//     makes a result on reused heap memory, the steady state, cost next to
//     nothing;
//   - their pages are faulted in on every core, in pieces (touchPages,
//     touchWorkers), so memory fresh from the OS costs its page faults
//     divided among the cores, not on one;
//   - once a call has handed its result to the caller, the result of the
//     next call of the same shape (a spare) is prepared so, while the
//     caller does whatever it does between calls; the next call of that
//     shape takes it. A call that finds no spare starts preparing its own
//     result at its start, while its inputs convert;
//   - a call whose result is not ready when it needs it (calls back to
//     back: the spare is prepared during the call) joins the preparation
//     on all cores, which are otherwise idle while its kernel runs and the
//     first output piece copies back (resultPool.result), rather than
//     waiting for one goroutine.
//
// Memory: one spare per shape, for the spareShapes shapes used last, at
// most spareBytes in all; a result larger than spareBytes gets none. A
// spare is the result of one call (o, and ht with a final state): the size
// of the call's v input, plus ht. While the caller holds the result of a
// call and the pool its spare, that shape's result memory is doubled (and
// counts toward the Go heap's GOGC and GOMEMLIMIT accounting). When
// shapes change on every call, spares would be made and thrown away unused:
// after spareShapes of them in a row, a shape gets a spare only from its
// second call on (one that finds no spare and was seen among the last
// spareShapes shapes). A call that finds no spare prepares its own result
// the same way; the pool does not keep it (it is the call's, then the
// caller's), and Close waits for its preparation as for the spares'.

const (
	spareShapes = 4       // shapes that keep a spare, the least recently used dropped first
	spareBytes  = 1 << 30 // bytes of all spares together, and the largest result that gets one
)

// A spare is prepared in two steps: its slices are allocated without
// zeroing, then one element per 4 KiB page is written, so that the
// kernel's page faults (and its zeroing of each new page) on memory fresh
// from the OS happen before the call that takes the spare, not inside it.
// The writes are cut into pieces of touchChunk elements that several
// goroutines take in turn: page faults on different pages proceed in
// parallel. On the 2-core development VM (BenchmarkPrepareResult, 137 MB),
// memory fresh from the OS took 52 ms with make and one goroutine, 54 ms
// without the zeroing on one goroutine, 28 ms on two; on reused heap memory
// 10 ms with make (the zeroing), 0.3-0.5 ms without (the writes find their
// pages mapped). Transparent huge pages (madvise MADV_HUGEPAGE on the
// result) cut the faults of fresh memory further (12 ms on two
// goroutines) but are not used: the advice stays on the address range
// after the result is freed, so it changes how later, unrelated heap
// memory there faults, and khugepaged may then fill in memory Go's
// scavenger returned (the reason the Go runtime stopped advising its
// heap); on the VM it also made calls back to back slower while the heap
// grew (docs/PERF.md).

// touchStride is the distance, in float32 elements, between the writes
// that fault a spare's pages in: 4 KiB, the smallest page the kernel maps.
// With larger pages (transparent huge pages, 64 KiB arm64 pages) most
// writes find their page mapped already and cost a store each.
const touchStride = pageBytes / 4

const pageBytes = 4096

// touchChunk is the number of elements of one piece of a spare's page
// writes: 4 MiB, 1,024 pages of 4 KiB; a goroutine takes one piece at a
// time, and looks at the spare's stop flag between pieces.
const touchChunk = 1 << 20

// touchPages writes 0 to one element of every 4 KiB page that x overlaps:
// its first element, and the first element of every later page (the
// element at the page's start, since elements are 4-byte aligned).
func touchPages(x []float32) {
	if len(x) == 0 {
		return
	}
	x[0] = 0
	first := (pageBytes - int(uintptr(unsafe.Pointer(&x[0]))%pageBytes)) % pageBytes / 4
	for i := first; i < len(x); i += touchStride {
		x[i] = 0
	}
}

// resultShape is the shape of a result: the lengths of O and Ht (0 without
// a final state). Results of one shape are interchangeable.
type resultShape struct{ o, ht int }

func (s resultShape) bytes() int { return 4 * (s.o + s.ht) }

// resultShapeOf returns the shape of the result of a call laid out as l.
func resultShapeOf(l *Layout) resultShape {
	var s resultShape
	for _, o := range l.out {
		if o.id == tensorO {
			s.o = o.t.Elems()
		} else {
			s.ht = o.t.Elems()
		}
	}
	return s
}

// resultPool keeps ForwardHost's spare results; the zero value is ready.
// take hands a spare to exactly one caller, after which the pool neither
// keeps nor writes it; refill starts the next; close drops the spares and
// waits for every preparation.
type resultPool struct {
	mu     sync.Mutex
	closed bool
	recent []*shapeEntry // most recently used first, at most spareShapes
	wasted int           // spares dropped unused since one was last taken
	wg     sync.WaitGroup

	// Counters, for tests and benchmarks.
	hits    atomic.Int64 // takes that found a spare (ready or not)
	misses  atomic.Int64 // takes that found none
	waited  atomic.Int64 // spares not ready when their taker needed them
	made    atomic.Int64 // preparations of spares started
	dropped atomic.Int64 // spares dropped unused (evicted, or at close)

	// Tests and benchmarks: alloc, when set, replaces makeNoZero;
	// maxBytes, when set, replaces spareBytes; workers, when > 0, replaces
	// touchWorkers(); touched, when set, is called with each piece's
	// index before its pages are written.
	alloc    func(n int) []float32
	maxBytes int
	workers  int
	touched  func(piece int)
}

// shapeEntry is a recently used shape and its spare, nil when there is
// none (taken, not made, or dropped).
type shapeEntry struct {
	shape resultShape
	spare *spare
}

// spare is one result being prepared or ready. The preparing goroutine
// sets o, ht and pieces, then closes allocated; from then on any goroutine
// may take pieces (touch), and the one that finishes the last closes done.
// Once done is closed nothing writes o or ht until a taker has them.
type spare struct {
	o, ht     []float32
	pieces    []touchPiece
	allocated chan struct{}
	done      chan struct{}
	next      atomic.Int64 // pieces taken
	left      atomic.Int64 // pieces not finished
	stop      atomic.Bool  // skip the pieces not yet taken: dropped, or its call failed
	own       bool         // a call's own result (start), not a spare

	touched func(piece int) // the pool's, for tests
}

// touchPiece is elements [lo, hi) of a spare's o (x 0) or ht (x 1).
type touchPiece struct{ x, lo, hi int }

func newSpare() *spare {
	return &spare{allocated: make(chan struct{}), done: make(chan struct{})}
}

// touchWorkers is the number of goroutines that fault a spare's pages in:
// every core's. Between calls the cores are idle; when the next call
// comes at once, its conversions share the cores with them (Go's scheduler
// runs both), and the call joins the preparation once its kernel is
// queued.
func touchWorkers() int { return runtime.GOMAXPROCS(0) }

func (p *resultPool) touchWorkers() int { return cmp.Or(p.workers, touchWorkers()) }

// fresh returns, for a ForwardHost call laid out as l, the function that
// gives the call's result slices (in res, as l.results does) once the
// kernel is queued, and the one to call when the call ends, with its error.
// The slices are the spare of the call's shape, or else a result prepared
// the same way, started now: allocated without zeroing and its pages
// faulted in on several goroutines while the inputs convert and copy. A
// call that succeeds starts the next spare of its shape.
func (p *resultPool) fresh(l *Layout, res *Result) (results func() [][]float32, end func(error)) {
	shape := resultShapeOf(l)
	sp := p.take(shape)
	if sp == nil {
		sp = p.start(shape)
	}
	results = func() [][]float32 {
		res.O, res.Ht = p.result(sp)
		return l.results(res)
	}
	end = func(err error) {
		if err != nil {
			sp.stop.Store(true) // unused after an error: no need to fault its pages in
			return
		}
		p.refill(shape)
	}
	return results, end
}

// find returns the index of shape in p.recent, or -1; p.mu held.
func (p *resultPool) find(shape resultShape) int {
	return slices.IndexFunc(p.recent, func(e *shapeEntry) bool { return e.shape == shape })
}

// front moves p.recent[i] to the front; p.mu held.
func (p *resultPool) front(i int) *shapeEntry {
	e := p.recent[i]
	copy(p.recent[1:i+1], p.recent[:i])
	p.recent[0] = e
	return e
}

// take returns the spare of shape, ready or still being prepared, and
// forgets it; nil when there is none. Pass it to result.
func (p *resultPool) take(shape resultShape) *spare {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := -1
	if !p.closed {
		i = p.find(shape)
	}
	if i < 0 || p.recent[i].spare == nil {
		p.misses.Add(1)
		return nil
	}
	e := p.front(i)
	sp := e.spare
	e.spare = nil
	p.wasted = 0
	p.hits.Add(1)
	return sp
}

// result returns the slices of a taken spare (or of a call's own result
// from start), once every page is faulted in. When some are not yet, the
// caller joins their preparation: it takes the pieces no goroutine has
// taken yet, on every core (touchWorkers), then waits for the pieces other
// goroutines hold (a piece is at most touchChunk elements: a short wait).
// Its kernel and copies run meanwhile; the cores would otherwise wait for
// the first output piece. No goroutine writes the slices once result
// returns.
func (p *resultPool) result(sp *spare) (o, ht []float32) {
	select {
	case <-sp.done:
		return sp.o, sp.ht
	default:
	}
	if !sp.own {
		p.waited.Add(1)
	}
	<-sp.allocated
	if left := len(sp.pieces) - int(sp.next.Load()); left > 0 {
		var wg sync.WaitGroup
		for range min(p.touchWorkers(), left) - 1 {
			wg.Go(sp.touch)
		}
		sp.touch()
		wg.Wait()
	}
	<-sp.done
	return sp.o, sp.ht
}

// refill starts preparing a spare of shape, the shape of a result just
// handed to a caller, unless the shape has one, it is too large, the pool
// is closed, or spares are going to waste and shape was not seen recently.
func (p *resultPool) refill(shape resultShape) {
	if shape.bytes() > p.limit() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	var e *shapeEntry
	if i := p.find(shape); i >= 0 {
		e = p.front(i)
		if e.spare != nil {
			return // a concurrent call of the shape refilled it
		}
	} else {
		e = &shapeEntry{shape: shape}
		p.recent = slices.Insert(p.recent, 0, e)
		if p.wasted >= spareShapes {
			p.trim()
			return
		}
	}
	sp := newSpare()
	sp.touched = p.touched
	e.spare = sp
	p.made.Add(1)
	p.wg.Go(func() { p.prepare(sp, shape) })
	p.trim()
}

// trim drops the shapes beyond spareShapes, and the spares of the least
// recently used shapes while all spares together exceed spareBytes; p.mu
// held.
func (p *resultPool) trim() {
	total, limit := 0, p.limit()
	for i, e := range p.recent {
		if e.spare == nil {
			continue
		}
		if b := e.shape.bytes(); i >= spareShapes || total+b > limit {
			p.drop(e)
		} else {
			total += b
		}
	}
	if len(p.recent) > spareShapes {
		clear(p.recent[spareShapes:])
		p.recent = p.recent[:spareShapes]
	}
}

func (p *resultPool) limit() int { return cmp.Or(p.maxBytes, spareBytes) }

// drop forgets the spare of e; its preparation, if running, stops
// touching pages. p.mu held.
func (p *resultPool) drop(e *shapeEntry) {
	e.spare.stop.Store(true)
	e.spare = nil
	p.wasted++
	p.dropped.Add(1)
}

// start begins the preparation of a result of shape for a call that
// found no spare; the pool does not keep it. After close, the result is
// allocated at once and its pages left to fault in as the call writes
// them (no call runs after a Runtime's Close; only tests get here).
func (p *resultPool) start(shape resultShape) *spare {
	sp := newSpare()
	sp.touched, sp.own = p.touched, true
	p.mu.Lock()
	closed := p.closed
	if !closed {
		p.wg.Add(1) // under p.mu: close's Wait comes after it, or sees closed
	}
	p.mu.Unlock()
	if closed {
		sp.stop.Store(true)
		p.prepare(sp, shape)
		return sp
	}
	go func() {
		defer p.wg.Done()
		p.prepare(sp, shape)
	}()
	return sp
}

// prepare allocates a spare's slices, cuts them into pieces and touches
// them on touchWorkers goroutines (this one included), each piece taken
// by one; it returns when every piece is taken. The helper goroutines it
// starts are counted in p.wg, as the goroutine running prepare is.
func (p *resultPool) prepare(sp *spare, shape resultShape) {
	alloc := p.alloc
	if alloc == nil {
		alloc = makeNoZero
	}
	sp.o = alloc(shape.o)
	if shape.ht > 0 {
		sp.ht = alloc(shape.ht)
	}
	sp.pieces = touchPieces(len(sp.o), len(sp.ht))
	sp.left.Store(int64(len(sp.pieces)))
	close(sp.allocated)
	if len(sp.pieces) == 0 {
		close(sp.done)
		return
	}
	for range min(p.touchWorkers(), len(sp.pieces)) - 1 {
		p.wg.Go(sp.touch)
	}
	sp.touch()
}

// touchPieces cuts a result of o and ht elements into pieces of
// touchChunk elements, in order, o first.
func touchPieces(o, ht int) []touchPiece {
	var ps []touchPiece
	for x, n := range []int{o, ht} {
		for lo := 0; lo < n; lo += touchChunk {
			ps = append(ps, touchPiece{x, lo, min(lo+touchChunk, n)})
		}
	}
	return ps
}

// touch takes pieces of sp until none is left, and faults each one's
// pages in (or skips it once sp is stopped). The goroutine that finishes
// the last piece closes done. Call it after allocated is closed.
func (sp *spare) touch() {
	for {
		i := int(sp.next.Add(1)) - 1
		if i >= len(sp.pieces) {
			return
		}
		if !sp.stop.Load() {
			if sp.touched != nil {
				sp.touched(i)
			}
			pc := sp.pieces[i]
			touchPages([][]float32{sp.o, sp.ht}[pc.x][pc.lo:pc.hi])
		}
		if sp.left.Add(-1) == 0 {
			close(sp.done)
		}
	}
}

// settle waits until no spare kept by the pool is being prepared (tests,
// benchmarks).
func (p *resultPool) settle() {
	p.mu.Lock()
	var pending []chan struct{}
	for _, e := range p.recent {
		if e.spare != nil {
			pending = append(pending, e.spare.done)
		}
	}
	p.mu.Unlock()
	for _, c := range pending {
		<-c
	}
}

// close drops the spares and waits for every preparation, including those
// of spares taken and not yet ready; later refills start none.
func (p *resultPool) close() {
	p.mu.Lock()
	p.closed = true
	for _, e := range p.recent {
		if e.spare != nil {
			p.drop(e)
		}
	}
	p.recent = nil
	p.mu.Unlock()
	p.wg.Wait()
}
