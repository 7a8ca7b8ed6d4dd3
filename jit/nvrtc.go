package jit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// ErrNoNVRTC is the error LoadNVRTC returns (wrapped in a *LoadError) when no
// NVRTC library could be opened.
var ErrNoNVRTC = errors.New("jit: NVRTC library not found")

// NVRTC is an opened NVRTC library. It is safe for concurrent use: each
// compilation is its own NVRTC program.
type NVRTC struct {
	lib          *lib
	path         string
	major, minor int
	archs        []int
}

// Version returns NVRTC's version, e.g. 12, 4.
func (n *NVRTC) Version() (major, minor int) { return n.major, n.minor }

// Path returns the file the library was loaded from.
func (n *NVRTC) Path() string { return n.path }

// SupportedArchs returns the SM architectures NVRTC can compile for, as
// 10*major+minor (e.g. 90), ascending; nil when NVRTC is older than 11.2 and
// cannot say.
func (n *NVRTC) SupportedArchs() []int { return append([]int(nil), n.archs...) }

// Supports reports whether NVRTC lists the architecture cc (10*major+minor).
// An NVRTC that cannot list its architectures is assumed to support all.
func (n *NVRTC) Supports(cc int) bool {
	if n.archs == nil {
		return true
	}
	for _, a := range n.archs {
		if a == cc {
			return true
		}
	}
	return false
}

// String describes the library, e.g. "NVRTC 12.4 (/path/libnvrtc.so.12)".
func (n *NVRTC) String() string {
	return fmt.Sprintf("NVRTC %d.%d (%s)", n.major, n.minor, n.path)
}

// Attempt is one place LoadNVRTC tried, with the reason it failed.
type Attempt struct {
	Path string // a file or a bare soname
	Err  string // dlerror's text, or why the place was skipped
}

// LoadError lists every place LoadNVRTC tried. It unwraps to ErrNoNVRTC.
type LoadError struct {
	Tried []Attempt // in the order tried
}

// Error lists the attempts, one per line.
func (e *LoadError) Error() string {
	var b strings.Builder
	b.WriteString("jit: NVRTC library not found: run " + SDKHint + " in gdn's source folder (it fetches NVRTC 12.4), or set GDN_NVRTC_PATH to libnvrtc.so or its folder; tried:")
	for _, a := range e.Tried {
		fmt.Fprintf(&b, "\n  %s: %s", a.Path, a.Err)
	}
	return b.String()
}

// Unwrap returns ErrNoNVRTC.
func (e *LoadError) Unwrap() error { return ErrNoNVRTC }

// nvrtcError is a failed NVRTC call other than a compilation error.
type nvrtcError struct {
	Call string
	Code int
	Msg  string
}

// Error names the call, NVRTC's message and the result code.
func (e *nvrtcError) Error() string {
	return fmt.Sprintf("jit: %s: %s (%d)", e.Call, e.Msg, e.Code)
}

// sonames are the bare library names tried, newest first, after the folders.
var sonames = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}

var loadOnce = sync.OnceValues(loadNVRTC)

// LoadNVRTC opens NVRTC on first use and returns the same library (or the
// same error) on every later call. When GDN_NVRTC_PATH is set (a file or a
// folder) it looks there only; otherwise, in order, at $CUDA_HOME/lib64,
// /usr/local/cuda/lib64, the bare sonames libnvrtc.so.13, .so.12,
// .so.11.2 and .so on the loader path, and last the folder where
// scripts/cuda-sdk.sh keeps NVRTC 12.4 ($GDN_CUDA_SDK_DIR/lib, by default
// ~/.cache/gdn/cuda-sdk/lib). Before
// opening libnvrtc from a folder it opens the libnvrtc-builtins library of
// that folder, so LD_LIBRARY_PATH need not name it.
func LoadNVRTC() (*NVRTC, error) { return loadOnce() }

// candidate is one place to try: a path or soname, and the folder whose
// builtins library should be opened first ("" for a bare soname).
type candidate struct {
	path, dir string
}

