package main

import (
	"errors"

	"github.com/gdnjit/gdn"
)

// status maps an error of the Go API to its gdn_status.
func status(err error) int32 {
	switch {
	case err == nil:
		return statusOK
	case errors.Is(err, gdn.ErrInvalidArgument):
		return statusInvalidArgument
	case errors.Is(err, gdn.ErrClosed):
		return statusClosed
	case errors.Is(err, gdn.ErrNoCUDA):
		return statusNoCUDA
	case errors.Is(err, gdn.ErrUnsupportedGPU):
		return statusUnsupportedGPU
	}
	return statusOther
}
