package gdn

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
)

// ForwardHost's spare results (ForwardFullHost's too: one pool, results
// of one shape are interchangeable). A fresh result costs a zeroing pass over
// every byte (heap memory Go reuses) or a page fault per page (memory new
// from the OS), on one core: for the 137 MB of o and ht of a 7,896-token
// prefill, ForwardHost took 21.5 ms on the H200 against 14 ms for
// ForwardHostInto, which reuses the caller's result (docs/PERF.md). So once
// a call has handed its result to the caller, a goroutine allocates the
// next result of the same shape and faults its pages in, while the caller
// does whatever it does between calls; the next call of that shape takes
// it. A call that comes before the spare is ready still takes it, and
// waits for it only once its kernel has run, and no longer than it would
// have waited for the allocation of a result of its own (see
// resultPool.result).
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
// spareShapes shapes).

const (
	spareShapes = 4       // shapes that keep a spare, the least recently used dropped first
	spareBytes  = 1 << 30 // bytes of all spares together, and the largest result that gets one
)

// touchStride is the distance, in float32 elements, between the writes
// that fault a spare's pages in: 4 KiB, the smallest page the kernel maps.
// Go's allocation already reads as zero (zeroed by Go, or fresh from the
// kernel, which zeroes each page on its first write), so one write per
// page is enough to move the kernel's fault and zeroing off the critical
// path; writing every element would be a second pass over the memory for
// nothing. With larger pages (transparent huge pages, 64 KiB arm64 pages)
// most writes find their page mapped already and cost a store each.
const touchStride = 4096 / 4

// touchChunk is how many elements a preparation touches between looks at
// its stop flag: 4 MiB, 1,024 pages of 4 KiB.
const touchChunk = 1 << 20

// resultShape is the shape of a result: the lengths of O and Ht (0 without
// a final state). Results of one shape are interchangeable.
type resultShape struct{ o, ht int }

func (s resultShape) bytes() int { return 4 * (s.o + s.ht) }

// resultShapeOf returns the shape of the result of a call laid out as l.
func resultShapeOf(l *hostLayout) resultShape {
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
	made    atomic.Int64 // preparations started
	dropped atomic.Int64 // spares dropped unused (evicted, or at close)

	// Tests: alloc, when set, replaces make([]float32, n); maxBytes, when
	// set, replaces spareBytes.
	alloc    func(n int) []float32
	maxBytes int
}

// shapeEntry is a recently used shape and its spare, nil when there is
// none (taken, not made, or dropped).
type shapeEntry struct {
	shape resultShape
	spare *spare
}

// spare is one result being prepared or ready: o and ht are set by the
// preparing goroutine before it closes done.
type spare struct {
	o, ht []float32
	done  chan struct{}
	stop  atomic.Bool // stop touching pages: the taker needs it now, or it was dropped
}

// fresh returns, for a ForwardHost call laid out as l, the function that
// gives the call's result slices (in res, as l.results does) once the
// kernel is queued, and the one to call when the call ends, with its error.
// The slices are the spare of the call's shape, or else new ones,
// allocated on a goroutine of their own while the inputs convert and copy:
// zeroing a new result (over 100 MB for a long prompt) is a
// single-threaded pass that would otherwise come after the kernel. A call
// that succeeds starts the next spare of its shape.
func (p *resultPool) fresh(l *hostLayout, res *HostCoreResult) (results func() [][]float32, end func(error)) {
	shape := resultShapeOf(l)
	if sp := p.take(shape); sp != nil {
		results = func() [][]float32 {
			res.O, res.Ht = p.result(sp)
			return l.results(res)
		}
		end = func(err error) {
			sp.stop.Store(true) // unused after an error: no need to fault its pages in
			if err == nil {
				p.refill(shape)
			}
		}
		return results, end
	}
	var dsts [][]float32
	allocated := make(chan struct{})
	go func() {
		defer close(allocated)
		dsts = l.results(res)
	}()
	results = func() [][]float32 {
		<-allocated
		return dsts
	}
	end = func(err error) {
		<-allocated // after an early error: the goroutine ends with the call
		if err == nil {
			p.refill(shape)
		}
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

// result returns the slices of a taken spare. One not ready yet stops
// touching its pages (those left fault in as the caller writes them, as
// in a result allocated by the call) and is returned once allocated: its
// allocation began before its taker's call did, so this waits less than
// allocating anew would.
func (p *resultPool) result(sp *spare) (o, ht []float32) {
	select {
	case <-sp.done:
	default:
		p.waited.Add(1)
		sp.stop.Store(true)
		<-sp.done
	}
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
	sp := &spare{done: make(chan struct{})}
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

// prepare allocates a spare's slices and writes one element per page.
func (p *resultPool) prepare(sp *spare, shape resultShape) {
	defer close(sp.done)
	alloc := p.alloc
	if alloc == nil {
		alloc = func(n int) []float32 { return make([]float32, n) }
	}
	sp.o = alloc(shape.o)
	if shape.ht > 0 {
		sp.ht = alloc(shape.ht)
	}
	for _, x := range [][]float32{sp.o, sp.ht} {
		for lo := 0; lo < len(x) && !sp.stop.Load(); lo += touchChunk {
			for i := lo; i < min(lo+touchChunk, len(x)); i += touchStride {
				x[i] = 0
			}
		}
		// The stride from element 0 can step over the last page when
		// the slice does not start on a page boundary.
		if len(x) > 0 && !sp.stop.Load() {
			x[len(x)-1] = 0
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
