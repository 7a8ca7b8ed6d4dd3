// Command testprogress runs `go test -json` with the given flags and
// packages and prints what `go test` prints, but as each package
// finishes rather than in package order, and, while nothing finishes, a
// heartbeat every 15 s naming the packages still running. `make test` uses
// it so that a long package never leaves the terminal (or a CI log) silent.
//
//	go run ./scripts/testprogress [go test flags] [packages]
//
// A passing package prints its "ok" line, one without tests its "?" line,
// a failing one all of its output; the exit status is go test's.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
)

// quiet is how long the output may stay silent before a heartbeat.
const quiet = 15 * time.Second

func main() {
	cmd := exec.Command("go", append([]string{"test", "-json"}, os.Args[1:]...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(2)
	}
	failed := relay(out, os.Stdout, quiet, modulePath())
	code := 0
	if err := cmd.Wait(); err != nil {
		code = 1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	if code != 0 || failed {
		fmt.Println("FAIL") // go test's last line when anything failed
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// modulePath reads the module path from ./go.mod, to shorten package names
// in heartbeats; "" when there is none.
func modulePath() string {
	b, err := os.ReadFile("go.mod")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(p), `"`) + "/"
		}
	}
	return ""
}

// event is one line of `go test -json` (cmd/test2json), with the build
// events of `go test -json` (ImportPath, build-output, build-fail).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

// relay reads go test's JSON events from r and writes go test's own lines
// to w as packages finish, with a heartbeat after every quiet spell. It
// reports whether any package failed.
func relay(r io.Reader, w io.Writer, quietFor time.Duration, module string) (failed bool) {
	var mu sync.Mutex
	last := time.Now()
	running := map[string]time.Time{} // package -> when its test binary started
	buffered := map[string][]string{} // package -> its output lines
	say := func(s string) {
		io.WriteString(w, s)
		last = time.Now()
	}

	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(quietFor / 5)
		defer tick.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			mu.Lock()
			if time.Since(last) >= quietFor {
				say(heartbeat(time.Since(start), running, module))
			}
			mu.Unlock()
		}
	}()

	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || (e.Package == "" && e.ImportPath == "") {
			mu.Lock()
			say(string(line) + "\n") // not an event: pass it on
			mu.Unlock()
			continue
		}
		mu.Lock()
		switch e.Action {
		case "build-output":
			say(e.Output)
		case "start":
			running[e.Package] = time.Now()
		case "output":
			buffered[e.Package] = append(buffered[e.Package], e.Output)
		case "pass", "skip", "fail":
			if e.Test != "" {
				break // one test; the package's own event comes last
			}
			lines := buffered[e.Package]
			switch {
			case e.Action == "fail":
				failed = true
				say(strings.Join(lines, ""))
			case len(lines) > 0:
				say(lines[len(lines)-1]) // "ok  \tpkg\t1.2s" or "?   \tpkg\t[no test files]"
			}
			delete(running, e.Package)
			delete(buffered, e.Package)
		}
		mu.Unlock()
	}
	return failed
}

// heartbeat is the line that says the run is alive: how long it has run,
// and which packages' tests run and for how long (or that it is building).
func heartbeat(elapsed time.Duration, running map[string]time.Time, module string) string {
	if len(running) == 0 {
		return fmt.Sprintf("  ... %.0f s: building\n", elapsed.Seconds())
	}
	var names []string
	for p, since := range running {
		name := strings.TrimPrefix(p, module)
		if name == strings.TrimSuffix(module, "/") {
			name = "."
		}
		names = append(names, fmt.Sprintf("%s (%.0f s)", name, time.Since(since).Seconds()))
	}
	sort.Strings(names)
	return fmt.Sprintf("  ... %.0f s: testing %s\n", elapsed.Seconds(), strings.Join(names, ", "))
}
