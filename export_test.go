package gdn

import (
	"github.com/gdnjit/gdn/internal/launch"
	"github.com/gdnjit/gdn/internal/plan"
	"github.com/gdnjit/gdn/kernsrc"
)

// UseTestBuild makes rt compile every Hopper variant as a test build with
// the hooks' switches (kernsrc.HopperHooked); call it before rt's first
// call.
func UseTestBuild(rt *Runtime, h kernsrc.HopperHooks) {
	rt.dev.(*launch.Launcher).UseTestBuild(h)
}

// SpareCounts waits until no spare result of rt's ForwardHost is being
// prepared and returns the pool's counters: calls that took a spare,
// calls that found none, and calls that took one before it was ready
// (for the GPU tests and benchmarks of package gdn_test).
func SpareCounts(rt *Runtime) (hits, misses, waited int64) { return rt.host.SpareCounts() }

// MinorFaults returns the process's minor page faults so far (0 where
// getrusage does not report them), for BenchmarkForwardHost.
func MinorFaults() int64 { return minorFaults() }

// FullSlabCounts returns the full forward's working-buffer slabs that rt's
// prepared full calls use now, and how many it has allocated (for the GPU
// test of calls with new boundaries each time).
func FullSlabCounts(rt *Runtime) (live, allocs int) {
	return rt.dev.(*launch.Launcher).FullSlabCounts()
}

// NormInCoreMaxG is the largest G = Hv / Hq whose full forward normalises
// q and k in the core kernel (for the GPU tests' expected plans).
const NormInCoreMaxG = plan.NormInCoreMaxG
