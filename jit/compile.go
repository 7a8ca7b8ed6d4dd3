package jit

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/gdnjit/gdn/kernsrc"
)

// Request is one NVRTC compilation: a main source, the headers it may
// include, extra options and the kernels to keep.
type Request struct {
	Name    string            // what is compiled, e.g. a variant name; part of the key
	File    string            // the source's file name in NVRTC messages; default Name+".cu"
	Source  string            // CUDA C++ text of the main file
	Headers map[string]string // include name -> text, handed to NVRTC in memory
	Options []string          // extra NVRTC options, e.g. -D defines
	// Entries are the kernels to keep: extern "C" names or C++ name
	// expressions (e.g. "gdn_hopper<64>"). Each is handed to NVRTC as a name
	// expression, which instantiates templates and fails the compilation if
	// the kernel does not exist; Artifact.Lowered maps them to the names
	// to look functions up by.
	Entries []string
	Target  Target // the architecture to compile for
}

// fileName is the program name NVRTC prints in diagnostics.
func (r Request) fileName() string {
	if r.File != "" {
		return r.File
	}
	return r.Name + ".cu"
}

// CompileOptions returns the full NVRTC option list: -std=c++17, -arch,
// --ptxas-options=-v when the target is a cubin (so the log carries the
// register and spill report), then the request's own options.
func (r Request) CompileOptions() []string {
	opts := []string{"-std=c++17", "-arch=" + r.Target.String()}
	if !r.Target.PTX {
		opts = append(opts, "--ptxas-options=-v")
	}
	return append(opts, r.Options...)
}

// DefinesEnv names the environment variable whose space-separated NAME or
// NAME=VALUE words RequestFor adds as -D options to every variant in a
// development build (the gdndev build tag, DevBuild): a switch for kernel
// experiments. A release build ignores it, so that no stray environment
// turns a production process into an experiment.
const DefinesEnv = "GDN_JIT_DEFINES"

// RequestFor builds the request that compiles catalogue variant v for t:
// the variant's main file, every embedded header, its -D options and its
// kernel as the one entry. A development build (DevBuild) builds a lab
// experiment's kernel instead where GDN_LAB names one (package
// kernsrc/lab), and adds DefinesEnv's defines.
func RequestFor(v kernsrc.Variant, t Target) (Request, error) {
	v, err := devVariant(v)
	if err != nil {
		return Request{}, fmt.Errorf("jit: variant %s: %w", v.Name, err)
	}
	src, err := v.Source()
	if err != nil {
		return Request{}, fmt.Errorf("jit: variant %s: %w", v.Name, err)
	}
	// A development build's experiment defines (DefinesEnv) are part of the
	// options, hence of the cache key: never a production cubin's.
	opts := append(v.Options(), devDefines()...)
	return Request{
		Name:    v.Name,
		File:    v.File,
		Source:  src,
		Headers: kernsrc.Headers(),
		Options: opts,
		Entries: []string{v.Kernel},
		Target:  t,
	}, nil
}

// Artifact is a compiled module image and what is known about it. Artifacts
// returned by a Compiler may be shared between callers: treat them as
// read-only.
type Artifact struct {
	Key    string // the request's cache Key
	Name   string // the request's Name
	Target Target // the request's Target
	Image  []byte // cubin, or NUL-terminated PTX text when IsPTX
	IsPTX  bool   // Image is PTX for the driver to compile at load time
	Report Report // ptxas resource usage (empty for PTX)
	Log    string // the full NVRTC log
	// Lowered maps each requested entry to the symbol to look the kernel up
	// by in the loaded module (the same name for extern "C" kernels).
	Lowered map[string]string
	// CompileTime is how long NVRTC took when the artifact was compiled,
	// also when it now comes from the disk cache.
	CompileTime time.Duration
	// Elapsed is how long this Compile call took: a disk read on a hit.
	Elapsed  time.Duration
	FromDisk bool // read from the disk cache, not compiled now
	// DiskErr says why the artifact could not be written to the disk cache
	// (nil when it was, when it came from there, or without a cache). The
	// artifact is usable either way.
	DiskErr error
}

// Symbol returns the name to look entry up by in the loaded module.
func (a *Artifact) Symbol(entry string) string {
	if s, ok := a.Lowered[entry]; ok && s != "" {
		return s
	}
	return entry
}

// CompileError is a source NVRTC rejected. Log is NVRTC's complete log, with
// the file, line and message of each error.
type CompileError struct {
	Name    string   // the request's Name
	Target  Target   // the request's Target
	Options []string // the full option list NVRTC was given
	Log     string   // NVRTC's log
}

