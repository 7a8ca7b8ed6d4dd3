package jit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tracked is a cached value that knows whether it has been destroyed.
type tracked struct {
	key       string
	destroyed atomic.Int32
}

// tracker makes tracked values and counts creations and destructions.
type tracker struct {
	t        *testing.T
	cost     int64
	delay    time.Duration
	created  atomic.Int32
	destroys atomic.Int32
	mu       sync.Mutex
	all      []*tracked
}

func (tr *tracker) create(key string) func() (any, int64, func(), error) {
	return func() (any, int64, func(), error) {
		tr.created.Add(1)
		if tr.delay > 0 {
			time.Sleep(tr.delay)
		}
		v := &tracked{key: key}
		tr.mu.Lock()
		tr.all = append(tr.all, v)
		tr.mu.Unlock()
		return v, tr.cost, func() {
			if n := v.destroyed.Add(1); n != 1 {
				tr.t.Errorf("value %s destroyed %d times", key, n)
			}
			tr.destroys.Add(1)
		}, nil
	}
}

// live counts the values not destroyed.
func (tr *tracker) live() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, v := range tr.all {
		if v.destroyed.Load() == 0 {
			n++
		}
	}
	return n
}

func mustCache(t *testing.T, maxCost int64) *MemCache {
	t.Helper()
	m, err := NewMemCache(maxCost)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMemCacheSingleflight(t *testing.T) {
	m := mustCache(t, 1<<20)
	tr := &tracker{t: t, cost: 1, delay: 20 * time.Millisecond}
	const n = 32
	handles := make([]*Handle, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			h, err := m.Acquire("k", tr.create("k"))
			if err != nil {
				t.Error(err)
				return
			}
			handles[i] = h
		}()
	}
	close(start)
	wg.Wait()
	if c := tr.created.Load(); c != 1 {
		t.Fatalf("create called %d times, want 1", c)
	}
	first := handles[0].Value()
	for i, h := range handles {
		if h.Value() != first {
			t.Errorf("handle %d has another value", i)
		}
		h.Release()
	}
	if tr.destroys.Load() != 0 {
		t.Error("value destroyed while still cached")
	}
	m.Close()
	if tr.destroys.Load() != 1 {
		t.Errorf("destroyed %d times after Close, want 1", tr.destroys.Load())
	}
}

// TestMemCacheEvictionWhileHeld fills a small cache with held values:
// ristretto evicts most of them, none is destroyed until released, and each
// is destroyed exactly once.
func TestMemCacheEvictionWhileHeld(t *testing.T) {
	m := mustCache(t, 4)
	tr := &tracker{t: t, cost: 1}
	const n = 50
	var handles []*Handle
	for i := range n {
		key := fmt.Sprint("k", i)
		h, err := m.Acquire(key, tr.create(key))
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
		m.wait()
	}
	m.wait()
	if d := tr.destroys.Load(); d != 0 {
		t.Fatalf("%d values destroyed while their handles are held", d)
	}
	m.mu.Lock()
	resident := 0
	for _, e := range m.entries {
		if e.slot != nil {
			resident++
		}
	}
	m.mu.Unlock()
	if resident > 4 {
		t.Errorf("%d entries resident in a cache of cost 4", resident)
	}
	for _, h := range handles {
		if h.Value().(*tracked).destroyed.Load() != 0 {
			t.Fatalf("held value %s destroyed", h.Key())
		}
		h.Release() // an evicted value goes now, a resident one stays
	}
	if got, want := tr.live(), resident; got != want {
		t.Errorf("after releasing all: %d values live, want the %d resident", got, want)
	}
	if m.Len() != resident {
		t.Errorf("Len() = %d, want %d", m.Len(), resident)
	}
	m.Close()
	if tr.destroys.Load() != n || tr.live() != 0 {
		t.Errorf("after Close: %d destroyed, %d live; want %d, 0", tr.destroys.Load(), tr.live(), n)
	}
}

func TestMemCacheRemoveWhileHeld(t *testing.T) {
	m := mustCache(t, 100)
	defer m.Close()
	tr := &tracker{t: t, cost: 1}
	h, _ := m.Acquire("a", tr.create("a"))
	m.Remove("a")
	m.wait()
	if tr.destroys.Load() != 0 {
		t.Fatal("removed value destroyed while held")
	}
	h2, _ := m.Acquire("a", tr.create("a"))
	if tr.created.Load() != 2 || h2.Value() == h.Value() {
		t.Errorf("Acquire after Remove: %d creates, same value %v", tr.created.Load(), h2.Value() == h.Value())
	}
	h.Release()
	if tr.destroys.Load() != 1 || h.Value() != nil {
		t.Errorf("after Release: %d destroys, Value %v", tr.destroys.Load(), h.Value())
	}
	h2.Release()
	if tr.destroys.Load() != 1 {
		t.Error("cached value destroyed at Release")
	}
}

