package jit

// This file is the only cgo in package jit: it opens libnvrtc with dlopen and
// calls it through function pointers, so the binary neither links NVRTC nor
// pins its soname at build time (docs/TOOLCHAIN.md: the device machine has
// libnvrtc.so.13, CI has libnvrtc.so.12).

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef int gdn_nvrtcResult;
typedef void* gdn_nvrtcProgram;

typedef struct {
	void* handle;
	gdn_nvrtcResult (*version)(int*, int*);
	const char* (*getErrorString)(gdn_nvrtcResult);
	gdn_nvrtcResult (*getNumSupportedArchs)(int*);
	gdn_nvrtcResult (*getSupportedArchs)(int*);
	gdn_nvrtcResult (*createProgram)(gdn_nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*);
	gdn_nvrtcResult (*destroyProgram)(gdn_nvrtcProgram*);
	gdn_nvrtcResult (*compileProgram)(gdn_nvrtcProgram, int, const char* const*);
	gdn_nvrtcResult (*getProgramLogSize)(gdn_nvrtcProgram, size_t*);
	gdn_nvrtcResult (*getProgramLog)(gdn_nvrtcProgram, char*);
	gdn_nvrtcResult (*getPTXSize)(gdn_nvrtcProgram, size_t*);
	gdn_nvrtcResult (*getPTX)(gdn_nvrtcProgram, char*);
	gdn_nvrtcResult (*getCUBINSize)(gdn_nvrtcProgram, size_t*);
	gdn_nvrtcResult (*getCUBIN)(gdn_nvrtcProgram, char*);
	gdn_nvrtcResult (*addNameExpression)(gdn_nvrtcProgram, const char*);
	gdn_nvrtcResult (*getLoweredName)(gdn_nvrtcProgram, const char*, const char**);
} gdn_nvrtc;

// gdn_dlerror returns dlerror's text. dlerror reports the last failure on
// the calling thread, so it is read in the same C call as the failing
// dlopen, never in a second cgo call (which may run on another thread).
static const char* gdn_dlerror(void) {
	const char* e = dlerror();
	return e ? e : "unknown dlopen error";
}

// gdn_dlopen_global opens a library so that later libraries find its symbols
// and soname (libnvrtc finds its builtins library this way). It returns NULL
// on success, else dlerror's text.
static const char* gdn_dlopen_global(const char* path) {
	return dlopen(path, RTLD_NOW | RTLD_GLOBAL) ? 0 : gdn_dlerror();
}

// gdn_nvrtc_open fills n from the library at path. It returns NULL on success,
// or a message that the caller must not free.
static const char* gdn_nvrtc_open(const char* path, gdn_nvrtc* n) {
	memset(n, 0, sizeof(*n));
	void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) return gdn_dlerror();
#define GDN_SYM(field, name) n->field = dlsym(h, name)
	GDN_SYM(version, "nvrtcVersion");
	GDN_SYM(getErrorString, "nvrtcGetErrorString");
	GDN_SYM(getNumSupportedArchs, "nvrtcGetNumSupportedArchs");
	GDN_SYM(getSupportedArchs, "nvrtcGetSupportedArchs");
	GDN_SYM(createProgram, "nvrtcCreateProgram");
	GDN_SYM(destroyProgram, "nvrtcDestroyProgram");
	GDN_SYM(compileProgram, "nvrtcCompileProgram");
	GDN_SYM(getProgramLogSize, "nvrtcGetProgramLogSize");
	GDN_SYM(getProgramLog, "nvrtcGetProgramLog");
	GDN_SYM(getPTXSize, "nvrtcGetPTXSize");
	GDN_SYM(getPTX, "nvrtcGetPTX");
	GDN_SYM(getCUBINSize, "nvrtcGetCUBINSize");
	GDN_SYM(getCUBIN, "nvrtcGetCUBIN");
	GDN_SYM(addNameExpression, "nvrtcAddNameExpression");
	GDN_SYM(getLoweredName, "nvrtcGetLoweredName");
#undef GDN_SYM
	if (!n->version || !n->getErrorString || !n->createProgram || !n->destroyProgram ||
	    !n->compileProgram || !n->getProgramLogSize || !n->getProgramLog || !n->getPTXSize || !n->getPTX) {
		dlclose(h);
		memset(n, 0, sizeof(*n));
		return "not an NVRTC library: core nvrtc symbols missing";
	}
	n->handle = h;
	return NULL;
}

