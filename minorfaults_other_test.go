//go:build !linux

package gdn

// minorFaults is 0 where getrusage does not report page faults (or is
// not there).
func minorFaults() int64 { return 0 }
