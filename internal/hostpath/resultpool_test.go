package hostpath

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"unsafe"

	"github.com/gdnjit/gdn/dtype"
)

// smallLayout lays out a call of two packed sequences of T tokens in all,
// one query head and hv value heads, with or without the final state.
func smallLayout(t *testing.T, T, hv int, final bool) *Layout {
	t.Helper()
	h := &CoreArgs{B: 1, T: T, Hq: 1, Hv: hv, CuSeqlens: []int{0, T / 3, T}, Dtype: dtype.BF16, FinalState: final,
		Q: make([]float32, T*128), K: make([]float32, T*128), V: make([]float32, T*hv*128),
		G: make([]float32, T*hv), Beta: make([]float32, T*hv), A: make([]float32, T*hv*64)}
	l, err := NewCoreLayout(h)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// poolCounts are a pool's counters, to compare in one go.
type poolCounts struct{ hits, misses, waited, made, dropped int64 }

func countsOf(p *resultPool) poolCounts {
	return poolCounts{p.hits.Load(), p.misses.Load(), p.waited.Load(), p.made.Load(), p.dropped.Load()}
}

func checkCounts(t *testing.T, p *resultPool, want poolCounts) {
	t.Helper()
	if got := countsOf(p); got != want {
		t.Fatalf("counters %+v, want %+v", got, want)
	}
}

// garbageAlloc stands in for makeNoZero with memory that plainly does not
// read as zero (NaN), as reused heap memory may hold anything.
func garbageAlloc(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.NaN())
	}
	return x
}

// untouchedPages returns the 4 KiB pages that x overlaps (numbered from
// the page of x[0]) holding no element of x that reads 0, and the number
// of pages x overlaps.
func untouchedPages(x []float32) (untouched []int, pages int) {
	if len(x) == 0 {
		return nil, 0
	}
	base := uintptr(unsafe.Pointer(&x[0]))
	first := base / pageBytes
	pages = int((base+uintptr(len(x))*4-1)/pageBytes-first) + 1
	touched := make([]bool, pages)
	for i, v := range x {
		if v == 0 {
			touched[(base+uintptr(i)*4)/pageBytes-first] = true
		}
	}
	for pg, ok := range touched {
		if !ok {
			untouched = append(untouched, pg)
		}
	}
	return untouched, pages
}

// touchPages writes exactly one element of every page a slice overlaps,
// whatever the slice's alignment, and nothing outside the slice.
func TestTouchPages(t *testing.T) {
	big := make([]float32, 12*touchStride)
	for _, off := range []int{0, 1, 2, touchStride/2 + 1, touchStride - 1, touchStride, touchStride + 1} {
		for _, n := range []int{1, 2, touchStride - 1, touchStride, touchStride + 1, 2 * touchStride, 5*touchStride + 7} {
			for i := range big {
				big[i] = 1
			}
			x := big[off : off+n]
			touchPages(x)
			untouched, pages := untouchedPages(x)
			if len(untouched) > 0 {
				t.Fatalf("offset %d, %d elements: pages %v of %d not touched", off, n, untouched, pages)
			}
			zeros := 0
			for i, v := range big {
				if v == 0 {
					zeros++
					if i < off || i >= off+n {
						t.Fatalf("offset %d, %d elements: element %d written, outside the slice", off, n, i)
					}
				}
			}
			if zeros != pages {
				t.Errorf("offset %d, %d elements: %d writes for %d pages, want one a page", off, n, zeros, pages)
			}
		}
	}
}

