package jit

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/gdnjit/gdn/kernsrc"
)

// childEnv makes the test binary act as a helper process (see TestMain):
// its value names the job, and GDN_CACHE_DIR the cache to use.
const childEnv = "GDN_JIT_TEST_CHILD"

// childResult is what a helper process prints as JSON on stdout.
type childResult struct {
	Key       string `json:"key"`
	FromDisk  bool   `json:"from_disk"`
	ElapsedNs int64  `json:"elapsed_ns"`
	Registers int    `json:"registers"`
	Error     string `json:"error,omitempty"`
}

func TestMain(m *testing.M) {
	if job := os.Getenv(childEnv); job != "" {
		os.Exit(runChild(job))
	}
	if job := os.Getenv(faultChildEnv); job != "" {
		os.Exit(runFaultChild(job))
	}
	os.Exit(m.Run())
}

// runChild compiles the catalogue variant named job through the disk cache
// of GDN_CACHE_DIR and prints a childResult.
func runChild(job string) int {
	res := childResult{}
	defer func() { json.NewEncoder(os.Stdout).Encode(res) }()
	v, ok := kernsrc.Lookup(job)
	if !ok {
		res.Error = "no variant " + job
		return 2
	}
	disk, err := OpenDiskCache("")
	if err != nil {
		res.Error = err.Error()
		return 1
	}
	req, err := RequestFor(v, Target{Major: 9, Minor: 0, ArchSpecific: true})
	if err != nil {
		res.Error = err.Error()
		return 1
	}
	a, err := NewCompiler(disk).Compile(req)
	if err != nil {
		res.Error = err.Error()
		return 1
	}
	if a.DiskErr != nil {
		res.Error = a.DiskErr.Error()
		return 1
	}
	res.Key, res.FromDisk, res.ElapsedNs = a.Key, a.FromDisk, int64(a.Elapsed)
	if f, ok := a.Report.Function(a.Symbol(v.Kernel)); ok {
		res.Registers = f.Registers
	}
	return 0
}

// childCmd prepares the test binary as a helper process compiling variant
// into cacheDir, with extra environment variables.
func childCmd(t *testing.T, variant, cacheDir string, env ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+variant, CacheDirEnv+"="+cacheDir)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// parseChild reads a helper's output.
func parseChild(out []byte) (childResult, error) {
	var r childResult
	if err := json.Unmarshal(out, &r); err != nil {
		return r, fmt.Errorf("child output %q: %v", out, err)
	}
	if r.Error != "" {
		return r, fmt.Errorf("child: %s", r.Error)
	}
	return r, nil
}
