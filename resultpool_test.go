package gdn

import (
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// smallLayout lays out a call of two packed sequences of T tokens in all,
// one query head and hv value heads, with or without the final state.
func smallLayout(t *testing.T, T, hv int, final bool) *hostLayout {
	t.Helper()
	h := &HostCoreArgs{B: 1, T: T, Hq: 1, Hv: hv, CuSeqlens: []int{0, T / 3, T}, Dtype: BF16, FinalState: final,
		Q: make([]float32, T*128), K: make([]float32, T*128), V: make([]float32, T*hv*128),
		G: make([]float32, T*hv), Beta: make([]float32, T*hv), A: make([]float32, T*hv*64)}
	l, err := newHostLayout(h)
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

// The first call of a shape finds no spare and starts one; the second
// takes it, of the shape asked, zero; a spare goes to one taker only.
// Without a final state, ht is nil, as from ForwardHost.
func TestResultPoolSecondCall(t *testing.T) {
	for _, shape := range []resultShape{{o: 3*touchStride + 5, ht: 2 * touchStride}, {o: 10}} {
		p := &resultPool{}
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
			for i, v := range x {
				if v != 0 {
					t.Fatalf("spare[%d] = %v, want 0", i, v)
				}
			}
		}
		checkCounts(t, p, poolCounts{hits: 1, misses: 2, made: 1})
		p.close()
	}
}

// A call that takes a spare still being prepared waits for it when it
// needs it, and the preparation stops touching pages.
func TestResultPoolTakeBeforeReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		p := &resultPool{alloc: func(n int) []float32 {
			<-release
			return make([]float32, n)
		}}
		shape := resultShape{o: 4 * touchStride, ht: 7}
		p.refill(shape)
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
		if !sp.stop.Load() {
			t.Error("the preparation was not told to stop touching pages")
		}
		close(release)
		if o := <-got; len(o) != shape.o {
			t.Fatalf("%d values, want %d", len(o), shape.o)
		}
		checkCounts(t, p, poolCounts{hits: 1, waited: 1, made: 1})
		p.close()
	})
}

// Close with a preparation in flight drops its spare, waits for it, and
// leaves no goroutine (synctest.Test fails on one left blocked, and waits
// for any left running); after Close, no spare is handed out or started.
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
		closed := make(chan struct{})
		go func() {
			p.close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("close returned with preparations in flight")
		default:
		}
		close(release)
		<-closed
		if p.take(a) != nil || p.take(b) != nil {
			t.Fatal("a spare after close")
		}
		p.refill(a)
		checkCounts(t, p, poolCounts{misses: 2, made: 2, dropped: 2})
		p.close() // twice is fine
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
	layouts := []*hostLayout{smallLayout(t, 64, 1, true), smallLayout(t, 100, 2, false), smallLayout(t, 90, 2, true)}
	const workers, calls = 8, 200
	type kept struct {
		res  *HostCoreResult
		mark float32
	}
	got := make([][]kept, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for c := range calls {
				res := &HostCoreResult{}
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
// takes the spare the first left, both widen the same values, and neither
// result is written once the call ends; a call that fails leaves no spare
// for the next (and its result is dropped).
func TestResultPoolFresh(t *testing.T) {
	l := smallLayout(t, 200, 2, true)
	buf := make([]byte, l.total)
	for i := l.inBytes; i < l.total; i++ {
		buf[i] = byte(i*7) & 0x3F
	}
	p := &resultPool{}
	defer p.close()
	call := func(fail error) *HostCoreResult {
		res := &HostCoreResult{}
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
	want := append([]float32(nil), first.O...)
	p.settle()
	second := call(nil)
	checkCounts(t, p, poolCounts{hits: 1, misses: 1, made: 2})
	if &second.O[0] == &first.O[0] || &second.Ht[0] == &first.Ht[0] {
		t.Fatal("two calls share a result array")
	}
	for i := range want {
		if math.Float32bits(second.O[i]) != math.Float32bits(want[i]) || first.O[i] != want[i] {
			t.Fatalf("o[%d]: first %v, second %v, want %v", i, first.O[i], second.O[i], want[i])
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

// BenchmarkDecodeSpare is the result side of a repeated ForwardHost call
// on the batch of examples/prefill (o and ht, 137 MB of float32; the
// device encoding in a staging buffer), without the device: widening the
// outputs into a new result allocated by the call (fresh: ForwardHost
// before spares), into a spare prepared between calls with the timer
// stopped until it is ready (spare: a caller with other work between
// calls; spare-ms is how long the preparation took), into a spare taken at
// once (spare-tight: calls back to back, the preparation competing with
// the next call), and into the same result every call (reuse:
// ForwardHostInto). On every core (-cpu to vary); it reports ms/call.
func BenchmarkDecodeSpare(b *testing.B) {
	h := prefillHostArgs()
	h.FinalState = true
	l, err := newHostLayout(h)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, l.total)
	for i := l.inBytes; i < l.total; i++ {
		buf[i] = byte(i*7) & 0x3F // finite values of either encoding
	}
	out := cutPieces(l.out, pieceBytes)
	reused := &HostCoreResult{}
	for _, c := range []string{"fresh", "spare", "spare-tight", "reuse"} {
		b.Run(c, func(b *testing.B) {
			var p resultPool
			defer p.close()
			b.SetBytes(int64(l.total - l.inBytes))
			var prep time.Duration
			for b.Loop() {
				switch c {
				case "fresh":
					l.decodeOutputs(buf, &HostCoreResult{})
				case "reuse":
					l.decodeOutputs(buf, reused)
				default:
					if c == "spare" {
						b.StopTimer()
						start := time.Now()
						p.settle()
						prep += time.Since(start)
						b.StartTimer()
					}
					results, end := p.fresh(l, &HostCoreResult{})
					l.decodeRun(buf, results(), out).run()
					end(nil)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/call")
			if c == "spare" {
				b.ReportMetric(float64(prep.Microseconds())/1e3/float64(b.N), "spare-ms")
			}
		})
	}
}