// touchPieces cuts o and ht into pieces of at most touchChunk elements
// that cover each exactly, in order.
func TestTouchPieces(t *testing.T) {
	for _, c := range [][2]int{{0, 0}, {1, 0}, {touchChunk, 0}, {touchChunk + 1, 5}, {3*touchChunk - 1, 2 * touchChunk}} {
		next := [2]int{}
		for _, pc := range touchPieces(c[0], c[1]) {
			if pc.lo != next[pc.x] || pc.hi <= pc.lo || pc.hi-pc.lo > touchChunk || (pc.x == 0 && next[1] > 0) {
				t.Fatalf("%v: piece %+v after %v", c, pc, next)
			}
			next[pc.x] = pc.hi
		}
		if next != c {
			t.Errorf("%v: pieces end at %v", c, next)
		}
	}
}

// The first call of a shape finds no spare and starts one; the second
// takes it, of the shape asked, every page faulted in; a spare goes to one
// taker only. Without a final state, ht is nil, as from ForwardHost.
func TestResultPoolSecondCall(t *testing.T) {
	for _, shape := range []resultShape{{o: 3*touchStride + 5, ht: 2 * touchStride}, {o: 10}} {
		p := &resultPool{alloc: garbageAlloc}
		if p.take(shape) != nil {
			t.Fatal("a spare before any call")
		}
		p.refill(shape)
		p.settle()
		sp := p.take(shape)
		if sp == nil {
			t.Fatal("no spare on the second call")
		}
		if p.take(shape) != nil {
			t.Fatal("the spare was handed out twice")
		}
		o, ht := p.result(sp)
		if len(o) != shape.o || len(ht) != shape.ht || (shape.ht == 0) != (ht == nil) {
			t.Fatalf("spare of %d and %d values (ht nil: %v), want %+v", len(o), len(ht), ht == nil, shape)
		}
		for _, x := range [][]float32{o, ht} {
			if untouched, _ := untouchedPages(x); len(untouched) > 0 {
				t.Fatalf("pages %v not faulted in", untouched)
			}
		}
		checkCounts(t, p, poolCounts{hits: 1, misses: 2, made: 1})
		p.close()
	}
}

// A spare prepared on several goroutines has every piece touched once,
// and every page of o and ht written.
func TestResultPoolTouchesEveryPage(t *testing.T) {
	shape := resultShape{o: 3*touchChunk + 777, ht: touchChunk/2 + 3}
	pieces := len(touchPieces(shape.o, shape.ht))
	for _, workers := range []int{1, 3, 8} {
		touched := make([]atomic.Int32, pieces)
		p := &resultPool{alloc: garbageAlloc, workers: workers, touched: func(i int) { touched[i].Add(1) }}
		p.refill(shape)
		p.settle()
		o, ht := p.result(p.take(shape))
		for i := range touched {
			if n := touched[i].Load(); n != 1 {
				t.Fatalf("%d workers: piece %d touched %d times", workers, i, n)
			}
		}
		for _, x := range [][]float32{o, ht} {
			if untouched, pages := untouchedPages(x); len(untouched) > 0 {
				t.Fatalf("%d workers: pages %v of %d not faulted in", workers, untouched, pages)
			}
		}
		checkCounts(t, p, poolCounts{hits: 1, made: 1})
		p.close()
	}
}

// A call that takes a spare still being prepared (calls back to back)
// joins the preparation when it needs the slices: it touches the pieces no
// one has taken yet itself, while the preparing goroutines are busy with
// theirs, and returns once every piece is done, not before.
func TestResultPoolJoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		shape := resultShape{o: 5 * touchChunk, ht: 3}
		touched := make([]atomic.Int32, len(touchPieces(shape.o, shape.ht)))
		p := &resultPool{alloc: garbageAlloc, workers: 2, touched: func(i int) {
			touched[i].Add(1)
			if i < 2 {
				<-release // the two preparing goroutines, one piece each
			}
		}}
		p.refill(shape)
		synctest.Wait()
		sp := p.take(shape)
		if sp == nil {
			t.Fatal("a spare being prepared was not handed out")
		}
		got := make(chan []float32)
		go func() {
			o, _ := p.result(sp)
			got <- o
		}()
		synctest.Wait()
		for i := 2; i < len(touched); i++ {
			if touched[i].Load() != 1 {
				t.Fatalf("piece %d was not touched by the taker", i)
			}
		}
		select {
		case <-got:
			t.Fatal("the result was handed over with pieces being touched")
		default:
		}
		close(release)
		o := <-got
		for i := range touched {
			if n := touched[i].Load(); n != 1 {
				t.Fatalf("piece %d touched %d times", i, n)
			}
		}
		if untouched, _ := untouchedPages(o); len(untouched) > 0 {
			t.Fatalf("pages %v not faulted in", untouched)
		}
		checkCounts(t, p, poolCounts{hits: 1, waited: 1, made: 1})
		p.close()
	})
}

