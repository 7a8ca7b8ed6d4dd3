// Package jit compiles gdn's CUDA kernels at run time and caches them.
//
//   - NVRTC is opened with dlopen on first use (LoadNVRTC), so programs build
//     and start where it is absent, and one binary works with NVRTC 12 or 13.
//   - A Compiler turns a Request (source, headers, options, entries, Target)
//     into an Artifact: a cubin (or PTX for a GPU newer than NVRTC) with the
//     ptxas report of registers, spills and shared memory.
//   - Where NVRTC gives no ptxas report (13.0 at times), the report is read
//     from the cubin itself (CubinReport: registers and stack frames), so a
//     spill still shows.
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
//
// Environment:
//   - GDN_JIT_DEBUG=1 prints options, ptxas reports and timings on stderr.
//   - GDN_JIT_DEFINES (DefinesEnv) is honoured only by a development build
//     (go build -tags gdndev; DevBuild says which this is): its
//     space-separated NAME or NAME=VALUE words become -D options of every
//     variant that RequestFor builds, for kernel experiments. The defines
//     are part of the compile options, hence of the cache key, so an
//     experiment never reuses or overwrites a production cubin. A release
//     build ignores the variable: no environment changes the kernels a
//     released binary runs.
//   - GDN_LAB, in a development build too: the name of a kernel experiment
//     (package kernsrc/lab) that RequestFor builds in place of the
//     production variants it applies to, so that one binary times both.
//   - GDN_CACHE_DIR and GDN_NVRTC_PATH: see OpenDiskCache and LoadNVRTC.
package jit
