package jit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gdnjit/gdn/kernsrc"
)

// Fault tests of the kernel cache and of NVRTC: each checks the behaviour a
// user relies on when the machine misbehaves, and fails if it regresses.

// faultChildEnv makes the test binary a helper process for the fault tests
// (TestMain): "fsize" compiles two kernels under a tiny file-size limit,
// "store-loop" stores one entry over and over until killed.
const faultChildEnv = "GDN_JIT_FAULT_CHILD"

// faultChildLimit is the file-size limit of the "fsize" child: smaller than
// any cache entry, so every Store fails as on a full disk.
const faultChildLimit = 512

// faultChildResult is what the "fsize" helper prints as JSON.
type faultChildResult struct {
	Compiled int      `json:"compiled"`
	DiskErrs []string `json:"disk_errs"`
	Error    string   `json:"error,omitempty"`
}

// twoRequests are two different kernels: two failed Stores, one warning.
func twoRequests() ([]Request, error) {
	var reqs []Request
	for _, name := range []string{"test_axpy", "test_smem_reverse"} {
		v, ok := kernsrc.Lookup(name)
		if !ok {
			return nil, errors.New("kernsrc has no " + name)
		}
		req, err := RequestFor(v, sm90a)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, req)
	}
	return reqs, nil
}

// runFaultChild runs a helper job; see faultChildEnv.
func runFaultChild(job string) int {
	switch job {
	case "fsize":
		// RLIMIT_FSIZE makes every write past the limit fail with EFBIG,
		// for root too: a full disk without needing one. The write also
		// raises SIGXFSZ, which Go ignores but libnvrtc installs a handler
		// for: load NVRTC first, then ignore the signal for good, so that
		// the write returns its error as on a full disk (ENOSPC, no signal).
		lim := &syscall.Rlimit{Cur: faultChildLimit, Max: faultChildLimit}
		res := faultChildResult{}
		defer func() { json.NewEncoder(os.Stdout).Encode(res) }()
		if _, err := LoadNVRTC(); err != nil {
			res.Error = err.Error()
			return 1
		}
		signal.Ignore(syscall.SIGXFSZ)
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, lim); err != nil {
			res.Error = err.Error()
			return 1
		}
		reqs, err := twoRequests()
		if err != nil {
			res.Error = err.Error()
			return 1
		}
		disk, _ := OpenDiskCache("")
		c := NewCompiler(disk)
		for _, req := range reqs {
			a, err := c.Compile(req)
			if err != nil {
				res.Error = err.Error()
				return 1
			}
			if len(a.Image) > 0 {
				res.Compiled++
			}
			if a.DiskErr != nil {
				res.DiskErrs = append(res.DiskErrs, a.DiskErr.Error())
			}
		}
		return 0
	case "store-loop":
		// Store one 48 MB entry again and again, so that most of the time
		// goes into writing the file; the parent kills the process.
		disk, _ := OpenDiskCache("")
		a := killEntry()
		for {
			if err := disk.Store(a); err != nil {
				os.Stderr.WriteString(err.Error())
				return 1
			}
			os.Stdout.WriteString("stored\n")
		}
	}
	return 2
}

// killEntry is the artifact the "store-loop" helper writes: a 48 MB image
// whose bytes the parent can check.
func killEntry() *Artifact {
	img := make([]byte, 48<<20)
	for i := range img {
		img[i] = byte(i * 7 % 251)
	}
	return &Artifact{Key: "killed-writer-test", Name: "killed", Target: sm90a, Image: img}
}

// newTemp waits until a temporary file not in seen appears in dir, adds it
// to seen and reports true; false after timeout.
func newTemp(dir string, seen map[string]bool, timeout time.Duration) bool {
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(200 * time.Microsecond) {
		names, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*"))
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				return true
			}
		}
	}
	return false
}

// faultChild prepares the test binary as a helper running job with cacheDir.
func faultChild(t *testing.T, job, cacheDir string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), faultChildEnv+"="+job, CacheDirEnv+"="+cacheDir)
	return cmd
}

// A cache folder that cannot be created (its parent is a regular file, which
// stops root too, unlike chmod 0500): kernels still compile, each Artifact
// says why it was not kept, and the user gets exactly one warning.
func TestCacheUnwritable(t *testing.T) {
	needNVRTC(t)
	parent := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(parent, []byte("not a folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "kernels")
	var warn bytes.Buffer
	old := warnOut
	warnOut = &warn
	defer func() { warnOut = old }()

	disk, err := OpenDiskCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := twoRequests()
	if err != nil {
		t.Fatal(err)
	}
	c := NewCompiler(disk)
	for _, req := range reqs {
		a, err := c.Compile(req)
		if err != nil {
			t.Fatalf("%s: compile with an unwritable cache: %v", req.Name, err)
		}
		if len(a.Image) == 0 || a.FromDisk || a.DiskErr == nil || !strings.Contains(a.DiskErr.Error(), "not a directory") {
			t.Errorf("%s: image %d bytes, FromDisk %v, DiskErr %v", req.Name, len(a.Image), a.FromDisk, a.DiskErr)
		}
	}
	lines := strings.Split(strings.TrimSpace(warn.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "warning") || !strings.Contains(lines[0], dir) ||
		!strings.Contains(lines[0], CacheDirEnv) {
		t.Errorf("want exactly one warning naming %s and %s, got:\n%s", dir, CacheDirEnv, warn.String())
	}
}

// A full disk (every write past 512 bytes fails, in a child process): the
// same as above, and no temporary file is left behind.
func TestCacheDiskFull(t *testing.T) {
	needNVRTC(t)
	dir := t.TempDir()
	cmd := faultChild(t, "fsize", dir)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, errOut.String())
	}
	var r faultChildResult
	if err := json.Unmarshal(out, &r); err != nil || r.Error != "" {
		t.Fatalf("child output %q: %v %s", out, err, r.Error)
	}
	if r.Compiled != 2 || len(r.DiskErrs) != 2 || !strings.Contains(r.DiskErrs[0], "file too large") {
		t.Errorf("compiled %d, disk errors %q; want 2 and 2 saying the file is too large", r.Compiled, r.DiskErrs)
	}
	if n := strings.Count(errOut.String(), "warning"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, errOut.String())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a failed Store left %d files in the cache", len(ents))
	}
}

