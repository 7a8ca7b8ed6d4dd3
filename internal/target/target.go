// Package target says which GPUs gdn's kernels run on, and reads a compile
// target as a command line gives it, so that Open and the tools refuse any
// other GPU in one line rather than with a failed launch or pages of ptxas
// errors later.
package target

import (
	"fmt"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/gdnerr"
	"github.com/gdnjit/gdn/jit"
)

// Arch is the one GPU architecture gdn's kernels are compiled for.
// They use Hopper's arch-specific instructions (wgmma tensor-core products,
// TMA copies, setmaxnreg), which only sm_90a code may contain: plain sm_90
// code cannot express them, and only compute capability 9.0 runs sm_90a.
const Arch = "sm_90a"

// hopperGPUs names the GPUs that run sm_90a code, for error messages.
const hopperGPUs = "compute capability 9.0: H100, H200, H20, GH200 or a MIG slice of one"

// Parse reads an architecture as a command line gives it (sm_90a, 90a,
// sm_90 or 90) and returns the target to compile gdn's kernels for. sm_90
// is taken to mean sm_90a, and note says so in one line: a GPU of compute
// capability 9.0 runs either, and gdn's kernels exist only in the second.
// Any other architecture is a one-line error wrapping
// gdnerr.ErrUnsupportedGPU.
func Parse(arch string) (t jit.Target, note string, err error) {
	t, err = jit.ParseTarget(arch)
	if err != nil {
		return t, "", err
	}
	if t.CC() != 90 || t.PTX {
		return jit.Target{}, "", fmt.Errorf("gdn: %s: %w: the kernels need %s (%s)", arch, gdnerr.ErrUnsupportedGPU, Arch, hopperGPUs)
	}
	if !t.ArchSpecific {
		t.ArchSpecific = true
		note = fmt.Sprintf("%s taken as %s: the kernels use wgmma and TMA instructions, which only arch-specific sm_90a code contains", arch, Arch)
	}
	return t, note, nil
}

// CheckDevice refuses, in one line, a GPU that cannot run sm_90a code.
func CheckDevice(info driver.DeviceInfo) error {
	if info.Major == 9 && info.Minor == 0 {
		return nil
	}
	return fmt.Errorf("gdn: device %d (%s, compute capability %d.%d): %w: the kernels need %s (%s)",
		info.Ordinal, info.Name, info.Major, info.Minor, gdnerr.ErrUnsupportedGPU, Arch, hopperGPUs)
}
