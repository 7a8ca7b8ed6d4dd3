package driver

import "fmt"

// DevicePtr is a device address (CUdeviceptr).
type DevicePtr uintptr

// Offset returns p advanced by n bytes.
func (p DevicePtr) Offset(n int) DevicePtr { return DevicePtr(uintptr(p) + uintptr(n)) }

// String formats p in hexadecimal.
func (p DevicePtr) String() string { return fmt.Sprintf("0x%x", uintptr(p)) }

// Dim3 is a grid or block shape. A zero component is invalid for a launch.
type Dim3 struct{ X, Y, Z uint32 }

// D1 returns the shape (x, 1, 1).
func D1(x uint32) Dim3 { return Dim3{x, 1, 1} }

// D2 returns the shape (x, y, 1).
func D2(x, y uint32) Dim3 { return Dim3{x, y, 1} }

// D3 returns the shape (x, y, z).
func D3(x, y, z uint32) Dim3 { return Dim3{x, y, z} }

// DeviceInfo describes the device of a Context (read once, at Open).
type DeviceInfo struct {
	Ordinal                int    // the ordinal passed to Open
	Name                   string // e.g. "NVIDIA H200"
	Major, Minor           int    // compute capability
	SMs                    int    // multiprocessors this context runs on: the device's (or MIG slice's), or a green context's slice
	DeviceSMs              int    // multiprocessors of the whole device (or MIG slice); more than SMs on a green context
	SMsAsked               int    // the slice asked (OpenGreen, OpenSMs, gdn's Options.SMs); 0: the whole device
	Green                  bool   // a green context: kernels run on SMs of the DeviceSMs multiprocessors
	GreenFallback          string // SMs were asked but green contexts are unavailable: why; the context runs on the whole device
	MaxSharedPerBlockOptin int    // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (97), bytes
	SharedPerSM            int    // shared memory per multiprocessor, bytes
	L2Bytes                int    // L2 cache size, bytes
	TotalMem               uint64 // device memory, bytes
	DriverVersion          int    // cuDriverGetVersion, e.g. 13000
	ClockKHz               int    // SM clock, kHz
}

// FuncAttributes are the resource figures of a loaded kernel
// (cuFuncGetAttribute).
type FuncAttributes struct {
	NumRegs            int // registers per thread
	LocalBytes         int // local memory per thread (spills show here)
	StaticShared       int // statically allocated shared memory, bytes
	MaxThreadsPerBlock int // largest block this kernel can launch with
	MaxDynamicShared   int // current CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
}

// GraphNode is a node of a Graph (a CUgraphNode). It stays valid as long as
// its Graph is not destroyed; GraphExec.SetKernelNodeArgs needs it, so keep
// the Graph alive while its exec is updated.
type GraphNode struct{ h uintptr }

// Handle returns the raw CUgraphNode.
func (n GraphNode) Handle() uintptr { return n.h }
