//go:build cuda

package driver

// Green contexts (CUDA 12.4): a Context on a slice of the device's SMs.
//
// The entry points are resolved with cuGetProcAddress rather than linked:
// the libcuda the build links against (scripts/cuda-sdk.sh fetches driver
// 535's, CUDA 12.2) lacks them, and a binary that linked them directly would
// not start under a driver older than 12.4. Where they are missing, or the
// driver answers CUDA_ERROR_NOT_SUPPORTED, OpenGreen returns an error
// wrapping ErrGreenUnsupported and OpenSMs falls back to the whole device,
// saying so in DeviceInfo.GreenFallback.

/*
#include <string.h>
#include <cuda.h>

typedef CUresult (*gdn_pfn_dev_resource)(CUdevice, CUdevResource*, CUdevResourceType);
typedef CUresult (*gdn_pfn_split)(CUdevResource*, unsigned int*, const CUdevResource*, CUdevResource*, unsigned int, unsigned int);
typedef CUresult (*gdn_pfn_gen_desc)(CUdevResourceDesc*, CUdevResource*, unsigned int);
typedef CUresult (*gdn_pfn_green_create)(CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned int);
typedef CUresult (*gdn_pfn_green_destroy)(CUgreenCtx);
typedef CUresult (*gdn_pfn_from_green)(CUcontext*, CUgreenCtx);
typedef CUresult (*gdn_pfn_green_resource)(CUgreenCtx, CUdevResource*, CUdevResourceType);

static struct {
	gdn_pfn_dev_resource dev_resource;
	gdn_pfn_split split;
	gdn_pfn_gen_desc gen_desc;
	gdn_pfn_green_create create;
	gdn_pfn_green_destroy destroy;
	gdn_pfn_from_green from_green;
	gdn_pfn_green_resource green_resource;
} gdn_green;

// gdn_green_missing names the first entry point that gdn_green_load could
// not resolve (NULL when all were).
static const char* gdn_green_missing;

static const char* gdn_green_first_missing(void) { return gdn_green_missing; }

static int gdn_green_sym(const char* name, void** fn) {
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
	*fn = NULL;
	CUresult r = cuGetProcAddress(name, fn, 12040, CU_GET_PROC_ADDRESS_DEFAULT, &st);
	if (r != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS || *fn == NULL) {
		*fn = NULL;
		if (gdn_green_missing == NULL) gdn_green_missing = name;
		return 0;
	}
	return 1;
}

// gdn_green_load resolves the green-context entry points; 1 when all are
// there. Called once (Go's sync.Once).
static int gdn_green_load(void) {
	int ok = 1;
	ok &= gdn_green_sym("cuDeviceGetDevResource", (void**)&gdn_green.dev_resource);
	ok &= gdn_green_sym("cuDevSmResourceSplitByCount", (void**)&gdn_green.split);
	ok &= gdn_green_sym("cuDevResourceGenerateDesc", (void**)&gdn_green.gen_desc);
	ok &= gdn_green_sym("cuGreenCtxCreate", (void**)&gdn_green.create);
	ok &= gdn_green_sym("cuGreenCtxDestroy", (void**)&gdn_green.destroy);
	ok &= gdn_green_sym("cuCtxFromGreenCtx", (void**)&gdn_green.from_green);
	ok &= gdn_green_sym("cuGreenCtxGetDevResource", (void**)&gdn_green.green_resource);
	return ok;
}

// gdn_current is the context current on this thread (NULL if none), for tests.
static CUcontext gdn_current(void) {
	CUcontext c = NULL;
	cuCtxGetCurrent(&c);
	return c;
}

// gdn_green_opened is what gdn_green_open did: the first failing call (r,
// call) or the green context, its converted CUcontext, the SMs it holds and
// the device's SM count.
typedef struct {
	CUresult r;
	const char* call;
	CUgreenCtx green;
	CUcontext ctx;
	unsigned int sms;
	unsigned int total;
	int too_many; // sms asked > total: nothing was created
} gdn_green_opened;

// gdn_green_open creates a green context on at least sms SMs of dev. The
// split rounds sms up to the architecture's granularity (8 SMs on sm_90);
// when the rounded group does not fit, or sms is the whole device, the green
// context gets every SM. Everything stays in C: no Go pointer crosses.
static gdn_green_opened gdn_green_open(int dev, unsigned int sms) {
	gdn_green_opened o;
	CUdevResource all, group, rest;
	CUdevResource* use = &all;
	CUdevResourceDesc desc = NULL;
	CUdevResource got;
	memset(&o, 0, sizeof o);
	memset(&all, 0, sizeof all);
	memset(&group, 0, sizeof group);
	memset(&rest, 0, sizeof rest);
	memset(&got, 0, sizeof got);

	o.call = "cuDeviceGetDevResource";
	o.r = gdn_green.dev_resource((CUdevice)dev, &all, CU_DEV_RESOURCE_TYPE_SM);
	if (o.r != CUDA_SUCCESS) return o;
	o.total = all.sm.smCount;
	if (sms > o.total) {
		o.too_many = 1;
		return o;
	}
	if (sms < o.total) {
		unsigned int n = 1;
		CUresult r = gdn_green.split(&group, &n, &all, &rest, 0, sms);
		if (r == CUDA_SUCCESS && n == 1 && group.sm.smCount >= sms) {
			use = &group;
		} else if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION && r != CUDA_ERROR_INVALID_VALUE) {
			o.call = "cuDevSmResourceSplitByCount";
			o.r = r;
			return o;
		}
		// else: no group of at least sms SMs besides the rest (sms rounds
		// up past the device): the whole device is the smallest slice.
	}
	o.call = "cuDevResourceGenerateDesc";
	o.r = gdn_green.gen_desc(&desc, use, 1);
	if (o.r != CUDA_SUCCESS) return o;
	o.call = "cuGreenCtxCreate";
	o.r = gdn_green.create(&o.green, desc, (CUdevice)dev, CU_GREEN_CTX_DEFAULT_STREAM);
	if (o.r != CUDA_SUCCESS) {
		o.green = NULL;
		return o;
	}
	o.call = "cuCtxFromGreenCtx";
	o.r = gdn_green.from_green(&o.ctx, o.green);
	if (o.r == CUDA_SUCCESS) {
		o.call = "cuGreenCtxGetDevResource";
		o.r = gdn_green.green_resource(o.green, &got, CU_DEV_RESOURCE_TYPE_SM);
	}
	if (o.r != CUDA_SUCCESS) {
		gdn_green.destroy(o.green);
		o.green = NULL;
		o.ctx = NULL;
		return o;
	}
	o.sms = got.sm.smCount;
	o.call = NULL;
	return o;
}

// gdn_green_close waits for the green context's work (best effort: a
// capture elsewhere can make cuCtxSynchronize fail; its result is dropped)
// and destroys it, leaving on this thread the context that was current
// before (or none). The CUcontext from cuCtxFromGreenCtx needs no release
// of its own: its life is the green context's.
static CUresult gdn_green_close(CUgreenCtx g, CUcontext ctx) {
	CUcontext prev = NULL;
	cuCtxGetCurrent(&prev);
	if (cuCtxSetCurrent(ctx) == CUDA_SUCCESS) cuCtxSynchronize();
	cuCtxSetCurrent(prev == ctx ? NULL : prev);
	return gdn_green.destroy(g);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	cu "gorgonia.org/cu"
)

// greenLoad resolves the green-context entry points once; the error wraps
// ErrGreenUnsupported and names the first one missing.
var greenLoad = sync.OnceValue(func() error {
	if C.gdn_green_load() != 0 {
		return nil
	}
	name := "?"
	if s := C.gdn_green_first_missing(); s != nil {
		name = C.GoString(s)
	}
	return fmt.Errorf("%w: cuGetProcAddress finds no %s (CUDA %s driver; green contexts need 12.4)",
		ErrGreenUnsupported, name, versionString(cu.Version()))
})

func versionString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// OpenGreen creates a green context on a slice of at least sms of device
// ordinal's SMs (cuDevSmResourceSplitByCount, cuGreenCtxCreate) and returns
// it as a Context that works like Open's: modules, memory, streams, events,
// graphs and tensor maps all work unchanged. Kernels run on the slice when
// launched on a stream created by NewStream on this Context, or on the
// legacy default stream (nil *Stream / handle 0), which in a green context
// is the green context's own default stream (see Context.do).
//
// The driver rounds sms up to its granularity (a multiple of 8 on Hopper);
// DeviceInfo.SMs is the count obtained, DeviceInfo.SMsAsked the count asked,
// DeviceInfo.DeviceSMs the device's. sms equal to the device's count (or
// rounding past it) gives a green context of the whole device. sms above the
// device's count is a *SMCountError; sms < 1 is an error. A driver without
// green contexts (before 12.4, or CUDA_ERROR_NOT_SUPPORTED) gives an error
// wrapping ErrGreenUnsupported: OpenSMs falls back to the whole device then.
//
// Close destroys the green context (cuGreenCtxDestroy), which releases the
// device's primary context that cuGreenCtxCreate retained.
func OpenGreen(ordinal, sms int) (*Context, error) {
	if sms < 1 {
		return nil, fmt.Errorf("driver: OpenGreen: %d SMs asked; want at least 1", sms)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, cuErr("cuDeviceGet", err)
	}
	if err := greenLoad(); err != nil {
		return nil, err
	}
	o := C.gdn_green_open(C.int(dev), C.uint(min(sms, 1<<30)))
	if o.too_many != 0 {
		return nil, &SMCountError{Asked: sms, Have: int(o.total)}
	}
	if o.r != C.CUDA_SUCCESS {
		e := newError(C.GoString(o.call), int(o.r))
		if o.r == C.CUDA_ERROR_NOT_SUPPORTED {
			return nil, fmt.Errorf("%w: %w", ErrGreenUnsupported, e)
		}
		return nil, e
	}
	c := &Context{dev: dev, raw: o.ctx, green: o.green}
	if err := c.readInfo(ordinal); err != nil {
		c.closeGreen()
		return nil, err
	}
	c.info.DeviceSMs = int(o.total)
	c.info.SMs = int(o.sms)
	c.info.SMsAsked = sms
	c.info.Green = true
	return c, nil
}

// OpenSMs opens device ordinal whole (sms 0: Open) or a slice of at least
// sms SMs (OpenGreen). Where green contexts are unavailable it falls back to
// the whole device and says why in DeviceInfo.GreenFallback (never
// silently); DeviceInfo.SMsAsked still holds sms.
func OpenSMs(ordinal, sms int) (*Context, error) {
	if sms == 0 {
		return Open(ordinal)
	}
	c, err := OpenGreen(ordinal, sms)
	if err == nil || !errors.Is(err, ErrGreenUnsupported) {
		return c, err
	}
	c, err2 := Open(ordinal)
	if err2 != nil {
		return nil, err2
	}
	if sms > c.info.SMs {
		c.Close()
		return nil, &SMCountError{Asked: sms, Have: c.info.SMs}
	}
	c.info.SMsAsked = sms
	c.info.GreenFallback = err.Error()
	return c, nil
}

// closeGreen destroys the green context on a locked thread (the close
// makes its context current for a last synchronisation).
func (c *Context) closeGreen() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return check("cuGreenCtxDestroy", C.gdn_green_close(c.green, c.raw))
}

// currentContext returns the CUcontext current on the calling OS thread (0
// if none); the tests lock the thread around it.
func currentContext() uintptr { return uintptr(unsafe.Pointer(C.gdn_current())) }
