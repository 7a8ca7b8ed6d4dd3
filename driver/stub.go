//go:build !cuda

package driver

import "unsafe"

// This file is the build without the cuda tag: the same exported API, every
// entry point returning ErrNoCUDA. gorgonia.org/cu is not linked.

// Context is the retained primary context of one device, or a green context
// on a slice of its SMs; without the cuda tag none can be opened.
type Context struct{}

// Stream is a CUDA stream (stub).
type Stream struct{}

// Event is a CUDA event (stub).
type Event struct{}

// Module is a loaded CUDA module (stub).
type Module struct{}

// Function is a kernel of a Module (stub).
type Function struct{}

// Graph is a captured CUDA graph (stub).
type Graph struct{}

// GraphExec is an instantiated graph (stub).
type GraphExec struct{}

// DeviceCount returns ErrNoCUDA.
func DeviceCount() (int, error) { return 0, ErrNoCUDA }

// Open returns ErrNoCUDA.
func Open(ordinal int) (*Context, error) { return nil, ErrNoCUDA }

// OpenGreen returns ErrNoCUDA.
func OpenGreen(ordinal, sms int) (*Context, error) { return nil, ErrNoCUDA }

// OpenSMs returns ErrNoCUDA.
func OpenSMs(ordinal, sms int) (*Context, error) { return nil, ErrNoCUDA }

// Info returns a zero DeviceInfo.
func (c *Context) Info() DeviceInfo { return DeviceInfo{} }

// Handle returns 0.
func (c *Context) Handle() uintptr { return 0 }

// Close returns ErrNoCUDA.
func (c *Context) Close() error { return ErrNoCUDA }

// Synchronize returns ErrNoCUDA.
func (c *Context) Synchronize() error { return ErrNoCUDA }

// SynchronizeOrWait returns ErrNoCUDA.
func (c *Context) SynchronizeOrWait() error { return ErrNoCUDA }

// MemInfo returns ErrNoCUDA.
func (c *Context) MemInfo() (free, total uint64, err error) { return 0, 0, ErrNoCUDA }

// Alloc returns ErrNoCUDA.
func (c *Context) Alloc(bytes int) (DevicePtr, error) { return 0, ErrNoCUDA }

// Free returns ErrNoCUDA.
func (c *Context) Free(p DevicePtr) error { return ErrNoCUDA }

// CopyToDevice returns ErrNoCUDA.
func (c *Context) CopyToDevice(dst DevicePtr, src unsafe.Pointer, bytes int) error { return ErrNoCUDA }

// CopyToHost returns ErrNoCUDA.
func (c *Context) CopyToHost(dst unsafe.Pointer, src DevicePtr, bytes int) error { return ErrNoCUDA }

// CopyDeviceAsync returns ErrNoCUDA.
func (c *Context) CopyDeviceAsync(dst, src DevicePtr, bytes int, s *Stream) error { return ErrNoCUDA }

// MemsetD8 returns ErrNoCUDA.
func (c *Context) MemsetD8(p DevicePtr, v uint8, n int, s *Stream) error { return ErrNoCUDA }

// MemsetD16 returns ErrNoCUDA.
func (c *Context) MemsetD16(p DevicePtr, v uint16, n int, s *Stream) error { return ErrNoCUDA }

// MemsetD32 returns ErrNoCUDA.
func (c *Context) MemsetD32(p DevicePtr, v uint32, n int, s *Stream) error { return ErrNoCUDA }

// NewStream returns ErrNoCUDA.
func (c *Context) NewStream() (*Stream, error) { return nil, ErrNoCUDA }

// WrapStream returns a Stream whose methods return ErrNoCUDA.
func (c *Context) WrapStream(handle uintptr) *Stream { return &Stream{} }

// Handle returns 0.
func (s *Stream) Handle() uintptr { return 0 }

// Synchronize returns ErrNoCUDA.
func (s *Stream) Synchronize() error { return ErrNoCUDA }

// Destroy returns ErrNoCUDA.
func (s *Stream) Destroy() error { return ErrNoCUDA }

// BeginCapture returns ErrNoCUDA.
func (s *Stream) BeginCapture() error { return ErrNoCUDA }

// IsCapturing returns ErrNoCUDA.
func (s *Stream) IsCapturing() (bool, error) { return false, ErrNoCUDA }

// EndCapture returns ErrNoCUDA.
func (s *Stream) EndCapture() (*Graph, error) { return nil, ErrNoCUDA }

