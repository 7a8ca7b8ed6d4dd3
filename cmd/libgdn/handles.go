package main

import (
	"fmt"
	"sync"

	"github.com/gdnjit/gdn"
)

// Runtimes cross the ABI as integer handles: a C caller may keep no Go
// pointer. The table maps each open handle to its Runtime and the message of
// its last failed call; handles count up from 1 and are never reused, so a
// closed one stays unknown.

// runtimeEntry is one open runtime.
type runtimeEntry struct {
	rt *gdn.Runtime

	mu      sync.Mutex
	lastErr string
}

var handles struct {
	mu      sync.RWMutex
	next    uint64
	open    map[uint64]*runtimeEntry
	errMu   sync.Mutex
	lastErr string // slot 0: failures that belong to no open runtime
}

// register stores rt under a new handle.
func register(rt *gdn.Runtime) uint64 {
	handles.mu.Lock()
	defer handles.mu.Unlock()
	if handles.open == nil {
		handles.open = map[uint64]*runtimeEntry{}
	}
	handles.next++
	handles.open[handles.next] = &runtimeEntry{rt: rt}
	return handles.next
}

// lookup returns the runtime of handle h, or nil.
func lookup(h uint64) *runtimeEntry {
	handles.mu.RLock()
	defer handles.mu.RUnlock()
	return handles.open[h]
}

// unregister removes handle h and returns its runtime, or nil.
func unregister(h uint64) *runtimeEntry {
	handles.mu.Lock()
	defer handles.mu.Unlock()
	e := handles.open[h]
	delete(handles.open, h)
	return e
}

// errUnknown is the error of a call on a handle that is not open.
func errUnknown(h uint64) error { return unknownHandle(h) }

// unknownHandle is a handle not open; it wraps gdn.ErrClosed.
type unknownHandle uint64

func (h unknownHandle) Error() string {
	return fmt.Sprintf("gdn: runtime handle %d is closed or was never opened", uint64(h))
}

func (unknownHandle) Unwrap() error { return gdn.ErrClosed }

// fail records err with e (slot 0 when e is nil) and returns its status.
func fail(e *runtimeEntry, err error) int32 {
	if e == nil {
		handles.errMu.Lock()
		handles.lastErr = err.Error()
		handles.errMu.Unlock()
	} else {
		e.mu.Lock()
		e.lastErr = err.Error()
		e.mu.Unlock()
	}
	return status(err)
}

// lastError returns the message kept for handle h (slot 0 for h = 0 or an
// unknown handle).
func lastError(h uint64) string {
	if e := lookup(h); e != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.lastErr
	}
	handles.errMu.Lock()
	defer handles.errMu.Unlock()
	return handles.lastErr
}
