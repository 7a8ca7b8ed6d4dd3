package hostpath

import "unsafe"

// makeNoZero returns a new []float32 of n elements whose contents are
// unspecified: the Go heap's allocation without the zeroing pass.
//
// Why: a ForwardHost result (137 MB of o and ht for a 7,896-token prefill)
// made with make is zeroed by Go on one core whenever its memory is heap
// memory Go reuses, the steady state of a program that drops its results.
// That pass (6 ms on the 2-core development VM, about 15 ms on the H200's
// host) cannot be split over cores, and it is wasted: a call widens every
// element of o and ht into the result before handing it over. So the
// result pool (resultpool.go) allocates without it and faults the pages in
// itself, on several goroutines; reused memory then costs nothing, memory
// fresh from the OS its page faults, spread over cores.
//
// The only requirement on a caller: write every element before anything
// reads it, or hands the slice to anyone. The memory may hold bytes of
// earlier, freed objects of this process. It holds no pointers for the GC
// (it is allocated as noscan memory, as a []float32 is), and is freed by
// the GC as any slice is.
//
// runtime.mallocgc with needzero false is the allocation the runtime makes
// for itself where it overwrites everything (strings.Builder.Grow,
// internal/bytealg.MakeNoZero). The runtime keeps its signature for
// packages that reach it by linkname, as this file does (the comment
// above mallocgc in runtime/malloc.go: "Do not remove or change the type
// signature", go.dev/issue/67401); a nil type allocates memory the GC does
// not scan. A runtime that ignored needzero would zero it as make does:
// slower, never wrong.
func makeNoZero(n int) []float32 {
	if n <= 0 {
		return nil
	}
	if uint(n) > maxAllocFloats {
		panic("gdn: makeNoZero: length out of range")
	}
	return unsafe.Slice((*float32)(mallocgc(uintptr(n)*4, nil, false)), n)
}

// maxAllocFloats bounds makeNoZero's length as make bounds a []float32's:
// the byte size must not overflow (and a heap of this size is refused by
// the runtime long before).
const maxAllocFloats = (1<<(unsafe.Sizeof(uintptr(0))*8-1) - 1) / 4

//go:linkname mallocgc runtime.mallocgc
func mallocgc(size uintptr, typ unsafe.Pointer, needzero bool) unsafe.Pointer
