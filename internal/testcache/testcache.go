// Package testcache gives the tests that need compiled kernels a kernel
// cache folder. NVRTC compiles dominate the CPU tests' time, and most of
// those tests check what a compiled kernel is (its report, that it builds),
// not that a compile happens: a disk-cache entry, keyed by every source,
// option, target and the NVRTC version, is that same kernel. `make test`
// sets GDN_TEST_KERNEL_CACHE to a folder kept between runs, so a kernel
// compiles once per machine and source; without it each test gets a fresh
// folder and compiles everything, as before. Tests of the compile or the
// cache themselves keep folders of their own.
package testcache

import (
	"os"
	"testing"
)

// Env names the folder of kernels shared by the tests.
const Env = "GDN_TEST_KERNEL_CACHE"

// Dir is $GDN_TEST_KERNEL_CACHE (created if need be), else a new temporary
// folder of t.
func Dir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv(Env); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("%s=%s: %v", Env, d, err)
		}
		return d
	}
	return t.TempDir()
}
