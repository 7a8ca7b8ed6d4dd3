// Package gdn runs Gated DeltaNet layers on Hopper GPUs: the prefill (the
// chunked forward of FLA's chunk_gated_delta_rule) and the serving calls
// around it (decode from a pool of cached states, mixed batches,
// checkpoints); kernels written for sm_90a,
// compiled at run time by NVRTC for the GPU found and kept in a disk
// cache, launched through the CUDA driver. Without the cuda build tag, or
// without a GPU, Open returns an error wrapping ErrNoCUDA; everything that
// needs no GPU (PlanFor, argument checks) works either way.
//
// A Runtime runs two operations (docs/SPEC.md): the core forward, which
// takes the chunk-local cumulative gates and A as given (Forward, on
// device buffers described by CoreArgs), and the full forward, which takes
// what a model layer produces and computes those itself (ForwardFull,
// FullArgs). Each has a host-slice form that converts, copies and waits
// (ForwardHost, ForwardFullHost, and their Into forms that reuse the
// result), and an upload for callers that keep data on the GPU
// (UploadCore, UploadFull). A serving engine's calls read and update a
// StatePool in place: Forward and ForwardFull take one in place of h0 and
// ht, Decode runs one to eight tokens a sequence (the memory-bound step),
// ForwardMixed a batch of both as schedulers pack it; Alloc gives Go
// programs device Buffers. A minimal program:
//
//	rt, err := gdn.Open(gdn.Options{})
//	if err != nil {
//		return err // errors.Is(err, gdn.ErrNoCUDA): no GPU here
//	}
//	defer rt.Close()
//	res, err := rt.ForwardHost(&gdn.HostCoreArgs{
//		B: 1, T: t, Hq: hq, Hv: hv, Dtype: gdn.BF16,
//		Q: q, K: k, V: v, G: gCumsum, Beta: beta, A: a, FinalState: true,
//	})
//
// Every call checks its arguments first: a bad one is an *ArgError naming
// it (errors.Is(err, ErrInvalidArgument)), and nothing is launched. A
// Runtime is safe for concurrent use; a repeated Forward allocates nothing.
// PlanFor, and Runtime.PlanOf for prepared arguments, say which kernel a
// call runs and how. The commands of cmd/gdn run, time and check the
// kernels (gdn run, bench, soak, warmup, info); docs/DESIGN.md describes
// the packages inside.
package gdn