// gdn_nvrtc_path names the file the loader actually opened (a bare soname
// resolves through the loader path).
static const char* gdn_nvrtc_path(gdn_nvrtc* n) {
	Dl_info info;
	if (dladdr((void*)n->version, &info) && info.dli_fname) return info.dli_fname;
	return NULL;
}

static gdn_nvrtcResult gdn_nvrtc_version(gdn_nvrtc* n, int* major, int* minor) { return n->version(major, minor); }
static const char* gdn_nvrtc_error_string(gdn_nvrtc* n, gdn_nvrtcResult r) { return n->getErrorString(r); }
static int gdn_nvrtc_has_archs(gdn_nvrtc* n) { return n->getNumSupportedArchs && n->getSupportedArchs; }
static gdn_nvrtcResult gdn_nvrtc_num_archs(gdn_nvrtc* n, int* k) { return n->getNumSupportedArchs(k); }
static gdn_nvrtcResult gdn_nvrtc_archs(gdn_nvrtc* n, int* a) { return n->getSupportedArchs(a); }
static int gdn_nvrtc_has_cubin(gdn_nvrtc* n) { return n->getCUBINSize && n->getCUBIN; }
static int gdn_nvrtc_has_names(gdn_nvrtc* n) { return n->addNameExpression && n->getLoweredName; }

static gdn_nvrtcResult gdn_nvrtc_create(gdn_nvrtc* n, gdn_nvrtcProgram* p, const char* src, const char* name,
                                        int numHeaders, char** headers, char** includeNames) {
	return n->createProgram(p, src, name, numHeaders, (const char* const*)headers, (const char* const*)includeNames);
}
static gdn_nvrtcResult gdn_nvrtc_destroy(gdn_nvrtc* n, gdn_nvrtcProgram* p) { return n->destroyProgram(p); }
static gdn_nvrtcResult gdn_nvrtc_compile(gdn_nvrtc* n, gdn_nvrtcProgram p, int numOptions, char** options) {
	return n->compileProgram(p, numOptions, (const char* const*)options);
}
static gdn_nvrtcResult gdn_nvrtc_log_size(gdn_nvrtc* n, gdn_nvrtcProgram p, size_t* s) { return n->getProgramLogSize(p, s); }
static gdn_nvrtcResult gdn_nvrtc_log(gdn_nvrtc* n, gdn_nvrtcProgram p, char* b) { return n->getProgramLog(p, b); }
static gdn_nvrtcResult gdn_nvrtc_ptx_size(gdn_nvrtc* n, gdn_nvrtcProgram p, size_t* s) { return n->getPTXSize(p, s); }
static gdn_nvrtcResult gdn_nvrtc_ptx(gdn_nvrtc* n, gdn_nvrtcProgram p, char* b) { return n->getPTX(p, b); }
static gdn_nvrtcResult gdn_nvrtc_cubin_size(gdn_nvrtc* n, gdn_nvrtcProgram p, size_t* s) { return n->getCUBINSize(p, s); }
static gdn_nvrtcResult gdn_nvrtc_cubin(gdn_nvrtc* n, gdn_nvrtcProgram p, char* b) { return n->getCUBIN(p, b); }
static gdn_nvrtcResult gdn_nvrtc_add_name(gdn_nvrtc* n, gdn_nvrtcProgram p, const char* e) { return n->addNameExpression(p, e); }
static gdn_nvrtcResult gdn_nvrtc_lowered(gdn_nvrtc* n, gdn_nvrtcProgram p, const char* e, const char** out) {
	return n->getLoweredName(p, e, out);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// nvrtcSuccess is NVRTC_SUCCESS; nvrtcErrorCompilation is
// NVRTC_ERROR_COMPILATION, the result of a source that does not compile.
const (
	nvrtcSuccess          = 0
	nvrtcErrorCompilation = 6
)

// lib is an opened libnvrtc: a table of C function pointers in C memory.
type lib struct {
	fns *C.gdn_nvrtc
}

// dlopenGlobal opens a helper library (the NVRTC builtins) with RTLD_GLOBAL;
// it returns the dlerror text on failure. The handle is never closed: the
// library must stay for libnvrtc's lifetime, which is the process's.
func dlopenGlobal(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	// dlerror's text lives in a per-thread buffer that the thread's next
	// dl* call overwrites: copy it before the goroutine can move or another
	// goroutine run on this thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if msg := C.gdn_dlopen_global(cpath); msg != nil {
		return fmt.Errorf("%s", C.GoString(msg))
	}
	return nil
}

