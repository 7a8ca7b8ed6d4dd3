package launch

import "testing"

// testEntry is a heldCache entry that records its freeing.
type testEntry struct {
	holdState
	bytes int
	freed int
}

func (e *testEntry) hold() *holdState    { return &e.holdState }
func (e *testEntry) scratchBytes() int   { return e.bytes }
func (e *testEntry) sameSeqs([]int) bool { return true }
func (e *testEntry) free()               { e.freed++ }

// dropIdle frees the entries no call holds, now, and keeps a held one
// cached; once released, the next dropIdle frees it, and a cache with
// nothing idle reports so.
func TestHeldCacheDropIdle(t *testing.T) {
	c := heldCache[int, *testEntry]{limit: 8, scratchLimit: 1 << 20}
	idle, held := &testEntry{bytes: 100}, &testEntry{bytes: 200}
	for k, e := range []*testEntry{idle, held} {
		if _, err := c.put(k, e, nil); err != nil {
			t.Fatal(err)
		}
	}
	c.release(idle) // put returned both held: idle is no longer
	if !c.dropIdle() {
		t.Fatal("dropIdle found nothing idle")
	}
	if idle.freed != 1 || held.freed != 0 || c.len() != 1 || c.scratch != 200 {
		t.Fatalf("freed idle %d, held %d; %d entries, %d bytes left; want 1, 0, 1, 200", idle.freed, held.freed, c.len(), c.scratch)
	}
	if _, found, _, _ := c.get(0, nil); found {
		t.Error("a dropped entry is still found")
	}
	c.release(held)
	if held.freed != 0 {
		t.Error("a cached entry was freed at its release")
	}
	if !c.dropIdle() || held.freed != 1 || c.len() != 0 || c.scratch != 0 {
		t.Errorf("second drop: freed %d, %d entries, %d bytes; want 1, 0, 0", held.freed, c.len(), c.scratch)
	}
	if c.dropIdle() {
		t.Error("an empty cache reported something dropped")
	}
}
