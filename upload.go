package gdn

import (
	"errors"

	"github.com/gdnjit/gdn/internal/hostpath"
)

// DeviceCoreArgs are device copies of a HostCoreArgs call, from UploadCore:
// Args is ready for Forward (outputs allocated and filled with NaN), and
// Free releases the memory behind it.
type DeviceCoreArgs struct {
	Args *CoreArgs
	blk  *hostpath.Block
}

// UploadCore allocates device memory for a call described by h (one
// allocation for every tensor), converts the inputs to their device dtypes
// on all cores, copies them, and fills the outputs with NaN. The data is on
// the device when it returns, so Args may be used on any stream. It is how
// tests, benchmarks and examples that call Forward themselves set up; Free
// the result when done.
func (rt *Runtime) UploadCore(h *HostCoreArgs) (*DeviceCoreArgs, error) {
	l, err := hostpath.NewCoreLayout((*hostpath.CoreArgs)(h))
	if err != nil {
		return nil, err
	}
	blk, err := rt.upload(l)
	if err != nil {
		return nil, err
	}
	return &DeviceCoreArgs{Args: coreArgsOf(blk.Core()), blk: blk}, nil
}

// Download copies the outputs (o, and ht when the call asked for it) back
// and widens them to float32. Synchronise the stream that wrote them first.
// Download and Free are safe from many goroutines: a Free waits for the
// copies of Downloads in flight, and a Download after it is an error.
func (d *DeviceCoreArgs) Download() (*HostCoreResult, error) {
	if d == nil {
		return nil, errors.New("gdn: Download of a nil *DeviceCoreArgs")
	}
	res, err := d.blk.Download()
	return (*HostCoreResult)(res), err
}

// Free releases the device memory and sets Args to nil; Args must not be
// used afterwards. A second Free does nothing. After the Runtime's Close,
// which released the memory with the device context, Free returns
// ErrClosed.
func (d *DeviceCoreArgs) Free() error {
	if d == nil {
		return nil
	}
	return d.blk.Free(func() { d.Args = nil })
}

// DeviceFullArgs are device copies of a HostFullArgs call, from UploadFull:
// Args is ready for ForwardFull (outputs allocated and filled with NaN),
// and Free releases the memory behind it.
type DeviceFullArgs struct {
	Args *FullArgs
	blk  *hostpath.Block
}

// UploadFull is UploadCore for the full forward: one allocation for every
// tensor of h, inputs converted and copied, outputs filled with NaN, the
// data on the device when it returns. Free the result when done.
func (rt *Runtime) UploadFull(h *HostFullArgs) (*DeviceFullArgs, error) {
	l, err := hostpath.NewFullLayout((*hostpath.FullArgs)(h))
	if err != nil {
		return nil, err
	}
	blk, err := rt.upload(l)
	if err != nil {
		return nil, err
	}
	return &DeviceFullArgs{Args: fullArgsOf(blk.Full()), blk: blk}, nil
}

// Download is DeviceCoreArgs.Download: the outputs, widened to float32.
func (d *DeviceFullArgs) Download() (*HostCoreResult, error) {
	if d == nil {
		return nil, errors.New("gdn: Download of a nil *DeviceFullArgs")
	}
	res, err := d.blk.Download()
	return (*HostCoreResult)(res), err
}

// Free is DeviceCoreArgs.Free: the device memory released, Args set to nil.
func (d *DeviceFullArgs) Free() error {
	if d == nil {
		return nil
	}
	return d.blk.Free(func() { d.Args = nil })
}

// upload is the host path's Upload under the Close guard.
func (rt *Runtime) upload(l *hostpath.Layout) (*hostpath.Block, error) {
	if err := rt.guard.Enter(); err != nil {
		return nil, err
	}
	defer rt.guard.Leave()
	return rt.host.Upload(l)
}
