package gdn

import (
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/gdnerr"
)

// ErrInvalidArgument is wrapped by every error about a caller's argument
// (shape, dtype, pointer, size, cu_seqlens, an option); test with
// errors.Is.
var ErrInvalidArgument = gdnerr.ErrInvalidArgument

// ArgError reports a bad argument: Arg is its name as in the API ("q",
// "cu_seqlens", "Options.SMs", ...), Msg what was expected. It prints as
// "gdn: ARG: MSG" and wraps ErrInvalidArgument; get it with errors.As. (An
// alias: the layers inside gdn make these errors too.)
type ArgError = gdnerr.ArgError

// ErrNoCUDA is returned where a GPU is needed but the binary was built
// without the cuda build tag (or no CUDA driver is present).
var ErrNoCUDA = driver.ErrNoCUDA

// ErrUnsupportedGPU is wrapped by the errors for a GPU that gdn's kernels
// cannot run on (they need sm_90a: compute capability 9.0, an H100, H200,
// H20, GH200 or a MIG slice of one); test with errors.Is.
var ErrUnsupportedGPU = gdnerr.ErrUnsupportedGPU

// ErrClosed is returned by calls on a closed Runtime.
var ErrClosed = gdnerr.ErrClosed
