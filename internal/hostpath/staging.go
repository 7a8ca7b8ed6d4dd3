package hostpath

import (
	"sync"

	"github.com/gdnjit/gdn/driver"
)

// staging keeps the buffers of ForwardHost's last call for the next
// one: a device block for every tensor of the call and a pinned host block
// mirroring it. Allocating both costs far more than the copies they serve
// (pinning hundreds of megabytes takes tens of milliseconds), so a repeated
// call of the same or a smaller size allocates nothing. One set is kept, the
// largest seen; a concurrent call that finds it taken allocates its own,
// freed when it ends. Close frees the kept set.
type staging struct {
	mu   sync.Mutex
	idle *stagingSet
}

// stagingSet is one device block and its host mirror, with the events
// that mark the pieces of a download.
type stagingSet struct {
	size   int
	dev    driver.DevicePtr
	pinned *driver.HostBuffer // nil when page-locked memory was refused
	host   []byte             // pinned.Bytes(), or ordinary Go memory
	events []*driver.Event    // created by eventsFor as calls need them
}

// eventsFor returns n events of the set, creating those it lacks; they
// are kept for the next call and destroyed with the set.
func (set *stagingSet) eventsFor(ctx *driver.Context, n int) ([]*driver.Event, error) {
	for len(set.events) < n {
		ev, err := ctx.NewEvent()
		if err != nil {
			return nil, err
		}
		set.events = append(set.events, ev)
	}
	return set.events[:n], nil
}

// stagingGranule rounds set sizes up, so that calls of slightly different
// sizes share a set.
const stagingGranule = 2 << 20

// take returns a set of at least size bytes: the kept one when it is idle
// and large enough, else a new one.
func (s *staging) take(ctx *driver.Context, size int) (*stagingSet, error) {
	s.mu.Lock()
	if set := s.idle; set != nil && set.size >= size {
		s.idle = nil
		s.mu.Unlock()
		return set, nil
	}
	s.mu.Unlock()
	size = (size + stagingGranule - 1) / stagingGranule * stagingGranule
	dev, err := ctx.Alloc(size)
	if err != nil {
		return nil, err
	}
	set := &stagingSet{size: size, dev: dev}
	if set.pinned, err = ctx.AllocHost(size); err == nil {
		set.host = set.pinned.Bytes()
	} else {
		// Page-locked memory is limited (RLIMIT_MEMLOCK, containers):
		// ordinary memory works, at the driver's slower staged copy.
		set.pinned, set.host = nil, make([]byte, size)
	}
	return set, nil
}

// put hands a set back after a call: it is kept when it is the largest,
// else freed.
func (s *staging) put(ctx *driver.Context, set *stagingSet) {
	s.mu.Lock()
	if s.idle == nil || set.size > s.idle.size {
		set, s.idle = s.idle, set
	}
	s.mu.Unlock()
	set.free(ctx)
}

// free releases the kept set (at Close).
func (s *staging) free(ctx *driver.Context) {
	s.mu.Lock()
	set := s.idle
	s.idle = nil
	s.mu.Unlock()
	set.free(ctx)
}

func (set *stagingSet) free(ctx *driver.Context) {
	if set == nil {
		return
	}
	ctx.Free(set.dev)
	set.pinned.Free()
	for _, ev := range set.events {
		ev.Destroy()
	}
	set.dev, set.pinned, set.host, set.events = 0, nil, nil, nil
}
