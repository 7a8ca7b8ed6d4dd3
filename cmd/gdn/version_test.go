package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionLine(t *testing.T) {
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH + ", "
	build := func(version string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/gdnjit/gdn", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{{
		"a cuda build from a clean tree",
		build("v0.0.0-20261207120000-cab4990abcde", "-tags", "cuda", "vcs.revision", "cab4990abcdef0123456789", "vcs.time", "2026-12-07T12:00:00Z", "vcs.modified", "false"),
		"gdn v0.0.0-20261207120000-cab4990abcde (commit cab4990abcde, 2026-12-07T12:00:00Z), go1.99.1" + platform + "tags cuda",
	}, {
		"a development build with changes",
		build("(devel)", "-tags", "cuda,gdndev", "vcs.revision", "0123456789abcdef", "vcs.time", "2026-12-06T01:02:03Z", "vcs.modified", "true"),
		"gdn (devel) (commit 0123456789ab, 2026-12-06T01:02:03Z, uncommitted changes), go1.99.1" + platform + "tags cuda,gdndev",
	}, {
		"no tags, no VCS, no version",
		build(""),
		"gdn (devel) (commit unknown), go1.99.1" + platform + "tags none (no CUDA: the driver stub, build with -tags cuda to run kernels)",
	}, {
		"tags without cuda, a short revision",
		build("v1.2.3", "-tags", "gdndev", "vcs.revision", "abc"),
		"gdn v1.2.3 (commit abc), go1.99.1" + platform + "tags gdndev (no CUDA: the driver stub, build with -tags cuda to run kernels)",
	}, {
		"no build information",
		nil,
		"gdn (no build information), " + runtime.Version() + platform[:len(platform)-2],
	}} {
		if got := versionLine(c.bi); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// TestVersionCommand: `gdn version` and `gdn --version` print this binary's
// line on stdout; an argument is a usage error.
func TestVersionCommand(t *testing.T) {
	want := versionLine(readBuildInfo()) + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		code, out, errOut := runGDN(t, args...)
		if code != 0 || out != want || errOut != "" {
			t.Errorf("gdn %s: exit %d, stdout %q, stderr %q; want 0, %q, nothing", strings.Join(args, " "), code, out, errOut, want)
		}
	}
	if !strings.HasPrefix(want, "gdn ") || !strings.Contains(want, runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("version line %q lacks the name or the platform", want)
	}
	if code, _, errOut := runGDN(t, "version", "extra"); code != 2 || !strings.Contains(errOut, "unexpected arguments: extra") {
		t.Errorf("gdn version extra: exit %d, stderr %q; want 2 and the argument named", code, errOut)
	}
}
