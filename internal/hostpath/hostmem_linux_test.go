package hostpath

import (
	"syscall"
	"unsafe"
)

// minorFaults returns the process's minor page faults so far.
func minorFaults() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return int64(ru.Minflt)
}

// adviseHugePages asks for transparent huge pages (madvise MADV_HUGEPAGE)
// on the 2 MiB-aligned pages that lie wholly inside x, for
// BenchmarkPrepareResult's evaluation of them; it reports whether the
// kernel took the advice (it refuses it without THP support).
func adviseHugePages(x []float32) bool {
	const huge = 2 << 20
	if len(x) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(&x[0]))
	lo, hi := (start+huge-1)&^(huge-1), (start+uintptr(len(x))*4)&^(huge-1)
	if hi <= lo {
		return false
	}
	p := unsafe.Add(unsafe.Pointer(&x[0]), lo-start)
	return syscall.Madvise(unsafe.Slice((*byte)(p), hi-lo), syscall.MADV_HUGEPAGE) == nil
}
