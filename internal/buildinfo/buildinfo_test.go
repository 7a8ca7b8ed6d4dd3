package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestDescribe(t *testing.T) {
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
		if got := Describe("gdn", c.bi); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// TestDescribeNamesTheProgram: the line starts with the name it is given
// (libgdn's says libgdn).
func TestDescribeNamesTheProgram(t *testing.T) {
	for _, bi := range []*debug.BuildInfo{nil, {Main: debug.Module{Version: "v1.0.0"}}} {
		if got := Describe("libgdn", bi); len(got) < 7 || got[:7] != "libgdn " {
			t.Errorf("Describe(libgdn, %v) = %q", bi, got)
		}
	}
}
