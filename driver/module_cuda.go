//go:build cuda

package driver

/*
#include <stdint.h>
#include <stdlib.h>
#include <cuda.h>

// gdn_module_load loads image (cubin, fatbin or NUL-terminated PTX) and
// collects the JIT error log into log (logsz bytes, NUL-terminated).
static CUresult gdn_module_load(CUmodule* mod, const void* image, char* log, size_t logsz) {
	CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void* vals[2] = {log, (void*)(uintptr_t)logsz};
	log[0] = 0;
	return cuModuleLoadDataEx(mod, image, 2, opts, vals);
}

static CUresult gdn_func_attr(int* v, CUfunction_attribute a, CUfunction f) {
	return cuFuncGetAttribute(v, a, f);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
)

var (
	errNilModule      = errors.New("driver: nil *Module")
	errUnloadedModule = errors.New("driver: Module is unloaded")
	errNilFunction    = errors.New("driver: nil *Function")
)

const jitLogSize = 16 << 10

// Module is a loaded CUDA module (cuModuleLoadDataEx), safe for concurrent
// use. Unload it when done; its Functions are invalid afterwards.
type Module struct {
	ctx      *Context
	raw      C.CUmodule
	unloaded atomic.Bool
}

// LoadModule loads a cubin, fatbin or PTX image into the context. PTX need
// not be NUL-terminated (a terminating NUL is added when missing). A failed
// PTX JIT puts the driver's error log into the Error's Message.
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, errors.New("driver: LoadModule: empty image")
	}
	if image[len(image)-1] != 0 {
		image = append(image[:len(image):len(image)], 0)
	}
	m := &Module{ctx: c}
	err := c.do(func() error {
		log := (*C.char)(C.malloc(jitLogSize))
		if log == nil {
			return errors.New("driver: LoadModule: out of host memory")
		}
		defer C.free(unsafe.Pointer(log))
		r := C.gdn_module_load(&m.raw, unsafe.Pointer(&image[0]), log, jitLogSize)
		if r == C.CUDA_SUCCESS {
			return nil
		}
		e := newError("cuModuleLoadDataEx", int(r))
		if s := C.GoString(log); s != "" {
			e.Message += ": " + s
		}
		return e
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Module) usable() error {
	if m == nil {
		return errNilModule
	}
	if m.unloaded.Load() {
		return errUnloadedModule
	}
	return nil
}

// Unload unloads the module (cuModuleUnload); a second call does nothing.
// No launch of its functions may be pending or captured in a live graph.
func (m *Module) Unload() error {
	if m == nil {
		return errNilModule
	}
	if m.unloaded.Swap(true) {
		return nil
	}
	return m.ctx.do(func() error { return check("cuModuleUnload", C.cuModuleUnload(m.raw)) })
}

// Function is a kernel of a Module, safe for concurrent use.
type Function struct {
	mod  *Module
	raw  C.CUfunction
	name string
}

// Function looks up a kernel by its (mangled, or extern "C") name
// (cuModuleGetFunction).
func (m *Module) Function(name string) (*Function, error) {
	if err := m.usable(); err != nil {
		return nil, err
	}
	if name == "" {
		return nil, errors.New("driver: Module.Function: empty name")
	}
	f := &Function{mod: m, name: name}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	err := m.ctx.do(func() error {
		return check("cuModuleGetFunction", C.cuModuleGetFunction(&f.raw, m.raw, cname))
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Name returns the name the function was looked up by.
func (f *Function) Name() string {
	if f == nil {
		return ""
	}
	return f.name
}

// Handle returns the raw CUfunction.
func (f *Function) Handle() uintptr {
	if f == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(f.raw))
}

func (f *Function) usable() error {
	if f == nil {
		return errNilFunction
	}
	return f.mod.usable()
}

// SetMaxDynamicShared allows launches of f with up to bytes of dynamic
// shared memory (cuFuncSetAttribute with
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES); needed above 48 KB, up to
// DeviceInfo.MaxSharedPerBlockOptin minus the static shared memory.
func (f *Function) SetMaxDynamicShared(bytes int) error {
	if err := f.usable(); err != nil {
		return err
	}
	if bytes < 0 || bytes > 1<<31-1 {
		return fmt.Errorf("driver: SetMaxDynamicShared: %d bytes out of range", bytes)
	}
	return f.mod.ctx.do(func() error {
		return check("cuFuncSetAttribute", C.cuFuncSetAttribute(f.raw, C.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, C.int(bytes)))
	})
}

// Attributes returns the kernel's registers, local memory, static shared
// memory, largest block and dynamic shared memory limit (cuFuncGetAttribute).
func (f *Function) Attributes() (FuncAttributes, error) {
	var a FuncAttributes
	if err := f.usable(); err != nil {
		return a, err
	}
	err := f.mod.ctx.do(func() error {
		for _, q := range []struct {
			attr C.CUfunction_attribute
			dst  *int
		}{
			{C.CU_FUNC_ATTRIBUTE_NUM_REGS, &a.NumRegs},
			{C.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, &a.LocalBytes},
			{C.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &a.StaticShared},
			{C.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &a.MaxThreadsPerBlock},
			{C.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, &a.MaxDynamicShared},
		} {
			var v C.int
			if err := check("cuFuncGetAttribute", C.gdn_func_attr(&v, q.attr, f.raw)); err != nil {
				return err
			}
			*q.dst = int(v)
		}
		return nil
	})
	return a, err
}
