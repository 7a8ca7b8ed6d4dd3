// Package driver is the thin CUDA driver layer of gdn: devices, the primary
// context (or a green context on a slice of the SMs), device memory,
// streams, events, modules and kernel launches, stream capture into CUDA
// graphs, and TMA tensor maps.
//
// Two builds share one exported API:
//
//   - with the build tag cuda, the real implementation over gorgonia.org/cu
//     plus a little cgo of its own against cuda.h (what gorgonia lacks:
//     cuFuncSetAttribute, stream capture, graph instantiate/launch/update,
//     cuTensorMapEncodeTiled, error names);
//   - without it, a stub whose constructors (DeviceCount, Open) return
//     ErrNoCUDA and whose methods return ErrNoCUDA, so that the module builds
//     and its CPU tests run on machines without a GPU (gorgonia.org/cu exits
//     the process at start-up where cuInit fails).
//
// Every failing CUDA call comes back as a *Error naming the call; nothing in
// this package panics or exits.
//
// # C memory
//
// Arrays of pointers that the driver reads (the kernelParams of a launch)
// are written as uintptr into calloc'd memory, never as unsafe.Pointer into
// malloc'd memory: a pointer-typed store is a write barrier that checks the
// word it overwrites, and malloc's leftovers can be a freed Go object's
// address, which kills the process ("found bad pointer in Go heap").
// internal/staleptr tests code for that mistake.
//
// # Concurrency
//
// A *Context may be used from any goroutine, concurrently: each operation
// locks its goroutine to the OS thread, makes the context current on that
// thread (restoring another context that was current there), makes the
// driver call(s) and unlocks. On a green context (OpenGreen), which CUDA
// lets be current on one thread at a time, the operations are also
// serialised on a mutex, and the context is never left current on the
// thread afterwards. Streams, events, modules, functions, graphs and
// graph execs are likewise safe for concurrent use, with the usual CUDA
// rules about ordering on a stream. Destroying, unloading or closing an
// object while another goroutine still uses it is a caller bug; a second
// Destroy/Unload/Close is a no-op, and use after it returns an error.
package driver
