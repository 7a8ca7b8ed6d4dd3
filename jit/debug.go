package jit

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// DebugEnv is the environment variable that turns on the debug log: set to
// 1 (or true), the jit prints to stderr the NVRTC options, the ptxas report,
// compile, disk and load timings and disk hits.
const DebugEnv = "GDN_JIT_DEBUG"

// debugOut is where the debug log goes; tests replace it.
var (
	debugMu  sync.Mutex
	debugOut io.Writer = os.Stderr
)

// Debugging reports whether GDN_JIT_DEBUG asks for the debug log. It is read
// on every call, so a test or a long-lived program can switch it.
func Debugging() bool {
	switch strings.ToLower(os.Getenv(DebugEnv)) {
	case "", "0", "false", "no", "off":
		return false
	}
	return true
}

// debugf prints one debug message, prefixed "gdn/jit: ", when Debugging.
func debugf(format string, args ...any) {
	if !Debugging() {
		return
	}
	msg := fmt.Sprintf(format, args...)
	debugMu.Lock()
	defer debugMu.Unlock()
	fmt.Fprintf(debugOut, "gdn/jit: %s\n", strings.TrimRight(msg, "\n"))
}

// indent prefixes every line of s with two spaces.
func indent(s string) string {
	if s == "" {
		return "  (empty)"
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
