package scripts

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// heartbeat.sh passes the command's lines through, adds a line after each
// silent spell and one at the end, and exits with the command's status.
func TestHeartbeat(t *testing.T) {
	t.Parallel() // mostly a sleep
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	cmd := exec.Command("bash", "heartbeat.sh", "step", "bash", "-c", "echo first; echo err >&2; sleep 3.5; echo last; exit 3")
	cmd.Env = append(os.Environ(), "HEARTBEAT=1")
	out, err := cmd.Output()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 3 {
		t.Fatalf("exit: %v, want status 3", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 6 || lines[0] != "first" || lines[1] != "err" || lines[len(lines)-2] != "last" ||
		!strings.HasPrefix(lines[len(lines)-1], "  ... step: failed (status 3) after ") {
		t.Fatalf("output:\n%s\nwant first, err, heartbeats, last, the closing line", out)
	}
	for _, l := range lines[2 : len(lines)-2] {
		if !strings.HasPrefix(l, "  ... step: ") || !strings.HasSuffix(l, " s") {
			t.Errorf("heartbeat line %q", l)
		}
	}
}
