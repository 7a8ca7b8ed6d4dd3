package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
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
	fmt.Fprintln(stdout, versionLine(readBuildInfo()))
	return nil
}

// readBuildInfo is debug.ReadBuildInfo, nil where the binary carries none;
// a variable so that tests can give their own.
var readBuildInfo = func() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

// versionLine describes a build in one line, e.g.
//
//	gdn v0.0.0-20261207120000-cab4990abcde (commit cab4990abcde, 2026-12-07T12:00:00Z), go1.26.8 linux/amd64, tags cuda
//
// with ", uncommitted changes" after the commit's time where the tree had
// some, "no build information" where the binary has none, and "tags none
// (no CUDA: the driver stub, build with -tags cuda to run kernels)" for a
// build without the cuda tag.
func versionLine(bi *debug.BuildInfo) string {
	goVersion := runtime.Version()
	if bi == nil {
		return fmt.Sprintf("gdn (no build information), %s %s/%s", goVersion, runtime.GOOS, runtime.GOARCH)
	}
	if bi.GoVersion != "" {
		goVersion = bi.GoVersion
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var vcs []string
	if rev := settings["vcs.revision"]; rev != "" {
		vcs = append(vcs, "commit "+rev[:min(12, len(rev))])
		if t := settings["vcs.time"]; t != "" {
			vcs = append(vcs, t)
		}
		if settings["vcs.modified"] == "true" {
			vcs = append(vcs, "uncommitted changes")
		}
	} else {
		vcs = append(vcs, "commit unknown")
	}
	var tags []string
	for _, t := range strings.Split(settings["-tags"], ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	tagText := "tags " + strings.Join(tags, ",")
	if len(tags) == 0 {
		tagText = "tags none"
	}
	if !slices.Contains(tags, "cuda") {
		tagText += " (no CUDA: the driver stub, build with -tags cuda to run kernels)"
	}
	return fmt.Sprintf("gdn %s (%s), %s %s/%s, %s", version, strings.Join(vcs, ", "), goVersion, runtime.GOOS, runtime.GOARCH, tagText)
}
