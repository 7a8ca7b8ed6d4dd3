//go:build !cuda

package driver

import "unsafe"

// CopyToDeviceAsync returns ErrNoCUDA.
func (c *Context) CopyToDeviceAsync(dst DevicePtr, src unsafe.Pointer, bytes int, s *Stream) error {
	return ErrNoCUDA
}

// CopyToHostAsync returns ErrNoCUDA.
func (c *Context) CopyToHostAsync(dst unsafe.Pointer, src DevicePtr, bytes int, s *Stream) error {
	return ErrNoCUDA
}
