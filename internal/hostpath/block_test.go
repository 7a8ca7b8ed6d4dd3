package hostpath

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gdnjit/gdn/internal/gdnerr"
)

// openGuard is a Runtime's guard that never closes, or always refuses.
type openGuard struct{ closed bool }

func (g openGuard) Enter() error {
	if g.closed {
		return gdnerr.ErrClosed
	}
	return nil
}

func (openGuard) Leave() {}

// A block's memory is freed once however many goroutines Free it at once
// (forget runs once with it), and a Download after Free is an error; a
// nil block's Free is a no-op and its Download an error, not a panic. (No
// context here: the driver refuses the one Free that gets that far.)
func TestBlockFreeOnce(t *testing.T) {
	l, err := NewCoreLayout(layoutArgs())
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		d := &Block{path: &Path{guard: openGuard{}}, layout: l, base: 1 << 20}
		start := make(chan struct{})
		errs := make([]error, 8)
		var forgot atomic.Int32
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				<-start
				errs[i] = d.Free(func() { forgot.Add(1) })
			})
		}
		close(start)
		wg.Wait()
		freed := 0
		for _, err := range errs {
			if err != nil {
				freed++ // the driver's error: this Free reached it
			}
		}
		if freed != 1 || forgot.Load() != 1 {
			t.Fatalf("%d of %d concurrent Frees released the memory, forget ran %d times; want 1, 1", freed, len(errs), forgot.Load())
		}
		if _, err := d.Download(); err == nil {
			t.Fatal("Download after Free: no error")
		}
	}
	var none *Block
	if _, err := none.Download(); err == nil {
		t.Error("Download of a nil block: no error")
	}
	if err := none.Free(func() {}); err != nil {
		t.Errorf("Free of a nil block: %v", err)
	}
	closed := &Block{path: &Path{guard: openGuard{closed: true}}, layout: l, base: 1 << 20}
	if err := closed.Free(func() {}); !errors.Is(err, gdnerr.ErrClosed) {
		t.Errorf("Free after the Runtime's Close: %v, want ErrClosed", err)
	}
}

// The NaN fill's error says what failed without the "gdn: " that the call
// wrapping it (Upload, Forward) adds once.
func TestPoisonOutputsErrorOnce(t *testing.T) {
	l, err := NewCoreLayout(layoutArgs())
	if err != nil {
		t.Fatal(err)
	}
	err = l.poisonOutputs(nil, 1<<20)
	if err == nil || !strings.HasPrefix(err.Error(), "fill outputs with NaN: ") {
		t.Fatalf("poisonOutputs without a context: %v", err)
	}
	if _, err := (&Path{guard: openGuard{}}).Upload(l); err == nil || strings.Count(err.Error(), "gdn: ") != 1 {
		t.Errorf("Upload without a context: %v, want one gdn: prefix", err)
	}
}
