package hostpath

import (
	"errors"
	"math"
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