// candidates lists the places LoadNVRTC tries, in order, and notes places
// that were skipped (a folder that does not exist).
func candidates() (out []candidate, skipped []Attempt) {
	folder := func(dir, from string) {
		note := ""
		if from != "" {
			note = " (from " + from + ")"
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			skipped = append(skipped, Attempt{Path: dir, Err: "no such folder" + note})
			return
		}
		before := len(out)
		for _, s := range sonames {
			p := filepath.Join(dir, s)
			if _, err := os.Stat(p); err == nil {
				out = append(out, candidate{path: p, dir: dir})
			}
		}
		// Versioned files only (e.g. libnvrtc.so.12.4.127, no soname link).
		matches, _ := filepath.Glob(filepath.Join(dir, "libnvrtc.so.*"))
		sort.Sort(sort.Reverse(sort.StringSlice(matches)))
		for _, m := range matches {
			dup := false
			for _, c := range out {
				if c.path == m {
					dup = true
				}
			}
			if !dup {
				out = append(out, candidate{path: m, dir: dir})
			}
		}
		if len(out) == before {
			skipped = append(skipped, Attempt{Path: dir, Err: "no libnvrtc.so* in it" + note})
		}
	}
	if p := os.Getenv("GDN_NVRTC_PATH"); p != "" {
		// An explicit choice is the only place looked at: one that points
		// nowhere must fail, naming it, rather than quietly load another NVRTC.
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			folder(p, "GDN_NVRTC_PATH")
		} else if err != nil {
			skipped = append(skipped, Attempt{Path: p, Err: "GDN_NVRTC_PATH: " + err.Error()})
		} else {
			out = append(out, candidate{path: p, dir: filepath.Dir(p)})
		}
		return out, skipped
	}
	if h := os.Getenv("CUDA_HOME"); h != "" {
		folder(filepath.Join(h, "lib64"), "$CUDA_HOME")
	}
	folder("/usr/local/cuda/lib64", "")
	for _, s := range sonames {
		out = append(out, candidate{path: s})
	}
	if d := sdkLibDir(); d != "" {
		folder(d, "scripts/cuda-sdk.sh's cache")
	}
	return out, skipped
}

// openBuiltins opens, with RTLD_GLOBAL, the libnvrtc-builtins libraries in
// dir whose major version matches the libnvrtc file about to be opened
// (libnvrtc loads its builtins by soname; one already loaded satisfies it).
func openBuiltins(dir, nvrtcPath string) {
	matches, _ := filepath.Glob(filepath.Join(dir, "libnvrtc-builtins.so*"))
	major := ""
	if real, err := filepath.EvalSymlinks(nvrtcPath); err == nil {
		base := filepath.Base(real)
		if i := strings.Index(base, ".so."); i >= 0 {
			major, _, _ = strings.Cut(base[i+4:], ".")
		}
	}
	seen := map[string]bool{}
	for _, m := range matches {
		if major != "" && !strings.HasPrefix(filepath.Base(m), "libnvrtc-builtins.so."+major) {
			continue
		}
		real, err := filepath.EvalSymlinks(m)
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		if err := dlopenGlobal(real); err != nil {
			debugf("nvrtc: builtins %s: %v", real, err)
		} else {
			debugf("nvrtc: opened builtins %s", real)
		}
	}
}

// loadNVRTC is LoadNVRTC's uncached body.
func loadNVRTC() (*NVRTC, error) {
	cands, tried := candidates()
	for _, c := range cands {
		if c.dir != "" {
			openBuiltins(c.dir, c.path)
		}
		l, err := openLib(c.path)
		if err != nil {
			tried = append(tried, Attempt{Path: c.path, Err: err.Error()})
			continue
		}
		major, minor, err := l.version()
		if err != nil {
			tried = append(tried, Attempt{Path: c.path, Err: err.Error()})
			continue
		}
		archs, err := l.supportedArchs()
		if err != nil {
			tried = append(tried, Attempt{Path: c.path, Err: err.Error()})
			continue
		}
		sort.Ints(archs)
		n := &NVRTC{lib: l, path: l.path(), major: major, minor: minor, archs: archs}
		if n.path == "" {
			n.path = c.path
		}
		for _, a := range tried {
			debugf("nvrtc: passed over %s: %s", a.Path, a.Err)
		}
		debugf("nvrtc: loaded %s, archs %v", n, archs)
		return n, nil
	}
	return nil, &LoadError{Tried: tried}
}
