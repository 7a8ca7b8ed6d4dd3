package launch

import (
	"fmt"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/kernsrc"
)

// packedArgs hands the driver a kernel's parameters from a block packed by
// kernsrc (PrepParams, ScanParams), one argument per field.
func packedArgs(block []byte, fields []kernsrc.ParamField) *driver.Args {
	a := new(driver.Args)
	for _, f := range fields {
		a.Bytes(block[f.Offset:f.Offset+f.Size], f.Size)
	}
	return a
}

// launch enqueues prepared call e on stream s: through its graph from the
// second call on a stream not being captured, else directly. Resolving the
// kernel happens on an entry's first launch only; after that the path is
// driver calls on the entry's fixed data, and allocates nothing.
func (l *Launcher) launch(e *callEntry, s uintptr) error {
	if e.fn.Load() == nil {
		k, err := l.kernels.load(e.plan.Variant, e.plan.SharedBytes)
		if err != nil {
			return err
		}
		e.fn.Store(k.fn)
	}
	if e.split != nil && e.split.scanFn.Load() == nil {
		k, err := l.kernels.load(e.split.xferVariant, e.split.xferSmem)
		if err != nil {
			return err
		}
		e.split.xferFn.Store(k.fn)
		if k, err = l.kernels.load(e.split.scanVariant, e.split.scanSmem); err != nil {
			return err
		}
		e.split.scanFn.Store(k.fn)
	}
	stream := l.ctx.WrapStream(s) // inlined: stays on the stack
	if stream.Handle() == 0 || (l.graphs == nil && (e.split == nil || e.split.lease.Kept())) {
		return e.enqueue(l.ctx, stream) // neither question below needs the capture state
	}
	// One query serves both: a call launched into the caller's capture goes
	// straight into the caller's graph, and a split call's scratch then
	// lives on in that graph, so it is kept until Close (scratch.Lease.Keep).
	capturing, err := stream.IsCapturing()
	capturing = capturing || err != nil
	if capturing && e.split != nil {
		e.split.lease.Keep()
	}
	if l.graphs != nil && !capturing {
		if done, err := l.graphs.run(l.ctx, e, stream); done || err != nil {
			return err
		}
	}
	return e.enqueue(l.ctx, stream)
}

// enqueue launches e's kernel (e.fn set) with its plan's geometry and its
// packed parameters.
func (e *callEntry) enqueue(ctx *driver.Context, s *driver.Stream) error {
	if e.split != nil {
		return e.split.enqueue(ctx, e.fn.Load(), e.plan, s)
	}
	g, b := e.plan.Grid, e.plan.Block
	err := ctx.LaunchParams(e.fn.Load(), driver.Dim3{X: g[0], Y: g[1], Z: g[2]}, driver.Dim3{X: b[0], Y: b[1], Z: b[2]},
		e.plan.SharedBytes, s, e.params)
	if err != nil {
		return fmt.Errorf("gdn: launch %s: %w", e.plan.Variant.Name, err)
	}
	return nil
}
