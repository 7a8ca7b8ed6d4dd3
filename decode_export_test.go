package gdn

import "github.com/gdnjit/gdn/internal/launch"

// DecodeCalls returns the number of prepared decode calls rt keeps (for
// the GPU test of a slot table changed between calls).
func DecodeCalls(rt *Runtime) int { return rt.dev.(*launch.Launcher).DecodeCalls() }
