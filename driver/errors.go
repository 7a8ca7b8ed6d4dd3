package driver

import (
	"errors"
	"fmt"
)

// ErrNoCUDA is returned by every entry point of the build without the cuda
// tag (and wrapped by nothing else): test for it with errors.Is.
var ErrNoCUDA = errors.New("driver: CUDA support not built in (build with -tags cuda)")

// ErrGreenUnsupported is wrapped by OpenGreen's error where the driver has
// no green contexts (before CUDA 12.4) or refuses them
// (CUDA_ERROR_NOT_SUPPORTED). OpenSMs then falls back to the whole device.
var ErrGreenUnsupported = errors.New("driver: green contexts unavailable")

// SMCountError is OpenGreen's (and OpenSMs') error for a slice larger than
// the device.
type SMCountError struct {
	Asked int // the SMs asked
	Have  int // the device's SMs
}

func (e *SMCountError) Error() string {
	return fmt.Sprintf("driver: %d SMs asked; the device has %d", e.Asked, e.Have)
}

// Error is a failed CUDA driver call.
type Error struct {
	Call    string // the driver entry point, e.g. "cuLaunchKernel"
	Code    int    // the CUresult value
	Name    string // e.g. "CUDA_ERROR_INVALID_VALUE" (cuGetErrorName); empty if unknown
	Message string // e.g. "invalid argument" (cuGetErrorString), possibly with detail such as a JIT log
}

// Error formats the failure as
// "driver: cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (1): invalid argument".
func (e *Error) Error() string {
	if e == nil {
		return "driver: <nil>"
	}
	name := e.Name
	if name == "" {
		name = "CUDA error"
	}
	s := fmt.Sprintf("driver: %s: %s (%d)", e.Call, name, e.Code)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Common CUresult codes, for comparing with Error.Code.
const (
	CodeInvalidValue  = 1   // CUDA_ERROR_INVALID_VALUE
	CodeOutOfMemory   = 2   // CUDA_ERROR_OUT_OF_MEMORY
	CodeNoDevice      = 100 // CUDA_ERROR_NO_DEVICE
	CodeInvalidDevice = 101 // CUDA_ERROR_INVALID_DEVICE
	CodeInvalidImage  = 200 // CUDA_ERROR_INVALID_IMAGE
	CodeInvalidPTX    = 218 // CUDA_ERROR_INVALID_PTX
	CodeNotFound      = 500 // CUDA_ERROR_NOT_FOUND
	CodeLaunchFailed  = 719 // CUDA_ERROR_LAUNCH_FAILED
)

// IsCode reports whether err is, or wraps, a *Error with the given CUresult code.
func IsCode(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
