package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gdnjit/gdn"
)

// openedSoakRuntime is an entry of soakRuntimes for rt, already open.
func openedSoakRuntime(rt *gdn.Runtime) *soakRuntime {
	e := &soakRuntime{ready: make(chan struct{}), rt: rt}
	close(e.ready)
	return e
}

// fakeRuntimes is a soakRuntimes whose Runtimes are zero values (never
// called) that record their closing.
type fakeRuntimes struct {
	*soakRuntimes
	mu     sync.Mutex
	closed map[*gdn.Runtime]bool // every Runtime opened: whether it is closed
}

func newFakeRuntimes(limit int) *fakeRuntimes {
	f := &fakeRuntimes{soakRuntimes: newSoakRuntimes(0), closed: map[*gdn.Runtime]bool{}}
	f.limit = limit
	f.open = func(gdn.Options) (*gdn.Runtime, error) {
		rt := &gdn.Runtime{}
		f.mu.Lock()
		f.closed[rt] = false
		f.mu.Unlock()
		return rt, nil
	}
	f.shut = func(rt *gdn.Runtime) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.closed[rt] {
			panic("a Runtime closed twice")
		}
		f.closed[rt] = true
	}
	return f
}

func (f *fakeRuntimes) isClosed(rt *gdn.Runtime) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed[rt]
}

// openCount is how many Runtimes are open now.
func (f *fakeRuntimes) openCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.closed {
		if !c {
			n++
		}
	}
	return n
}

// A soak keeps at most its limit of Runtimes open, closing the least
// recently used idle one; a held Runtime is never closed, and a closed
// one is opened again when a problem needs it.
func TestSoakRuntimesBounded(t *testing.T) {
	f := newFakeRuntimes(3)
	get := func(v string) (*gdn.Runtime, func()) {
		t.Helper()
		rt, release, err := f.get(v, 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return rt, release
	}
	held, releaseHeld := get("held") // the planner's, held all along
	a, release := get("a")
	release()
	release() // a second release changes nothing
	b, release := get("b")
	release()
	if f.openCount() != 3 {
		t.Fatalf("%d open, want 3", f.openCount())
	}
	// a is used again, so b is the least recently used when c opens.
	if again, release := get("a"); again != a {
		t.Error("an open Runtime was opened again")
	} else {
		release()
	}
	c, release := get("c")
	release()
	if !f.isClosed(b) || f.isClosed(a) || f.isClosed(c) || f.isClosed(held) {
		t.Errorf("closed: a %v, b %v, c %v, held %v; want b alone", f.isClosed(a), f.isClosed(b), f.isClosed(c), f.isClosed(held))
	}
	for i := range 10 {
		_, release := get(fmt.Sprint("v", i))
		release()
	}
	if f.isClosed(held) || f.openCount() != 3 {
		t.Errorf("held closed %v, %d open; want it open and 3 open", f.isClosed(held), f.openCount())
	}
	if b2, release := get("b"); b2 == b || f.isClosed(b2) {
		t.Error("a closed Runtime was handed out again")
	} else {
		release()
	}
	if f.opened != 15 {
		t.Errorf("%d Runtimes opened, want 15", f.opened)
	}
	releaseHeld()
	f.close()
	if f.openCount() != 0 {
		t.Errorf("%d Runtimes open after close", f.openCount())
	}
}

// With every open Runtime held, a new one opens over the limit, and the
// set comes back to the limit once they are released and another opens.
func TestSoakRuntimesAllHeld(t *testing.T) {
	f := newFakeRuntimes(2)
	var releases []func()
	for i := range 4 {
		_, release, err := f.get(fmt.Sprint(i), 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	if f.openCount() != 4 {
		t.Fatalf("%d open with 4 held, want 4", f.openCount())
	}
	for _, r := range releases {
		r()
	}
	_, release, _ := f.get("new", 0, 0, 0)
	release()
	if f.openCount() != 2 {
		t.Errorf("%d open after release, want 2", f.openCount())
	}
}

// A Runtime that fails to open is not kept: the error comes back, and the
// next get tries again.
func TestSoakRuntimesOpenError(t *testing.T) {
	f := newFakeRuntimes(2)
	fail := errors.New("no GPU")
	open := f.open
	f.open = func(gdn.Options) (*gdn.Runtime, error) { return nil, fail }
	if rt, release, err := f.get("x", 0, 0, 0); !errors.Is(err, fail) || rt != nil || release != nil {
		t.Fatalf("got %v, %v", rt, err)
	}
	f.open = open
	if _, release, err := f.get("x", 0, 0, 0); err != nil {
		t.Fatal(err)
	} else {
		release()
	}
}

// A Runtime being opened holds up only the problems that need it: another
// opens meanwhile, and a second problem asking for the same one waits for
// that open instead of opening its own.
func TestSoakRuntimesOpenOutsideLock(t *testing.T) {
	f := newFakeRuntimes(4)
	open := f.open
	slow, entered := make(chan struct{}), make(chan struct{}, 1)
	var slowOpens atomic.Int32
	// The slow Runtime is the one on a slice of 99 SMs (Options.SMs is
	// what the fake can see of the key).
	f.open = func(o gdn.Options) (*gdn.Runtime, error) {
		if o.SMs == 99 {
			slowOpens.Add(1)
			entered <- struct{}{}
			<-slow
		}
		return open(o)
	}
	got := make(chan *gdn.Runtime, 2)
	for range 2 {
		go func() {
			rt, release, err := f.get("slow", 0, 99, 0)
			if err != nil {
				t.Error(err)
			} else {
				release()
			}
			got <- rt
		}()
	}
	<-entered
	done := make(chan struct{})
	go func() {
		if _, release, err := f.get("fast", 0, 0, 0); err == nil {
			release()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a get waited for another Runtime's open")
	}
	close(slow)
	a, b := <-got, <-got
	if a == nil || a != b {
		t.Errorf("two problems asking for one Runtime got %p and %p", a, b)
	}
	if n := slowOpens.Load(); n != 1 {
		t.Errorf("opened %d times, want once", n)
	}
}

// Workers getting and releasing Runtimes at once never hold a closed one,
// and the set ends at its limit (run with -race).
func TestSoakRuntimesConcurrent(t *testing.T) {
	f := newFakeRuntimes(4)
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range 400 {
				rt, release, err := f.get(fmt.Sprint(r.IntN(12)), r.IntN(3), 0, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if f.isClosed(rt) {
					t.Error("a worker holds a closed Runtime")
				}
				release()
			}
		})
	}
	wg.Wait()
	if n := f.openCount(); n > 4 {
		t.Errorf("%d open at the end, want at most 4", n)
	}
}
