package hostpath

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/problem"
)

// Block is the device copy of one host call, from Upload: what
// gdn.DeviceCoreArgs and gdn.DeviceFullArgs hold. Its methods are safe from
// many goroutines: the memory is freed once, and not while a download
// reads it.
type Block struct {
	path   *Path
	layout *Layout
	// mu guards base: held for reading by a download's copy, for writing
	// by free. Taken before the Runtime's guard, never after it (Close,
	// waiting for the calls in flight, would wait for one that waits for
	// mu).
	mu   sync.RWMutex
	base driver.DevicePtr
}

// Upload allocates device memory for the call laid out by l (one
// allocation for every tensor), converts the inputs to their device dtypes
// on all cores, copies them, and fills the outputs with NaN; the data is on
// the device when it returns. The caller holds the Runtime's guard.
func (h *Path) Upload(l *Layout) (*Block, error) {
	base, err := h.ctx.Alloc(l.total)
	if err != nil {
		return nil, fmt.Errorf("gdn: allocate %d bytes: %w", l.total, err)
	}
	// Ordinary Go memory: a one-off upload would spend longer pinning a
	// buffer than the pinning saves on the copy.
	buf := make([]byte, l.inBytes)
	l.encodeInputs(buf)
	err = h.ctx.CopyToDevice(base, unsafe.Pointer(&buf[0]), l.inBytes)
	if err == nil {
		err = l.poisonOutputs(h.ctx, base)
	}
	if err == nil {
		// The poison's memsets run on the legacy stream, and callers go on
		// with streams of their own: wait for it (CopyToDevice waits for its
		// own copy). Not the whole context: a context-wide synchronisation
		// fails while any stream of it is capturing a graph (another
		// goroutine's Forward may be).
		err = h.ctx.WrapStream(0).Synchronize()
	}
	if err != nil {
		h.ctx.Free(base)
		return nil, fmt.Errorf("gdn: upload: %w", err)
	}
	return &Block{path: h, layout: l, base: base}, nil
}

// Core returns the core forward's arguments on the block (a Block of
// NewCoreLayout).
func (d *Block) Core() problem.Core { return *d.layout.coreArgs(d.base) }

// Full returns the full forward's arguments on the block (a Block of
// NewFullLayout).
func (d *Block) Full() problem.Full { return *d.layout.fullArgs(d.base) }

// Download copies the outputs back and widens them to float32.
func (d *Block) Download() (*Result, error) {
	if d == nil {
		return nil, errors.New("gdn: download of a nil or zero upload (from UploadCore or UploadFull)")
	}
	l := d.layout
	buf := make([]byte, l.total)
	if err := d.copyOutputs(buf); err != nil {
		return nil, err
	}
	res := &Result{}
	l.decodeOutputs(buf, res)
	return res, nil
}

// copyOutputs copies the outputs into their place in buf, a whole block.
func (d *Block) copyOutputs(buf []byte) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.base == 0 {
		return errors.New("gdn: download after Free")
	}
	if err := d.path.guard.Enter(); err != nil {
		return err
	}
	defer d.path.guard.Leave()
	l := d.layout
	if err := d.path.ctx.CopyToHost(unsafe.Pointer(&buf[l.inBytes]), d.base.Offset(l.inBytes), l.total-l.inBytes); err != nil {
		return fmt.Errorf("gdn: download: %w", err)
	}
	return nil
}

// Free releases the device memory, once: forget, called then, drops the
// holder's references to it. Later frees do nothing.
func (d *Block) Free(forget func()) error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.base == 0 {
		return nil
	}
	if err := d.path.guard.Enter(); err != nil {
		return err
	}
	defer d.path.guard.Leave()
	forget()
	base := d.base
	d.base = 0
	return d.path.ctx.Free(base)
}
