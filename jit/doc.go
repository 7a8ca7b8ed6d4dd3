// Package jit compiles gdn's CUDA kernels at run time and caches them.
//
//   - NVRTC is opened with dlopen on first use (LoadNVRTC), so programs build
//     and start where it is absent, and one binary works with NVRTC 12 or 13.
//   - A Compiler turns a Request (source, headers, options, entries, Target)
//     into an Artifact: a cubin (or PTX for a GPU newer than NVRTC) with the
//     ptxas report of registers, spills and shared memory.
//   - Artifacts are kept in a DiskCache, one file per Key, written atomically
//     and verified on read, so several processes may warm one cache. A cache
//     that cannot be written (read-only, full) costs a warning, once per
//     cache, never a failed compile.
//   - A MemCache keeps loaded modules and CUDA graph execs by key, with
//     reference-counted handles: eviction never destroys a value in use.
//
// The package never talks to the GPU itself: callers load images and
// destroy what they loaded through the create/destroy functions they give
// the MemCache, so jit builds and tests on machines without a GPU.
// Set GDN_JIT_DEBUG=1 to see options, ptxas reports and timings on stderr.
package jit
