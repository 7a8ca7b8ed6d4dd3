package jit

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestDebugLog(t *testing.T) {
	needNVRTC(t)
	var buf bytes.Buffer
	debugMu.Lock()
	debugOut = &buf
	debugMu.Unlock()
	defer func() {
		debugMu.Lock()
		debugOut = os.Stderr
		debugMu.Unlock()
	}()

	t.Setenv(DebugEnv, "0")
	debugf("hidden")
	if buf.Len() != 0 {
		t.Fatalf("debug output with %s=0: %q", DebugEnv, buf.String())
	}

	t.Setenv(DebugEnv, "1")
	disk, _ := OpenDiskCache(t.TempDir())
	req := axpyRequest(t)
	a, err := NewCompiler(disk).Compile(req)
	if err != nil {
		t.Fatal(err)
	}
	skipWithoutReport(t, a)
	if _, err := NewCompiler(disk).Compile(req); err != nil {
		t.Fatal(err)
	}
	m := mustCache(t, 10)
	h, _ := m.Acquire("k", func() (any, int64, func(), error) { return 1, 1, func() {}, nil })
	h.Release()
	m.Close()
	out := buf.String()
	for _, s := range []string{
		"gdn/jit: compile test_axpy for sm_90a",
		"options -std=c++17 -arch=sm_90a --ptxas-options=-v",
		"ptxas report for test_axpy",
		"gdn_test_axpy: ", " registers, 0+0 B spill",
		"gdn/jit: disk hit test_axpy",
		"memcache: created",
		"memcache: destroyed",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("debug log lacks %q:\n%s", s, out)
		}
	}
}
