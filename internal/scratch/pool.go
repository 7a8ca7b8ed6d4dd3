// Package scratch owns the device memory that prepared calls work in: a
// split call's segment tables and states, a full call's chunk table and
// working buffers. Its vocabulary is three words: a call Allocates its
// scratch (a Lease) when it is prepared, Keeps it when it is launched into
// a caller's own graph capture, and Releases it when the call is dropped.
// The Pool decides when released memory may really be freed: a launched
// graph may still read it, and making sure it does not takes a context
// synchronisation, which must not run while a caller captures a graph.
package scratch

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/gdnerr"
)

// Pool owns a Runtime's scratch memory: the calls' own tables, the slabs
// of working buffers calls share (slabs.go) and the memory released but
// not yet freed (retired.go). Safe for concurrent use.
type Pool struct {
	dev     Device
	slabs   slabTable
	retired retired
	reclaim func() bool // SetReclaim's; nil: none
}

// NewPool returns an empty pool on dev.
func NewPool(dev Device) *Pool {
	p := &Pool{dev: dev}
	p.slabs.pool, p.retired.dev = p, dev
	return p
}

// region is bytes of device memory from p.
type region struct {
	p     driver.DevicePtr
	bytes int
}

// Lease is one prepared call's scratch: its table, uploaded into memory of
// its own, and its share of the slab of the outputs it writes. A call that
// holds a Lease may launch kernels that read it until it Releases it.
type Lease struct {
	pool     *Pool
	table    region
	key      Key
	slab     *slab
	need     int // the bytes of the slab the call uses
	kept     atomic.Bool
	released atomic.Bool
}

// Allocate allocates a call's scratch: table uploaded to memory of its
// own (the copy has landed when Allocate returns), and slabBytes of the
// slab of key. Allocation runs in relaxed capture mode: another goroutine
// may be capturing a graph. After Close it returns gdnerr.ErrClosed.
func (p *Pool) Allocate(table []int32, key Key, slabBytes int) (*Lease, error) {
	l := &Lease{pool: p, key: key, need: slabBytes}
	bytes := (4*len(table) + 255) &^ 255
	err := p.dev.RelaxedCapture(func() error {
		var err error
		if l.table.p, err = p.alloc(bytes); err != nil {
			return err
		}
		l.table.bytes = bytes
		return p.dev.Upload(l.table.p, unsafe.Pointer(&table[0]), 4*len(table))
	})
	if err != nil {
		p.freeUnread(l.table)
		return nil, fmt.Errorf("table (%d bytes): %w", bytes, err)
	}
	if l.slab, err = p.slabs.acquire(key, slabBytes); err != nil {
		p.freeUnread(l.table)
		if errors.Is(err, gdnerr.ErrClosed) {
			return nil, err
		}
		return nil, fmt.Errorf("working buffers (%d bytes): %w", slabBytes, err)
	}
	return l, nil
}

// Table is the address of the lease's table.
func (l *Lease) Table() driver.DevicePtr { return l.table.p }

// Slab is the address of the lease's share of its slab (its start).
func (l *Lease) Slab() driver.DevicePtr { return l.slab.mem }

// Bytes is the scratch the call is charged: its table and its share of the
// slab (its own needs), so that a cache bounds calls as if each had its
// own buffers. (Charged the slab's whole size, a small call on a slab a
// long one had grown would count as long and be evicted again and again.)
func (l *Lease) Bytes() int { return l.table.bytes + l.need }

// Sizes returns the bytes of the lease's table and of the whole slab it
// shares (tests).
func (l *Lease) Sizes() (table, slab int) { return l.table.bytes, l.slab.bytes }

// Keep marks the lease as launched into a caller's own stream capture: the
// caller's graph holds kernel parameters that point into it and may be
// replayed at any time until the Runtime closes, so its memory, slab
// included, is freed at Close only, whatever happens to the call.
func (l *Lease) Keep() {
	if l == nil {
		return
	}
	l.kept.Store(true)
	l.pool.slabs.keep(l.slab)
}

// Kept reports whether Keep was called.
func (l *Lease) Kept() bool { return l != nil && l.kept.Load() }

// Release ends the call's use of the lease. Its memory is freed once no
// launch can read it: after a later synchronisation, or at Close when
// kept. A second Release, or one on nil, does nothing.
func (l *Lease) Release() {
	if l == nil || l.released.Swap(true) {
		return
	}
	l.pool.slabs.release(l.key, l.slab)
	l.pool.retired.add(l.table, l.kept.Load())
}

// SetReclaim gives the pool the function that drops the prepared calls
// no call holds (their scratch then comes back to the pool) and reports
// whether it dropped any. Call it before the pool is used.
func (p *Pool) SetReclaim(f func() bool) { p.reclaim = f }

// alloc allocates device memory (in relaxed capture mode, as every
// allocation here is made). When the device is out of memory, it gives
// back what the Runtime holds without using it: the prepared calls no call
// holds (SetReclaim) and the released scratch that waits to be freed,
// after the synchronisation that makes freeing it safe. Then it tries once
// more: memory the Runtime keeps only to go faster next time must not fail
// a call that needs it. (During a capture the synchronisation fails, the
// memory stays, and the error stands.)
func (p *Pool) alloc(bytes int) (driver.DevicePtr, error) {
	m, err := p.dev.Alloc(bytes)
	if err == nil || !driver.IsCode(err, driver.CodeOutOfMemory) {
		return m, err
	}
	dropped := p.reclaim != nil && p.reclaim()
	if freed := p.retired.free(); !dropped && !freed {
		return m, err
	}
	return p.dev.Alloc(bytes)
}

// freeUnread frees memory no launch has read (r.p 0: nothing).
func (p *Pool) freeUnread(r region) {
	if r.p != 0 {
		p.dev.RelaxedCapture(func() error { return p.dev.Free(r.p) })
	}
}

// Close refuses later allocations and frees every released block, kept
// ones included (the Runtime is closing: no graph of a caller may be
// launched any more). Leases still held are freed by their Release.
func (p *Pool) Close() {
	p.slabs.close()
	p.retired.close()
}

// SlabCounts returns the slabs of a kind in use and those allocated so far
// (tests).
func (p *Pool) SlabCounts(kind Kind) (live, allocs int) { return p.slabs.counts(kind) }

// Waiting returns the released blocks that wait for a synchronisation
// (tests).
func (p *Pool) Waiting() int {
	p.retired.mu.Lock()
	defer p.retired.mu.Unlock()
	return len(p.retired.mem)
}
