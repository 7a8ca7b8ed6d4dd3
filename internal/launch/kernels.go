package launch

import (
	"fmt"
	"sync"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/jit"
	"github.com/gdnjit/gdn/kernsrc"
)

// kernels loads a context's kernels: compiled on first use (the jit memory
// cache, else the disk cache, else NVRTC; concurrent first uses compile
// once) and kept loaded until close.
type kernels struct {
	ctx      *driver.Context
	target   jit.Target
	compiler *jit.Compiler
	modules  *jit.MemCache // compiled-module key -> *loadedKernel (singleflight on first use)

	// byName maps a variant name to its *loadedKernel once loaded: the hot
	// path looks a kernel up by name, without hashing sources for its key.
	// One handle on each is held until close, so a loaded module is never
	// unloaded while a launch or a graph may use it.
	byName sync.Map
	mu     sync.Mutex
	held   []*jit.Handle

	// testBuild, set only by the GPU tests (Launcher.UseTestBuild) before
	// the first call, builds each variant as a test build of the kernel
	// (kernsrc.HopperHooked).
	testBuild func(kernsrc.Variant) kernsrc.Variant
}

// loadedKernel is a loaded module and its entry point.
type loadedKernel struct {
	module *driver.Module
	fn     *driver.Function
	report jit.Report
}

// load returns the loaded kernel of a variant, compiling it (or reading the
// disk cache) and loading it on first use. The variant's request (sources,
// options, and in a development build the defines and lab of the
// environment) is read on that first use only.
func (ks *kernels) load(v kernsrc.Variant, sharedBytes int) (*loadedKernel, error) {
	if ks.testBuild != nil {
		v = ks.testBuild(v)
	}
	if k, ok := ks.byName.Load(v.Name); ok {
		return k.(*loadedKernel), nil
	}
	req, err := jit.RequestFor(v, ks.target)
	if err != nil {
		return nil, err
	}
	key, err := ks.compiler.Key(req)
	if err != nil {
		return nil, err
	}
	h, err := ks.modules.Acquire(key, func() (any, int64, func(), error) {
		art, err := ks.compiler.Compile(req)
		if err != nil {
			return nil, 0, nil, err
		}
		// A first call may come inside a caller's stream capture, where
		// loading a module is a call CUDA refuses in the default (global)
		// capture mode; relaxed mode allows it.
		var mod *driver.Module
		var fn *driver.Function
		var loadErr error
		err = ks.ctx.RelaxedCapture(func() error {
			if mod, loadErr = ks.ctx.LoadModule(art.Image); loadErr != nil {
				return nil
			}
			// The request's entry, not v's: a development build's lab
			// experiment compiles a kernel of other template arguments.
			fn, err = mod.Function(art.Symbol(req.Entries[0]))
			if err == nil && sharedBytes > 48<<10 {
				err = fn.SetMaxDynamicShared(sharedBytes)
			}
			if err != nil {
				mod.Unload()
			}
			return err
		})
		if loadErr != nil {
			return nil, 0, nil, fmt.Errorf("gdn: load %s: %w", v.Name, loadErr)
		}
		if err != nil {
			return nil, 0, nil, fmt.Errorf("gdn: %s: %w", v.Name, err)
		}
		k := &loadedKernel{module: mod, fn: fn, report: art.Report}
		// Runs at close only (every module is held until then); launches
		// enqueued earlier may still be running the module's code.
		destroy := func() { ks.ctx.SynchronizeOrWait(); mod.Unload() }
		return k, 1, destroy, nil
	})
	if err != nil {
		return nil, err
	}
	k := h.Value().(*loadedKernel)
	if _, loaded := ks.byName.LoadOrStore(v.Name, k); loaded {
		h.Release() // another goroutine stored it first and holds it
	} else {
		ks.mu.Lock()
		ks.held = append(ks.held, h)
		ks.mu.Unlock()
	}
	return k, nil
}

// close releases every kernel and unloads the modules.
func (ks *kernels) close() {
	ks.mu.Lock()
	for _, h := range ks.held {
		h.Release()
	}
	ks.held = nil
	ks.mu.Unlock()
	ks.modules.Close()
}