// A call that finds no spare starts preparing its own result at once (its
// pages fault in while its inputs convert), not when it needs the slices;
// the pool does not keep that result, and the call's success starts a
// spare for the next call.
func TestResultPoolOwnResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var touched atomic.Int32
		p := &resultPool{alloc: garbageAlloc, workers: 2, touched: func(int) { touched.Add(1) }}
		l := smallLayout(t, 64, 1, true)
		shape := resultShapeOf(l)
		res := &Result{}
		results, end := p.fresh(l, res)
		synctest.Wait()
		if n, want := touched.Load(), int32(len(touchPieces(shape.o, shape.ht))); n != want {
			t.Fatalf("%d pieces touched before the call asked for its result, want %d", n, want)
		}
		dsts := results()
		if len(res.O) != shape.o || len(res.Ht) != shape.ht || &dsts[0][0] != &res.O[0] {
			t.Fatalf("result of %d and %d values, want %+v", len(res.O), len(res.Ht), shape)
		}
		end(nil)
		p.settle()
		o, _ := p.result(p.take(shape))
		if &o[0] == &res.O[0] {
			t.Fatal("the pool handed out a call's own result")
		}
		checkCounts(t, p, poolCounts{hits: 1, misses: 1, made: 1})
		p.close()
	})
}

// Close with preparations in flight (two spares, and the own result of a
// call that found none) drops the spares, waits for all three, and leaves
// no goroutine (synctest.Test fails on one left blocked, and waits for any
// left running); after Close, no spare is handed out or started, and a
// call that finds none still gets its result.
func TestResultPoolCloseInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		p := &resultPool{alloc: func(n int) []float32 {
			<-release
			return make([]float32, n)
		}}
		a, b := resultShape{o: 100}, resultShape{o: 200, ht: 50}
		p.refill(a)
		p.refill(b)
		l := smallLayout(t, 64, 1, true)
		results, _ := p.fresh(l, &Result{})
		closed := closeBlocked(t, p, "preparations in flight")
		close(release)
		<-closed
		if dsts := results(); len(dsts[0]) != resultShapeOf(l).o {
			t.Fatalf("a call's own result of %d values", len(dsts[0]))
		}
		if p.take(a) != nil || p.take(b) != nil {
			t.Fatal("a spare after close")
		}
		p.refill(a)
		res := &Result{}
		results, end := p.fresh(l, res)
		if results(); len(res.O) != resultShapeOf(l).o {
			t.Fatalf("after close, a result of %d values", len(res.O))
		}
		end(nil)
		checkCounts(t, p, poolCounts{misses: 4, made: 2, dropped: 2})
		p.close() // twice is fine
	})
}

// closeBlocked runs p.close on a goroutine, inside a synctest bubble, and
// fails the test unless close is still waiting once every goroutine of
// the bubble is blocked (on what, the caller's what says); the channel
// it returns closes when close returns.
func closeBlocked(t *testing.T, p *resultPool, what string) <-chan struct{} {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		p.close()
		close(closed)
	}()
	synctest.Wait()
	select {
	case <-closed:
		t.Fatalf("close returned with %s", what)
	default:
	}
	return closed
}

