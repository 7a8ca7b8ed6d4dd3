package jit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdnjit/gdn/kernsrc"
)

// axpyRequest is the request for the test_axpy variant on sm_90a.
func axpyRequest(t *testing.T) Request {
	t.Helper()
	v, ok := kernsrc.Lookup("test_axpy")
	if !ok {
		t.Fatal("kernsrc has no test_axpy")
	}
	req, err := RequestFor(v, sm90a)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestDiskRoundTrip(t *testing.T) {
	needNVRTC(t)
	disk, err := OpenDiskCache(filepath.Join(t.TempDir(), "kernels"))
	if err != nil {
		t.Fatal(err)
	}
	if n, b, err := disk.Size(); n != 0 || b != 0 || err != nil {
		t.Fatalf("Size of a missing folder = %d, %d, %v", n, b, err)
	}
	req := axpyRequest(t)
	cold, err := NewCompiler(disk).Compile(req)
	if err != nil {
		t.Fatal(err)
	}
	if cold.FromDisk || cold.DiskErr != nil {
		t.Fatalf("first compile FromDisk=%v DiskErr=%v", cold.FromDisk, cold.DiskErr)
	}
	warm, err := NewCompiler(disk).Compile(req)
	if err != nil {
		t.Fatal(err)
	}
	if !warm.FromDisk {
		t.Fatal("second compile did not come from disk")
	}
	if !bytes.Equal(cold.Image, warm.Image) || cold.Key != warm.Key || !reflect.DeepEqual(cold.Report, warm.Report) ||
		!reflect.DeepEqual(cold.Lowered, warm.Lowered) || cold.Log != warm.Log || cold.Target != warm.Target ||
		cold.CompileTime != warm.CompileTime {
		t.Errorf("disk copy differs:\ncold %+v\nwarm %+v", summary(cold), summary(warm))
	}
	n, size, err := disk.Size()
	if err != nil || n != 1 || size < int64(len(cold.Image)) {
		t.Errorf("Size = %d files, %d bytes, %v", n, size, err)
	}
	t.Logf("METRIC disk_roundtrip compile_ms=%.1f disk_load_ms=%.3f image_bytes=%d",
		cold.Elapsed.Seconds()*1e3, warm.Elapsed.Seconds()*1e3, len(warm.Image))
}

func summary(a *Artifact) Artifact {
	s := *a
	s.Image = nil
	s.Log = ""
	return s
}

// fakeArtifact is a small artifact for format tests that need no NVRTC.
func fakeArtifact(key string) *Artifact {
	return &Artifact{
		Key: key, Name: "fake", Target: sm90a, Image: []byte("\x7fELF fake cubin bytes"),
		Report:  Report{Functions: []FunctionReport{{Name: "k", Entry: true, Registers: 32}}},
		Log:     "ptxas info: fake",
		Lowered: map[string]string{"k": "k"}, CompileTime: 1234 * time.Microsecond,
	}
}

func TestDiskCorruptEntries(t *testing.T) {
	const key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for name, corrupt := range map[string]func([]byte) []byte{
		"magic":          func(b []byte) []byte { b[0] ^= 1; return b },
		"version":        func(b []byte) []byte { b[4] ^= 1; return b },
		"flags":          func(b []byte) []byte { b[8] ^= 1; return b },
		"hash":           func(b []byte) []byte { b[30] ^= 0x80; return b },
		"metadata":       func(b []byte) []byte { b[diskHeaderLen+3] ^= 0x20; return b },
		"last image":     func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		"truncated":      func(b []byte) []byte { return b[:len(b)-5] },
		"header only":    func(b []byte) []byte { return b[:diskHeaderLen] },
		"short":          func(b []byte) []byte { return b[:10] },
		"empty":          func(b []byte) []byte { return b[:0] },
		"trailing bytes": func(b []byte) []byte { return append(b, 0) },
	} {
		t.Run(name, func(t *testing.T) {
			disk, _ := OpenDiskCache(t.TempDir())
			if err := disk.Store(fakeArtifact(key)); err != nil {
				t.Fatal(err)
			}
			if _, err := disk.Load(key); err != nil {
				t.Fatalf("intact entry: %v", err)
			}
			b, _ := os.ReadFile(disk.Path(key))
			if err := os.WriteFile(disk.Path(key), corrupt(b), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := disk.Load(key)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Load = %v, want ErrCorrupt", err)
			}
			if _, err := os.Stat(disk.Path(key)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("corrupt entry not removed: %v", err)
			}
			if _, err := disk.Load(key); !errors.Is(err, ErrNotCached) {
				t.Errorf("Load after removal = %v, want ErrNotCached", err)
			}
		})
	}
	t.Run("other key", func(t *testing.T) {
		disk, _ := OpenDiskCache(t.TempDir())
		other := strings.Repeat("f", 64)
		if err := disk.Store(fakeArtifact(other)); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(disk.Path(other), disk.Path(key)); err != nil {
			t.Fatal(err)
		}
		if _, err := disk.Load(key); !errors.Is(err, ErrCorrupt) {
			t.Errorf("entry renamed to another key: Load = %v, want ErrCorrupt", err)
		}
	})
}

// TestDiskCorruptRecompiles flips a byte and truncates a real entry: the next
// Compile notices, compiles again and rewrites a valid entry.
func TestDiskCorruptRecompiles(t *testing.T) {
	needNVRTC(t)
	disk, _ := OpenDiskCache(t.TempDir())
	req := axpyRequest(t)
	first, err := NewCompiler(disk).Compile(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"flip", "truncate"} {
		b, err := os.ReadFile(disk.Path(first.Key))
		if err != nil {
			t.Fatal(err)
		}
		if how == "flip" {
			b[len(b)/2] ^= 0x10
		} else {
			b = b[:len(b)/2]
		}
		os.WriteFile(disk.Path(first.Key), b, 0o644)
		a, err := NewCompiler(disk).Compile(req)
		if err != nil {
			t.Fatal(err)
		}
		if a.FromDisk || !bytes.Equal(a.Image, first.Image) {
			t.Errorf("%s: FromDisk=%v, image equal=%v; want a fresh identical compile", how, a.FromDisk, bytes.Equal(a.Image, first.Image))
		}
		if back, err := disk.Load(first.Key); err != nil || !bytes.Equal(back.Image, first.Image) {
			t.Errorf("%s: entry not rewritten: %v", how, err)
		}
	}
}

// TestDiskConcurrentProcesses warms one cache from several processes at
// once: all finish, the entry is valid, and no temporary file is left.
func TestDiskConcurrentProcesses(t *testing.T) {
	needNVRTC(t)
	dir := t.TempDir()
	const procs = 4
	var wg sync.WaitGroup
	results := make([]childResult, procs)
	errs := make([]error, procs)
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := childCmd(t, "test_axpy", dir).Output()
			if err != nil {
				errs[i] = err
				return
			}
			results[i], errs[i] = parseChild(out)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		if results[i].Key != results[0].Key {
			t.Errorf("process %d key %s, process 0 key %s", i, results[i].Key, results[0].Key)
		}
	}
	disk, _ := OpenDiskCache(dir)
	if _, err := disk.Load(results[0].Key); err != nil {
		t.Fatalf("entry after concurrent warm-up: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("cache folder holds %v, want one entry", names)
	}
	out, err := childCmd(t, "test_axpy", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	r, err := parseChild(out)
	if err != nil || !r.FromDisk {
		t.Errorf("a later process: FromDisk=%v, %v", r.FromDisk, err)
	}
	compiled := 0
	for _, r := range results {
		if !r.FromDisk {
			compiled++
		}
	}
	t.Logf("METRIC concurrent_warmup processes=%d compiled=%d from_disk=%d", procs, compiled, procs-compiled)
}

func TestDiskRemovesStaleTemps(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, tempPrefix+"abc-1")
	fresh := filepath.Join(dir, tempPrefix+"abc-2")
	os.WriteFile(old, []byte("x"), 0o644)
	os.WriteFile(fresh, []byte("x"), 0o644)
	past := time.Now().Add(-2 * time.Hour)
	os.Chtimes(old, past, past)
	disk, _ := OpenDiskCache(dir)
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Error("stale temporary file kept")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Error("fresh temporary file (another process writing) removed")
	}
	if n, _, _ := disk.Size(); n != 0 {
		t.Errorf("Size counts %d temporary files", n)
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv(CacheDirEnv, "/some/where")
	if d, err := DefaultCacheDir(); err != nil || d != "/some/where" {
		t.Errorf("with %s: %q, %v", CacheDirEnv, d, err)
	}
	t.Setenv(CacheDirEnv, "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if d, err := DefaultCacheDir(); err != nil || d != filepath.Join("/xdg", "gdn", "kernels") {
		t.Errorf("default: %q, %v", d, err)
	}
}