// TestMemCacheRefused acquires a value ristretto refuses (cost above the
// capacity): the caller still gets it, sharers reuse it while it is held,
// and it is destroyed at its last Release.
func TestMemCacheRefused(t *testing.T) {
	m := mustCache(t, 10)
	defer m.Close()
	tr := &tracker{t: t, cost: 100}
	h1, err := m.Acquire("big", tr.create("big"))
	if err != nil {
		t.Fatal(err)
	}
	m.wait()
	if h1.Value() == nil || tr.destroys.Load() != 0 {
		t.Fatalf("refused value: Value %v, %d destroys", h1.Value(), tr.destroys.Load())
	}
	h2, err := m.Acquire("big", tr.create("big"))
	if err != nil {
		t.Fatal(err)
	}
	m.wait()
	if tr.created.Load() != 1 || h2.Value() != h1.Value() {
		t.Errorf("second Acquire while held: %d creates", tr.created.Load())
	}
	h1.Release()
	if tr.destroys.Load() != 0 {
		t.Error("destroyed while a second handle is held")
	}
	h2.Release()
	if tr.destroys.Load() != 1 || m.Len() != 0 {
		t.Errorf("after the last Release: %d destroys, Len %d; want 1, 0", tr.destroys.Load(), m.Len())
	}
	h3, _ := m.Acquire("big", tr.create("big"))
	h3.Release()
	m.wait() // the refusal arrives asynchronously; the value goes with it
	if tr.created.Load() != 2 || tr.destroys.Load() != 2 {
		t.Errorf("re-acquired refused value: %d creates, %d destroys", tr.created.Load(), tr.destroys.Load())
	}
}

func TestMemCacheCreateError(t *testing.T) {
	m := mustCache(t, 10)
	defer m.Close()
	boom := errors.New("boom")
	var calls atomic.Int32
	fail := func() (any, int64, func(), error) {
		calls.Add(1)
		time.Sleep(10 * time.Millisecond)
		return nil, 0, nil, boom
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if h, err := m.Acquire("k", fail); !errors.Is(err, boom) || h != nil {
				t.Errorf("Acquire = %v, %v; want boom", h, err)
			}
		}()
	}
	wg.Wait()
	if calls.Load() > 8 || m.Len() != 0 {
		t.Errorf("%d calls, Len %d", calls.Load(), m.Len())
	}
	before := calls.Load()
	m.Acquire("k", fail)
	if calls.Load() != before+1 {
		t.Error("a failed create was cached")
	}
}

func TestMemCacheCreatePanics(t *testing.T) {
	m := mustCache(t, 10)
	defer m.Close()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("create's panic did not propagate")
			}
		}()
		m.Acquire("k", func() (any, int64, func(), error) { panic("oops") })
	}()
	tr := &tracker{t: t, cost: 1}
	h, err := m.Acquire("k", tr.create("k"))
	if err != nil || h.Value() == nil {
		t.Fatalf("Acquire after a panicking create: %v", err)
	}
	h.Release()
}

func TestMemCacheReleaseTwiceAndClose(t *testing.T) {
	m := mustCache(t, 10)
	tr := &tracker{t: t, cost: 1}
	h, _ := m.Acquire("k", tr.create("k"))
	h2, _ := m.Acquire("k", tr.create("k"))
	h.Release()
	h.Release() // no-op: must not drop h2's reference
	m.Close()
	if tr.destroys.Load() != 0 || h2.Value() == nil {
		t.Fatal("value destroyed by Close while a handle is held")
	}
	if _, err := m.Acquire("k", tr.create("k")); !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
	h2.Release()
	if tr.destroys.Load() != 1 {
		t.Errorf("%d destroys after the last Release", tr.destroys.Load())
	}
	m.Close()
	var nilHandle *Handle
	nilHandle.Release()
	if _, err := NewMemCache(0); err == nil {
		t.Error("NewMemCache(0) succeeded")
	}
}

// TestMemCacheStress has goroutines acquire random keys of a small cache,
// check that what they hold is never destroyed, and release; every created
// value is destroyed exactly once by the end.
func TestMemCacheStress(t *testing.T) {
	m := mustCache(t, 6)
	tr := &tracker{t: t, cost: 1}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			var held []*Handle
			for i := range 400 {
				key := fmt.Sprint("k", r.IntN(24))
				h, err := m.Acquire(key, tr.create(key))
				if err != nil {
					t.Error(err)
					return
				}
				held = append(held, h)
				for _, x := range held {
					if x.Value().(*tracked).destroyed.Load() != 0 {
						t.Errorf("held value %s destroyed", x.Key())
						return
					}
				}
				if len(held) > 3 || i%7 == 0 {
					k := r.IntN(len(held))
					held[k].Release()
					held = append(held[:k], held[k+1:]...)
				}
				if i%50 == 0 {
					m.Remove(key)
				}
			}
			for _, h := range held {
				h.Release()
			}
		}()
	}
	wg.Wait()
	m.Close()
	if c, d := tr.created.Load(), tr.destroys.Load(); c != d || tr.live() != 0 {
		t.Errorf("%d created, %d destroyed, %d live", c, d, tr.live())
	}
	t.Logf("stress: %d values created and destroyed", tr.created.Load())
}

func BenchmarkMemCacheHit(b *testing.B) {
	m, _ := NewMemCache(100)
	defer m.Close()
	create := func() (any, int64, func(), error) { return 1, 1, nil, nil }
	h, _ := m.Acquire("k", create)
	defer h.Release()
	b.ResetTimer()
	for b.Loop() {
		h, _ := m.Acquire("k", create)
		h.Release()
	}
}