// openLib dlopens libnvrtc at path (a file or a bare soname) and resolves
// its symbols; the error carries dlerror's text.
func openLib(path string) (*lib, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	fns := (*C.gdn_nvrtc)(C.malloc(C.size_t(unsafe.Sizeof(C.gdn_nvrtc{}))))
	runtime.LockOSThread() // as in dlopenGlobal: dlerror's buffer is per thread
	defer runtime.UnlockOSThread()
	if msg := C.gdn_nvrtc_open(cpath, fns); msg != nil {
		err := fmt.Errorf("%s", C.GoString(msg))
		C.free(unsafe.Pointer(fns))
		return nil, err
	}
	return &lib{fns: fns}, nil
}

// path is the file the dynamic loader opened for this library.
func (l *lib) path() string {
	if p := C.gdn_nvrtc_path(l.fns); p != nil {
		return C.GoString(p)
	}
	return ""
}

// errorString is nvrtcGetErrorString.
func (l *lib) errorString(r C.gdn_nvrtcResult) string {
	return C.GoString(C.gdn_nvrtc_error_string(l.fns, r))
}

// check turns an NVRTC result into an error naming the call.
func (l *lib) check(call string, r C.gdn_nvrtcResult) error {
	if r == nvrtcSuccess {
		return nil
	}
	return &nvrtcError{Call: call, Code: int(r), Msg: l.errorString(r)}
}

// version is nvrtcVersion.
func (l *lib) version() (major, minor int, err error) {
	var a, b C.int
	if err := l.check("nvrtcVersion", C.gdn_nvrtc_version(l.fns, &a, &b)); err != nil {
		return 0, 0, err
	}
	return int(a), int(b), nil
}

// supportedArchs is nvrtcGetSupportedArchs (NVRTC 11.2 and later); nil when
// the library is older.
func (l *lib) supportedArchs() ([]int, error) {
	if C.gdn_nvrtc_has_archs(l.fns) == 0 {
		return nil, nil
	}
	var n C.int
	if err := l.check("nvrtcGetNumSupportedArchs", C.gdn_nvrtc_num_archs(l.fns, &n)); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, nil
	}
	buf := (*C.int)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.int(0)))))
	defer C.free(unsafe.Pointer(buf))
	if err := l.check("nvrtcGetSupportedArchs", C.gdn_nvrtc_archs(l.fns, buf)); err != nil {
		return nil, err
	}
	out := make([]int, int(n))
	for i, v := range unsafe.Slice(buf, int(n)) {
		out[i] = int(v)
	}
	return out, nil
}

// hasCubin says whether the library can return cubins (NVRTC 11.1+).
func (l *lib) hasCubin() bool { return C.gdn_nvrtc_has_cubin(l.fns) != 0 }

// program is the input of one NVRTC compilation.
type program struct {
	name     string
	source   string
	headers  map[string]string // include name -> text
	options  []string
	names    []string // name expressions to instantiate and lower
	cubin    bool     // fetch the cubin (else the PTX)
	sortedHN []string // header names in a fixed order
}

// compiled is the output of one NVRTC compilation.
type compiled struct {
	image   []byte
	log     string
	lowered map[string]string
}

// cStrings copies Go strings into one C array of C strings; free releases it.
// The array is written as uintptr into calloc'd memory: a store of a *C.char
// is a write barrier that checks the word it overwrites, and malloc's
// leftovers can be a freed Go object's address, which kills the process
// ("found bad pointer in Go heap"; package internal/staleptr).
func cStrings(ss []string) (arr **C.char, free func(), err error) {
	if len(ss) == 0 {
		return nil, func() {}, nil
	}
	p := C.calloc(C.size_t(len(ss)), C.size_t(unsafe.Sizeof(uintptr(0))))
	if p == nil {
		return nil, nil, errors.New("jit: out of host memory for NVRTC's string arrays")
	}
	words := unsafe.Slice((*uintptr)(p), len(ss))
	strs := make([]*C.char, len(ss)) // Go memory: for free
	for i, v := range ss {
		strs[i] = C.CString(v)
		words[i] = uintptr(unsafe.Pointer(strs[i]))
	}
	return (**C.char)(p), func() {
		for _, c := range strs {
			C.free(unsafe.Pointer(c))
		}
		C.free(p)
	}, nil
}

