package main

import (
	"fmt"

	"github.com/gdnjit/gdn/internal/buildinfo"
)

// gdn version: which build of gdn this binary is. A bug report, a
// performance log and two binaries side by side on a GPU machine are all
// told apart by the line it prints: the commit, whether the tree had
// uncommitted changes, the Go toolchain and the build tags (without the
// cuda tag the binary links the driver stub and runs no kernels).

func init() {
	register("version", "print this build's commit, Go version and build tags", runVersion)
}

func runVersion(args []string) error {
	fs := newFlags("version", "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, buildinfo.Line("gdn"))
	return nil
}
