package driver

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorFormat(t *testing.T) {
	e := &Error{Call: "cuLaunchKernel", Code: 1, Name: "CUDA_ERROR_INVALID_VALUE", Message: "invalid argument"}
	if got, want := e.Error(), "driver: cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (1): invalid argument"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	e = &Error{Call: "cuMemAlloc", Code: 12345}
	if got, want := e.Error(), "driver: cuMemAlloc: CUDA error (12345)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	var nilErr *Error
	if nilErr.Error() == "" {
		t.Error("nil *Error formats empty")
	}
	wrapped := fmt.Errorf("loading: %w", &Error{Call: "cuModuleGetFunction", Code: CodeNotFound, Name: "CUDA_ERROR_NOT_FOUND"})
	var target *Error
	if !errors.As(wrapped, &target) || target.Call != "cuModuleGetFunction" {
		t.Error("errors.As through wrapping")
	}
	if !IsCode(wrapped, CodeNotFound) || IsCode(wrapped, CodeInvalidValue) || IsCode(errors.New("x"), CodeNotFound) {
		t.Error("IsCode")
	}
	if !errors.Is(fmt.Errorf("x: %w", ErrNoCUDA), ErrNoCUDA) {
		t.Error("ErrNoCUDA wrapping")
	}
}

func TestSMCountError(t *testing.T) {
	var err error = fmt.Errorf("open: %w", &SMCountError{Asked: 200, Have: 132})
	var e *SMCountError
	if !errors.As(err, &e) || e.Asked != 200 || e.Have != 132 {
		t.Fatalf("errors.As: %v", err)
	}
	if got, want := e.Error(), "driver: 200 SMs asked; the device has 132"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if errors.Is(err, ErrGreenUnsupported) {
		t.Error("an SMCountError reads as ErrGreenUnsupported")
	}
}
