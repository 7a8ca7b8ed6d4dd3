package main

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

const events = `{"Action":"start","Package":"m/a"}
{"Action":"start","Package":"m/b"}
{"Action":"run","Package":"m/b","Test":"TestX"}
{"Action":"output","Package":"m/b","Test":"TestX","Output":"    x_test.go:9: boom\n"}
{"Action":"fail","Package":"m/b","Test":"TestX"}
{"Action":"output","Package":"m/b","Output":"FAIL\n"}
{"Action":"output","Package":"m/b","Output":"FAIL\tm/b\t0.2s\n"}
{"Action":"fail","Package":"m/b"}
{"ImportPath":"m/c","Action":"build-output","Output":"c.go:1: syntax error\n"}
{"Action":"output","Package":"m/a","Output":"PASS\n"}
{"Action":"output","Package":"m/a","Output":"ok  \tm/a\t1.5s\n"}
{"Action":"pass","Package":"m/a"}
{"Action":"start","Package":"m/d"}
{"Action":"output","Package":"m/d","Output":"?   \tm/d\t[no test files]\n"}
{"Action":"skip","Package":"m/d"}
not json
`

// Lines come out as packages finish (b before a), with go test's own text.
func TestRelay(t *testing.T) {
	var out bytes.Buffer
	failed := relay(strings.NewReader(events), &out, time.Hour, "m/")
	want := "    x_test.go:9: boom\nFAIL\nFAIL\tm/b\t0.2s\nc.go:1: syntax error\nok  \tm/a\t1.5s\n?   \tm/d\t[no test files]\nnot json\n"
	if out.String() != want || !failed {
		t.Errorf("relay wrote\n%q\nfailed %v; want\n%q, true", out.String(), failed, want)
	}
}

// syncBuffer is a bytes.Buffer safe to read while relay writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// While a package runs silently, a heartbeat names it every quiet spell.
func TestRelayHeartbeat(t *testing.T) {
	r, w := io.Pipe()
	var out syncBuffer
	done := make(chan bool)
	go func() { done <- relay(r, &out, 50*time.Millisecond, "m/") }()
	io.WriteString(w, `{"Action":"start","Package":"m/slow"}`+"\n")
	time.Sleep(300 * time.Millisecond)
	io.WriteString(w, `{"Action":"output","Package":"m/slow","Output":"ok  \tm/slow\t0.3s\n"}`+"\n")
	io.WriteString(w, `{"Action":"pass","Package":"m/slow"}`+"\n")
	w.Close()
	if <-done {
		t.Error("relay reported a failure")
	}
	got := out.String()
	if n := strings.Count(got, "testing slow ("); n < 2 {
		t.Errorf("%d heartbeats naming the running package in 300 ms of silence at 50 ms, want at least 2:\n%s", n, got)
	}
	if !strings.HasSuffix(got, "ok  \tm/slow\t0.3s\n") {
		t.Errorf("output does not end with the package's line:\n%s", got)
	}
}

func TestHeartbeatBuilding(t *testing.T) {
	if got := heartbeat(20*time.Second, nil, "m/"); got != "  ... 20 s: building\n" {
		t.Errorf("heartbeat with nothing running = %q", got)
	}
	if got := heartbeat(time.Second, map[string]time.Time{"m": time.Now()}, "m/"); !strings.Contains(got, "testing . (") {
		t.Errorf("the module's root package = %q, want it named '.'", got)
	}
}
