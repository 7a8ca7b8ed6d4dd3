// Package buildinfo describes a gdn binary's build in one line: the commit
// it was built from, whether the tree had uncommitted changes, the Go
// toolchain, the platform and the build tags. The command-line tool prints
// it (gdn version, gdn info) and libgdn returns it (gdn_build_info), so that
// a bug report or a performance log names the build it came from.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
)

// Line is Describe of the running binary's own build information.
func Line(name string) string {
	bi, _ := debug.ReadBuildInfo() // nil where the binary carries none
	return Describe(name, bi)
}

// Describe is the line of a program called name, built as bi, e.g.
//
//	gdn v0.0.0-20261207120000-cab4990abcde (commit cab4990abcde, 2026-12-07T12:00:00Z), go1.26.8 linux/amd64, tags cuda
//
// with ", uncommitted changes" after the commit's time where the tree had
// some, "no build information" where the binary has none, and "tags none
// (no CUDA: the driver stub, build with -tags cuda to run kernels)" for a
// build without the cuda tag.
func Describe(name string, bi *debug.BuildInfo) string {
	goVersion := runtime.Version()
	if bi == nil {
		return fmt.Sprintf("%s (no build information), %s %s/%s", name, goVersion, runtime.GOOS, runtime.GOARCH)
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
	return fmt.Sprintf("%s %s (%s), %s %s/%s, %s", name, version, strings.Join(vcs, ", "), goVersion, runtime.GOOS, runtime.GOARCH, tagText)
}