// Close waits for pages being touched (the goroutines a preparation
// starts are counted with it), and the spare it drops stops being touched
// at the next piece: only the pieces in hand when Close came are touched.
func TestResultPoolCloseWaitsForTouch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var touched atomic.Int32
		p := &resultPool{alloc: garbageAlloc, workers: 2, touched: func(int) {
			touched.Add(1)
			<-release
		}}
		p.refill(resultShape{o: 4*touchChunk + 1})
		synctest.Wait()
		closed := closeBlocked(t, p, "pages being touched")
		close(release)
		<-closed
		if n := touched.Load(); n != 2 {
			t.Errorf("%d pieces touched, want the 2 in hand at close", n)
		}
	})
}

// A shape change keeps the spare of each of the last spareShapes shapes;
// the least recently used goes first; a result over the byte limit gets
// no spare, and the spares together stay within it.
func TestResultPoolShapes(t *testing.T) {
	p := &resultPool{maxBytes: 4 * 1000 * 10}
	defer p.close()
	shapes := make([]resultShape, spareShapes+1)
	for i := range shapes {
		shapes[i] = resultShape{o: 1000 + i}
	}
	for _, s := range shapes {
		p.refill(s)
	}
	p.settle()
	if p.take(shapes[0]) != nil {
		t.Error("the least recently used shape kept its spare")
	}
	for _, s := range shapes[1:] {
		if p.take(s) == nil {
			t.Errorf("shape %+v lost its spare", s)
		}
	}
	checkCounts(t, p, poolCounts{hits: spareShapes, misses: 1, made: spareShapes + 1, dropped: 1})

	// Too large for a spare.
	big := resultShape{o: 10000, ht: 1}
	p.refill(big)
	if p.take(big) != nil {
		t.Error("a spare over the byte limit")
	}
	// Byte limit: a 6000-value spare and a 3000-value one fit 10000
	// values; a second 3000-value shape drops the least recent spare.
	x, y, z := resultShape{o: 6000}, resultShape{o: 3000}, resultShape{o: 2999, ht: 1}
	for _, s := range []resultShape{x, y, z} {
		p.refill(s)
	}
	if p.take(x) != nil || p.take(y) == nil || p.take(z) == nil {
		t.Error("the spares over the byte limit are not the least recently used")
	}
}

// When shapes change on every call, after spareShapes spares dropped
// unused a new shape gets none on its first call, but does on its second;
// a spare taken turns spares back on for first calls.
func TestResultPoolChurn(t *testing.T) {
	p := &resultPool{}
	defer p.close()
	n := 0
	next := func() resultShape { n++; return resultShape{o: n} }
	for range 2 * spareShapes {
		s := next()
		if p.take(s) != nil {
			t.Fatal("a spare for a new shape")
		}
		p.refill(s)
	}
	c := countsOf(p)
	if c.made != 2*spareShapes || c.dropped != spareShapes {
		t.Fatalf("%+v, want %d made and %d dropped", c, 2*spareShapes, spareShapes)
	}
	s := next()
	p.refill(s)
	if p.take(s) != nil || p.made.Load() != c.made {
		t.Fatal("a spare for a first call while spares go to waste")
	}
	p.refill(s) // its second call
	if p.take(s) == nil {
		t.Fatal("no spare after the second call of a shape")
	}
	p.refill(s)
	s2 := next()
	p.refill(s2)
	if p.take(s2) == nil {
		t.Fatal("no spare for a first call after a spare was taken")
	}
}