// NVRTC missing: GDN_NVRTC_PATH pointing nowhere fails with an error that
// names the place and says what to set, and no other NVRTC is loaded in its
// stead (CI has a working one on the loader path).
func TestNVRTCMissing(t *testing.T) {
	empty := t.TempDir()
	garbage := filepath.Join(t.TempDir(), "libnvrtc.so.12")
	os.WriteFile(garbage, []byte("not a library"), 0o644)
	for _, c := range []struct{ path, want string }{
		{"/nonexistent/gdn-test/libnvrtc.so.12", "no such file"},
		{empty, "no libnvrtc.so* in it"},
		{garbage, "libnvrtc.so.12"},
	} {
		t.Setenv("GDN_NVRTC_PATH", c.path)
		n, err := loadNVRTC()
		if n != nil || !errors.Is(err, ErrNoNVRTC) {
			t.Errorf("GDN_NVRTC_PATH=%s: loaded %v, err %v; want ErrNoNVRTC", c.path, n, err)
			continue
		}
		var le *LoadError
		msg := err.Error()
		if !errors.As(err, &le) || len(le.Tried) == 0 || !strings.Contains(msg, c.path) || !strings.Contains(msg, c.want) ||
			!strings.Contains(msg, "set GDN_NVRTC_PATH") {
			t.Errorf("GDN_NVRTC_PATH=%s: error does not name the place and the fix:\n%v", c.path, err)
		}
	}
}

// A process killed while writing a cache entry (SIGKILL at several points
// of a loop of 48 MB writes) leaves a cache the next process uses: the entry
// is whole or absent, never torn; partial temporary files are not entries
// and are removed once stale. A torn entry (what a crash leaves when the
// rename reached the disk and the data did not) is compiled again.
func TestCacheKilledWhileWriting(t *testing.T) {
	needNVRTC(t)
	dir := t.TempDir()
	want := killEntry()
	// Kill 0 lands before any entry is complete; kills 1 to 3 as soon as a
	// new temporary file shows (the writer is mid-write); kills 4 and 5 at
	// fixed points of the next Store (mostly while it hashes).
	seen := map[string]bool{}
	midWrite := 0
	for i := range 6 {
		cmd := faultChild(t, "store-loop", dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child stored nothing: %v\n%s", err, errOut.String())
			}
		}
		switch {
		case i >= 1 && i <= 3:
			if newTemp(dir, seen, 10*time.Second) {
				midWrite++
			}
		case i >= 4:
			time.Sleep(time.Duration(i*25) * time.Millisecond)
		}
		cmd.Process.Kill()
		go io.Copy(io.Discard, stdout)
		cmd.Wait()

		disk, _ := OpenDiskCache(dir)
		got, err := disk.Load(want.Key)
		switch {
		case errors.Is(err, ErrNotCached) && i == 0:
		case err != nil:
			t.Fatalf("kill %d: the entry is torn or missing: %v", i, err)
		case !bytes.Equal(got.Image, want.Image):
			t.Fatalf("kill %d: the entry's image differs", i)
		}
	}
	temps, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*"))
	t.Logf("METRIC killed_writer kills=6 mid_write=%d temporary_files_left=%d", midWrite, len(temps))
	if midWrite == 0 || len(temps) == 0 {
		t.Errorf("no kill landed while a temporary file was being written (%d mid-write, %d left)", midWrite, len(temps))
	}

	// A torn entry for a real kernel, beside a partial temporary file.
	reqs, err := twoRequests()
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := NewCompiler(nil).Compile(reqs[0])
	if err != nil {
		t.Fatal(err)
	}
	whole, err := encode(fresh)
	if err != nil {
		t.Fatal(err)
	}
	disk, _ := OpenDiskCache(dir)
	os.WriteFile(disk.Path(fresh.Key), whole[:len(whole)/3], 0o644)
	os.WriteFile(filepath.Join(dir, tempPrefix+"torn"), whole[:100], 0o644)
	if files, _, _ := disk.Size(); files != 2 {
		t.Errorf("Size counts %d entries, want 2 (the killed writer's and the torn one; no temporary files)", files)
	}
	got, err := NewCompiler(disk).Compile(reqs[0])
	if err != nil || got.FromDisk || !bytes.Equal(got.Image, fresh.Image) {
		t.Fatalf("compile over a torn entry: err %v, FromDisk %v", err, got != nil && got.FromDisk)
	}
	if back, err := disk.Load(fresh.Key); err != nil || !bytes.Equal(back.Image, fresh.Image) {
		t.Errorf("torn entry not rewritten: %v", err)
	}
	temps, _ = filepath.Glob(filepath.Join(dir, tempPrefix+"*"))
	past := time.Now().Add(-2 * time.Hour)
	for _, f := range temps {
		os.Chtimes(f, past, past)
	}
	OpenDiskCache(dir)
	if left, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*")); len(left) != 0 {
		t.Errorf("stale temporary files kept: %v", left)
	}
}