// Error gives the request, target and the full NVRTC log.
func (e *CompileError) Error() string {
	return fmt.Sprintf("jit: %s does not compile for %s (options %s):\n%s",
		e.Name, e.Target, strings.Join(e.Options, " "), strings.TrimRight(e.Log, "\n"))
}

// Compiler compiles requests with NVRTC, reading and filling a disk cache.
// It is safe for concurrent use; concurrent requests with one key compile
// once.
type Compiler struct {
	disk   *DiskCache
	flight singleflight.Group
}

// NewCompiler returns a compiler backed by disk; a nil disk disables the
// disk cache. NVRTC is loaded on the first Compile.
func NewCompiler(disk *DiskCache) *Compiler { return &Compiler{disk: disk} }

// Disk returns the compiler's disk cache (nil without one).
func (c *Compiler) Disk() *DiskCache { return c.disk }

// Key returns the cache key req would have, which depends on the NVRTC that
// LoadNVRTC finds.
func (c *Compiler) Key(req Request) (string, error) {
	n, err := LoadNVRTC()
	if err != nil {
		return "", err
	}
	return Key(req, n.major, n.minor), nil
}

// Compile returns req's module image: from the disk cache when an intact
// entry has its key, otherwise compiled by NVRTC and then written to the
// cache. A source that does not compile returns a *CompileError.
func (c *Compiler) Compile(req Request) (*Artifact, error) {
	if req.Name == "" || req.Source == "" {
		return nil, errors.New("jit: a request needs a Name and a Source")
	}
	n, err := LoadNVRTC()
	if err != nil {
		return nil, err
	}
	key := Key(req, n.major, n.minor)
	v, err, _ := c.flight.Do(key, func() (any, error) { return c.compile(n, key, req) })
	if err != nil {
		return nil, err
	}
	return v.(*Artifact), nil
}

// compile is Compile's body for one key, run once per concurrent key.
func (c *Compiler) compile(n *NVRTC, key string, req Request) (*Artifact, error) {
	start := time.Now()
	if c.disk != nil {
		a, err := c.disk.Load(key)
		if err == nil {
			if !a.IsPTX && len(a.Report.Functions) == 0 {
				a.Report = reportOf(a.Log, a.Image) // an entry written before reports came from cubins too
			}
			a.FromDisk = true
			a.Elapsed = time.Since(start)
			debugf("disk hit %s (%s) %s in %s", req.Name, req.Target, short(key), a.Elapsed.Round(time.Microsecond))
			return a, nil
		}
		if errors.Is(err, ErrCorrupt) {
			debugf("%v; recompiling", err)
		}
	}

	opts := req.CompileOptions()
	debugf("compile %s for %s: nvrtc %d.%d options %s", req.Name, req.Target, n.major, n.minor, strings.Join(opts, " "))
	names := make([]string, 0, len(req.Headers))
	for h := range req.Headers {
		names = append(names, h)
	}
	sort.Strings(names)
	out, isCompileErr, err := n.lib.compile(&program{
		name:     req.fileName(),
		source:   req.Source,
		headers:  req.Headers,
		sortedHN: names,
		options:  opts,
		names:    req.Entries,
		cubin:    !req.Target.PTX,
	})
	took := time.Since(start)
	if isCompileErr {
		debugf("compile %s failed after %s:\n%s", req.Name, took.Round(time.Microsecond), out.log)
		return nil, &CompileError{Name: req.Name, Target: req.Target, Options: opts, Log: out.log}
	}
	if err != nil {
		return nil, fmt.Errorf("jit: compile %s for %s: %w", req.Name, req.Target, err)
	}
	a := &Artifact{
		Key:         key,
		Name:        req.Name,
		Target:      req.Target,
		Image:       out.image,
		IsPTX:       req.Target.PTX,
		Log:         out.log,
		Lowered:     out.lowered,
		CompileTime: took,
		Elapsed:     took,
	}
	if !a.IsPTX {
		a.Report = reportOf(out.log, out.image)
	}
	debugf("compiled %s for %s in %s, %d bytes, key %s", req.Name, req.Target, took.Round(time.Microsecond), len(a.Image), short(key))
	if !a.IsPTX {
		debugf("ptxas report for %s:\n%s", req.Name, indent(a.Report.String()))
	}
	if c.disk != nil {
		if err := c.disk.Store(a); err != nil {
			a.DiskErr = err
			debugf("disk store %s: %v", short(key), err)
			c.disk.warnStoreFailed(err)
		}
	}
	return a, nil
}

// short abbreviates a key for messages.
func short(key string) string {
	if len(key) > 12 {
		return key[:12]
	}
	return key
}
