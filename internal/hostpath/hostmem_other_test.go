//go:build !linux

package hostpath

// minorFaults is 0 where getrusage does not report page faults (or is
// not there).
func minorFaults() int64 { return 0 }

// adviseHugePages does nothing outside Linux.
func adviseHugePages(x []float32) bool { return false }