// Many goroutines calling ForwardHost's side of the pool (fresh) with a
// few shapes: every spare goes to one caller, nothing writes a result once
// its call has ended (each call fills its result with its own mark, all
// are checked at the end; -race checks the hand-over), and close, with
// preparations in flight, leaves nothing running.
func TestResultPoolConcurrent(t *testing.T) {
	p := &resultPool{}
	layouts := []*Layout{smallLayout(t, 64, 1, true), smallLayout(t, 100, 2, false), smallLayout(t, 90, 2, true)}
	const workers, calls = 8, 200
	type kept struct {
		res  *Result
		mark float32
	}
	got := make([][]kept, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for c := range calls {
				res := &Result{}
				results, end := p.fresh(layouts[(w+c)%len(layouts)], res)
				mark := float32(w*calls + c + 1)
				for _, x := range results() {
					for i := range x {
						x[i] = mark
					}
				}
				end(nil)
				got[w] = append(got[w], kept{res, mark})
			}
		})
	}
	wg.Wait()
	p.close()
	seen := map[*float32]bool{}
	for _, ks := range got {
		for _, k := range ks {
			for _, x := range [][]float32{k.res.O, k.res.Ht} {
				if len(x) == 0 {
					continue
				}
				if seen[&x[0]] {
					t.Fatal("one array handed to two callers")
				}
				seen[&x[0]] = true
				for i, v := range x {
					if v != k.mark {
						t.Fatalf("result of mark %v: [%d] = %v, written after its call", k.mark, i, v)
					}
				}
			}
		}
	}
	c := countsOf(p)
	if c.hits+c.misses != workers*calls || c.hits == 0 {
		t.Errorf("%+v over %d calls", c, workers*calls)
	}
	t.Logf("%+v", c)
}

// fresh, ForwardHost's side of the pool, as a call runs it without the
// device: the first call of a shape allocates its result, the second
// takes the spare the first left, both widen the same values as a zeroed
// result gets, into memory that held garbage (every element is written),
// and neither result is written once the call ends; a call that fails leaves no spare
// for the next (and its result is dropped).
func TestResultPoolFresh(t *testing.T) {
	l := smallLayout(t, 200, 2, true)
	buf := make([]byte, l.total)
	for i := l.inBytes; i < l.total; i++ {
		buf[i] = byte(i*7) & 0x3F
	}
	want := &Result{}
	l.decodeOutputs(buf, want)
	p := &resultPool{alloc: garbageAlloc} // any element left unwritten reads NaN
	defer p.close()
	call := func(fail error) *Result {
		res := &Result{}
		results, end := p.fresh(l, res)
		if fail != nil {
			end(fail)
			return nil
		}
		l.decodeRun(buf, results(), cutPieces(l.out, pieceBytes)).run()
		end(nil)
		return res
	}
	first := call(nil)
	p.settle()
	second := call(nil)
	checkCounts(t, p, poolCounts{hits: 1, misses: 1, made: 2})
	if &second.O[0] == &first.O[0] || &second.Ht[0] == &first.Ht[0] {
		t.Fatal("two calls share a result array")
	}
	for _, r := range []*Result{first, second} {
		for _, x := range [][2][]float32{{r.O, want.O}, {r.Ht, want.Ht}} {
			if len(x[0]) != len(x[1]) {
				t.Fatalf("%d values, want %d", len(x[0]), len(x[1]))
			}
			for i := range x[1] {
				if math.Float32bits(x[0][i]) != math.Float32bits(x[1][i]) {
					t.Fatalf("[%d] = %v, want %v", i, x[0][i], x[1][i])
				}
			}
		}
	}
	call(errors.New("the kernel failed")) // takes the spare, leaves none
	call(errors.New("the kernel failed")) // allocates, leaves none
	p.settle()
	checkCounts(t, p, poolCounts{hits: 2, misses: 2, made: 2})
}

// resultShapeOf reads the lengths of o and ht off a layout.
func TestResultShapeOf(t *testing.T) {
	for _, final := range []bool{false, true} {
		want := resultShape{o: 100 * 4 * 128}
		if final {
			want.ht = 2 * 4 * 128 * 128
		}
		if got := resultShapeOf(smallLayout(t, 100, 4, final)); got != want {
			t.Errorf("final state %v: %+v, want %+v", final, got, want)
		}
	}
}