// NewEvent returns ErrNoCUDA.
func (c *Context) NewEvent() (*Event, error) { return nil, ErrNoCUDA }

// Record returns ErrNoCUDA.
func (e *Event) Record(s *Stream) error { return ErrNoCUDA }

// Synchronize returns ErrNoCUDA.
func (e *Event) Synchronize() error { return ErrNoCUDA }

// Destroy returns ErrNoCUDA.
func (e *Event) Destroy() error { return ErrNoCUDA }

// ElapsedMs returns ErrNoCUDA.
func ElapsedMs(start, end *Event) (float32, error) { return 0, ErrNoCUDA }

// LoadModule returns ErrNoCUDA.
func (c *Context) EncodeTiled(dt TensorDtype, base DevicePtr, dims []uint64, strides []uint64, box []uint32, swizzle Swizzle) (TensorMap, error) {
	if err := validateTiled(dt, base, dims, strides, box, swizzle); err != nil {
		return TensorMap{}, err
	}
	return TensorMap{}, ErrNoCUDA
}

func (c *Context) LoadModule(image []byte) (*Module, error) { return nil, ErrNoCUDA }

// Unload returns ErrNoCUDA.
func (m *Module) Unload() error { return ErrNoCUDA }

// Function returns ErrNoCUDA.
func (m *Module) Function(name string) (*Function, error) { return nil, ErrNoCUDA }

// Name returns "".
func (f *Function) Name() string { return "" }

// Handle returns 0.
func (f *Function) Handle() uintptr { return 0 }

// SetMaxDynamicShared returns ErrNoCUDA.
func (f *Function) SetMaxDynamicShared(bytes int) error { return ErrNoCUDA }

// Attributes returns ErrNoCUDA.
func (f *Function) Attributes() (FuncAttributes, error) { return FuncAttributes{}, ErrNoCUDA }

// Launch returns ErrNoCUDA.
func (c *Context) Launch(f *Function, grid, block Dim3, sharedBytes int, s *Stream, args *Args) error {
	return ErrNoCUDA
}

// KernelParams is an argument list packed into C memory (stub).
type KernelParams struct{}

// NewKernelParams returns an error recorded by a's adders, else ErrNoCUDA.
func NewKernelParams(a *Args) (*KernelParams, error) {
	if err := a.Err(); err != nil {
		return nil, err
	}
	return nil, ErrNoCUDA
}

// Len returns 0.
func (p *KernelParams) Len() int { return 0 }

// Free does nothing.
func (p *KernelParams) Free() {}

// LaunchParams returns ErrNoCUDA.
func (c *Context) LaunchParams(f *Function, grid, block Dim3, sharedBytes int, s *Stream, p *KernelParams) error {
	return ErrNoCUDA
}

// DependentLaunch reports false.
func (c *Context) DependentLaunch() bool { return false }

// LaunchParamsDependent returns ErrNoCUDA.
func (c *Context) LaunchParamsDependent(f *Function, grid, block Dim3, sharedBytes int, s *Stream, p *KernelParams) error {
	return ErrNoCUDA
}

// Instantiate returns ErrNoCUDA.
func (g *Graph) Instantiate() (*GraphExec, error) { return nil, ErrNoCUDA }

// KernelNodes returns ErrNoCUDA.
func (g *Graph) KernelNodes() ([]GraphNode, error) { return nil, ErrNoCUDA }

// Handle returns 0.
func (g *Graph) Handle() uintptr { return 0 }

// Destroy returns ErrNoCUDA.
func (g *Graph) Destroy() error { return ErrNoCUDA }

// Launch returns ErrNoCUDA.
func (e *GraphExec) Launch(s *Stream) error { return ErrNoCUDA }

// SetKernelNodeArgs returns ErrNoCUDA.
func (e *GraphExec) SetKernelNodeArgs(n GraphNode, f *Function, grid, block Dim3, sharedBytes int, args *Args) error {
	return ErrNoCUDA
}

// Handle returns 0.
func (e *GraphExec) Handle() uintptr { return 0 }

// Destroy returns ErrNoCUDA.
func (e *GraphExec) Destroy() error { return ErrNoCUDA }

// encodeTiled is reached only with valid arguments.
func encodeTiled(dt TensorDtype, base DevicePtr, dims []uint64, strides []uint64, box []uint32, swizzle Swizzle) (TensorMap, error) {
	return TensorMap{}, ErrNoCUDA
}

// RelaxedCapture returns ErrNoCUDA.
func (c *Context) RelaxedCapture(f func() error) error { return ErrNoCUDA }
