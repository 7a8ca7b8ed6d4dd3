//go:build cuda

package driver

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// CopyToDevice returns with its data on the device: a kernel launched
// right after it on a non-blocking stream (not ordered after the legacy
// stream the copy ran on) reads the new data. From pageable memory
// cuMemcpyHtoD alone returns once the data is staged, before the DMA to
// the device ends; a launch right after can overtake the last pieces of a
// 64 MiB copy (its elements are all checked).
func TestCopyToDeviceLandsBeforeOtherStreams(t *testing.T) {
	c := openCtx(t)
	add, _ := loadTest(t, c)
	const n = 16 << 20 // 64 MiB of float32
	p := allocF32(t, c, n)
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	in := make([]float32, n)
	for round := 0; round < 8; round++ {
		for i := range in {
			in[i] = float32(round*3 + i%1000)
		}
		if err := addOneRoundTrip(c, add, s, p, in); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

// copyHelperEnv marks a process that TestCopyUnderContention started.
const copyHelperEnv = "GDN_DRIVER_COPY_HELPER"

// The same copies, and TestConcurrent's, in four processes at once. On an
// idle GPU a copy's DMA tends to end before the kernel after it starts;
// with other processes' copies and kernels time-sliced beside it, it does
// not. Before CopyToDevice waited for its DMA, this ran into stale reads
// in every process (4 to 28 wrong elements each, H100), where the two
// tests alone passed.
func TestCopyUnderContention(t *testing.T) {
	if os.Getenv(copyHelperEnv) != "" {
		t.Skip("a helper process: it runs the copies, not the contention")
	}
	if testing.Short() {
		t.Skip("runs the copy tests in three more processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const helpers = 3
	outs := make([]bytes.Buffer, helpers)
	cmds := make([]*exec.Cmd, helpers)
	for i := range cmds {
		cmds[i] = exec.Command(exe, "-test.run", "^(TestCopyToDeviceLandsBeforeOtherStreams|TestConcurrent)$", "-test.count=6")
		cmds[i].Env = append(os.Environ(), copyHelperEnv+"=1")
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatalf("helper %d: %v", i, err)
		}
	}
	for k := 0; k < 6; k++ {
		t.Run("copies", TestCopyToDeviceLandsBeforeOtherStreams)
		t.Run("concurrent", TestConcurrent)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			out := outs[i].Bytes()
			if len(out) > 4000 {
				out = out[len(out)-4000:]
			}
			t.Errorf("helper %d: %v\n%s", i, err, out)
		}
	}
}
