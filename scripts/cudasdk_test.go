// Package scripts holds gdn's shell scripts; this file tests the part of
// cuda-sdk.sh that reads the machine's apt configuration, which CI's own
// sources would exercise only in one format.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// printArchive runs `cuda-sdk.sh --print-archive` on the given apt source
// files (written to a temporary folder) and returns its stdout, stderr and
// whether it succeeded.
func printArchive(t *testing.T, files map[string]string) (string, string, bool) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	var paths []string
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	cmd := exec.Command("bash", "cuda-sdk.sh", "--print-archive")
	cmd.Env = append(os.Environ(), "GDN_APT_SOURCES="+strings.Join(paths, " "), "GDN_DEBIAN_ARCHIVE=",
		"GDN_CUDA_SDK_DIR="+filepath.Join(dir, "cache"))
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return strings.TrimSpace(out.String()), errb.String(), err == nil
}

func TestDebianArchiveFromAptSources(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string // "" means the script must fail
	}{
		{"one-line with options", map[string]string{"a.list": `# a comment
deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian-security bookworm-security main
deb [ arch=amd64 ] http://mirror.example/debian bookworm main contrib
`}, "http://mirror.example/debian"},
		{"deb822", map[string]string{"debian.sources": `Types: deb
URIs: https://other.example/node
Suites: nodistro
Components: main

Types: deb deb-src
# a comment
URIs: http://m2.example/debian http://m3.example/debian
Suites: trixie trixie-updates
Components: main
`}, "http://m2.example/debian"},
		{"disabled deb822 entry", map[string]string{"off.sources": `Types: deb
URIs: http://off.example/debian
Suites: bookworm
Enabled: no
Components: main
`}, ""},
		{"Ubuntu only", map[string]string{"ubuntu.list": "deb http://ubuntu.example/ubuntu noble main universe\n"}, ""},
		{"no sources", map[string]string{"empty.list": ""}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, stderr, ok := printArchive(t, c.files)
			switch {
			case c.want == "" && ok:
				t.Errorf("succeeded with %q, want a failure", got)
			case c.want == "" && !strings.Contains(stderr, "no Debian archive in the apt sources"):
				t.Errorf("stderr %q does not say that no Debian archive was found", stderr)
			case c.want != "" && (!ok || got != c.want):
				t.Errorf("got %q (ok %v, stderr %q), want %q", got, ok, stderr, c.want)
			}
		})
	}
}

// TestNoHostNameInScript keeps archive host names out of the script: the
// archive comes from the machine's configuration.
func TestNoHostNameInScript(t *testing.T) {
	b, err := os.ReadFile("cuda-sdk.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"debian.org", "ubuntu.com", "http://", "https://"} {
		if strings.Contains(string(b), host) {
			t.Errorf("cuda-sdk.sh contains %q", host)
		}
	}
}