// compile runs one NVRTC program from creation to destruction. A source that
// does not compile returns the log with errCompilation set; any other
// failure returns an *nvrtcError.
func (l *lib) compile(p *program) (out compiled, errCompilation bool, err error) {
	if p.cubin && !l.hasCubin() {
		return out, false, fmt.Errorf("jit: this NVRTC cannot emit cubins (nvrtcGetCUBIN missing): target a compute_XY PTX instead")
	}
	if len(p.names) > 0 && C.gdn_nvrtc_has_names(l.fns) == 0 {
		return out, false, fmt.Errorf("jit: this NVRTC lacks name expressions (nvrtcAddNameExpression)")
	}
	csrc := C.CString(p.source)
	defer C.free(unsafe.Pointer(csrc))
	cname := C.CString(p.name)
	defer C.free(unsafe.Pointer(cname))
	texts := make([]string, len(p.sortedHN))
	for i, h := range p.sortedHN {
		texts[i] = p.headers[h]
	}
	chdr, freeHdr, err := cStrings(texts)
	if err != nil {
		return out, false, err
	}
	defer freeHdr()
	cinc, freeInc, err := cStrings(p.sortedHN)
	if err != nil {
		return out, false, err
	}
	defer freeInc()
	copts, freeOpts, err := cStrings(p.options)
	if err != nil {
		return out, false, err
	}
	defer freeOpts()

	var prog C.gdn_nvrtcProgram
	if err := l.check("nvrtcCreateProgram", C.gdn_nvrtc_create(l.fns, &prog, csrc, cname, C.int(len(texts)), chdr, cinc)); err != nil {
		return out, false, err
	}
	defer C.gdn_nvrtc_destroy(l.fns, &prog)

	cnames := make([]*C.char, len(p.names))
	for i, n := range p.names {
		cnames[i] = C.CString(n)
		defer C.free(unsafe.Pointer(cnames[i]))
		if err := l.check("nvrtcAddNameExpression", C.gdn_nvrtc_add_name(l.fns, prog, cnames[i])); err != nil {
			return out, false, err
		}
	}

	res := C.gdn_nvrtc_compile(l.fns, prog, C.int(len(p.options)), copts)
	// The log holds the errors on failure and the ptxas report on success.
	var logSize C.size_t
	if err := l.check("nvrtcGetProgramLogSize", C.gdn_nvrtc_log_size(l.fns, prog, &logSize)); err != nil {
		return out, false, err
	}
	if logSize > 1 {
		buf := make([]byte, int(logSize))
		if err := l.check("nvrtcGetProgramLog", C.gdn_nvrtc_log(l.fns, prog, (*C.char)(unsafe.Pointer(&buf[0])))); err != nil {
			return out, false, err
		}
		out.log = string(buf[:len(buf)-1]) // drop the terminating NUL
	}
	if res == nvrtcErrorCompilation {
		return out, true, l.check("nvrtcCompileProgram", res)
	}
	if err := l.check("nvrtcCompileProgram", res); err != nil {
		return out, false, err
	}

	var size C.size_t
	if p.cubin {
		if err := l.check("nvrtcGetCUBINSize", C.gdn_nvrtc_cubin_size(l.fns, prog, &size)); err != nil {
			return out, false, err
		}
	} else if err := l.check("nvrtcGetPTXSize", C.gdn_nvrtc_ptx_size(l.fns, prog, &size)); err != nil {
		return out, false, err
	}
	if size == 0 {
		return out, false, fmt.Errorf("jit: NVRTC returned an empty image")
	}
	img := make([]byte, int(size))
	dst := (*C.char)(unsafe.Pointer(&img[0]))
	if p.cubin {
		err = l.check("nvrtcGetCUBIN", C.gdn_nvrtc_cubin(l.fns, prog, dst))
	} else {
		err = l.check("nvrtcGetPTX", C.gdn_nvrtc_ptx(l.fns, prog, dst))
	}
	if err != nil {
		return out, false, err
	}
	out.image = img

	if len(p.names) > 0 {
		out.lowered = make(map[string]string, len(p.names))
		for i, n := range p.names {
			var low *C.char
			if err := l.check("nvrtcGetLoweredName", C.gdn_nvrtc_lowered(l.fns, prog, cnames[i], &low)); err != nil {
				return out, false, err
			}
			out.lowered[n] = C.GoString(low)
		}
	}
	return out, false, nil
}
