package hostpath

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// The result pool under Close and under load: preparations in flight,
// churning shapes, many goroutines.

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
