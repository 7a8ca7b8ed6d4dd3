/*
 * gdn.h: the C ABI of libgdn, Gated DeltaNet on Hopper GPUs.
 *
 * libgdn is gdn's Go library built as a shared object:
 *
 *     make python     (or: go build -tags cuda -buildmode=c-shared \
 *                          -o libgdn.so ./cmd/libgdn)
 *
 * Each function is a thin conversion onto the Go API of the same name
 * (docs/USAGE.md, `go doc github.com/gdnjit/gdn`): the shapes, dtypes,
 * alignments and meanings of every tensor are those of gdn.CoreArgs,
 * gdn.FullArgs and gdn.DecodeArgs.
 *
 * LOAD ORDER. The CUDA driver binding libgdn is built on calls cuInit when
 * the library is loaded and ends the process (exit status 1) when it fails.
 * A caller that may run where the driver is present but no GPU is usable
 * must call cuInit(0) itself (from libcuda.so.1) before loading libgdn, and
 * load libgdn only when it returned CUDA_SUCCESS. The Python package does so.
 *
 * CONVENTIONS.
 *  - Every function but gdn_abi_version, gdn_struct_size and gdn_last_error
 *    returns a gdn_status: GDN_OK (0) or an error code; the error's message
 *    is then kept with the runtime and read with gdn_last_error.
 *  - Runtimes are integer handles (gdn_runtime), never pointers, never
 *    reused. 0 is never a runtime; it names the slot of the messages of
 *    failures that belong to no open runtime (see gdn_last_error).
 *  - Tensors are device memory the caller owns, described by gdn_tensor: a
 *    dense row-major tensor of `ndim` dimensions (shape[0..ndim-1]) from
 *    `ptr` on, `bytes` long. ptr 0 means absent (optional tensors only).
 *  - Host arrays (cu_seqlens, slots) are read during the call only.
 *  - Streams are CUstream values of the runtime's device, primary context
 *    (what the CUDA runtime and PyTorch use); 0 is the legacy default
 *    stream. Nothing synchronises: work is enqueued and the call returns,
 *    so a call may be captured into the caller's CUDA graph.
 *  - Every function is safe to call from many threads at once.
 *  - Flags (int32_t) are 0 for false, anything else for true.
 */
#ifndef GDN_H
#define GDN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this ABI: it changes whenever a struct, enum value or
 * function signature below changes. gdn_abi_version returns the library's. */
#define GDN_ABI_VERSION 1

/* The most dimensions a gdn_tensor has. */
#define GDN_MAX_DIMS 5

/* Status codes. */
typedef enum {
	GDN_OK = 0,
	GDN_ERR_INVALID_ARGUMENT = 1, /* a bad argument, named in the message; nothing ran */
	GDN_ERR_CLOSED = 2,           /* the runtime is closed, or the handle unknown */
	GDN_ERR_NO_CUDA = 3,          /* built without CUDA, or no driver or GPU */
	GDN_ERR_UNSUPPORTED_GPU = 4,  /* the GPU is not sm_90 (H100, H200, H20, GH200) */
	GDN_ERR_OTHER = 5             /* anything else (driver, compiler, memory) */
} gdn_status;

/* Element types (gdn.Dtype). */
typedef enum {
	GDN_DTYPE_INVALID = 0,
	GDN_BF16 = 1,
	GDN_FP16 = 2,
	GDN_FP32 = 3,
	GDN_INT32 = 4,
	GDN_INT64 = 5
} gdn_dtype;

/* State layouts (gdn.StateLayout). */
typedef enum {
	GDN_LAYOUT_KV = 0, /* entry (k, v) at k*128 + v: FLA's default */
	GDN_LAYOUT_VK = 1  /* entry (k, v) at v*128 + k: FLA's state_v_first */
} gdn_layout;

/* Which struct gdn_struct_size measures. */
typedef enum {
	GDN_STRUCT_TENSOR = 0,
	GDN_STRUCT_OPTIONS = 1,
	GDN_STRUCT_POOL = 2,
	GDN_STRUCT_SEQS = 3,
	GDN_STRUCT_CORE_ARGS = 4,
	GDN_STRUCT_FULL_ARGS = 5,
	GDN_STRUCT_DECODE_ARGS = 6
} gdn_struct;

/* A runtime handle. */
typedef uint64_t gdn_runtime;

/* A tensor in device memory (gdn.Tensor). */
typedef struct {
	uint64_t ptr;                /* device address; 0: absent */
	int64_t bytes;               /* bytes available from ptr on */
	int32_t dtype;               /* a gdn_dtype */
	int32_t ndim;                /* 0 to GDN_MAX_DIMS */
	int64_t shape[GDN_MAX_DIMS]; /* shape[0..ndim-1] */
} gdn_tensor;

/* Options of gdn_open (gdn.Options). All zero, or a NULL pointer, is the
 * default: device 0, whole, with graphs, the default kernel cache. */
typedef struct {
	int32_t device;        /* CUDA device ordinal */
	int32_t sms;           /* > 0: run on a slice of that many SMs (green context) */
	int32_t no_graphs;     /* flag: no replay of cached CUDA graphs */
	int32_t reserved;      /* 0 */
	const char *cache_dir; /* kernel cache folder; NULL or "": GDN_CACHE_DIR or the user cache */
} gdn_options;

/* A state pool and the slot table of one call (gdn.StatePool); absent when
 * states.ptr is 0 and n_slots is 0. */
typedef struct {
	gdn_tensor states;       /* [S, Hv, 128, 128] FP32 or BF16 */
	const int32_t *slots;    /* host: one slot a sequence (negative: none) */
	int64_t n_slots;         /* entries of slots */
	gdn_tensor slots_device; /* the same values, INT32 [N], on the device */
} gdn_pool;

/* Packed variable-length sequences: the boundaries twice, on the host (read
 * to validate and plan) and on the device (read by the kernels), holding the
 * same values. Absent when n is 0 and device.ptr is 0 (then B sequences). */
typedef struct {
	const int64_t *host; /* N+1 boundaries */
	int64_t n;           /* entries of host: N+1 */
	gdn_tensor device;   /* INT32 or INT64 [N+1] */
} gdn_seqs;

/* The core forward (gdn.CoreArgs): g_cumsum and A given. */
typedef struct {
	gdn_tensor q, k, v, g, beta, a;
	gdn_tensor h0;               /* optional */
	gdn_tensor o, ht;            /* o written; ht optional, written */
	gdn_seqs cu_seqlens;         /* optional */
	gdn_pool pool;               /* optional, in place of h0 and ht */
	gdn_tensor checkpoints;      /* with checkpoint_every only, written */
	int64_t checkpoint_every;    /* 0: none; else a multiple of 64 */
	float scale;                 /* 0: 1/sqrt(128) */
	int32_t layout;              /* a gdn_layout, of h0, ht, pool, checkpoints */
} gdn_core_args;

/* The full forward (gdn.FullArgs; FLA's chunk_gated_delta_rule), also the
 * mixed batch's arguments (gdn_forward_mixed, pool required). */
typedef struct {
	gdn_tensor q, k, v, g, beta;
	gdn_tensor a_log, dt_bias;   /* with gate_in_kernel only */
	gdn_tensor h0;               /* optional */
	gdn_tensor o, ht;            /* o written; ht optional, written */
	gdn_seqs cu_seqlens;         /* optional */
	gdn_pool pool;               /* optional, in place of h0 and ht */
	gdn_tensor checkpoints;      /* with checkpoint_every only, written */
	int64_t checkpoint_every;    /* 0: none; else a multiple of 64 */
	float scale;                 /* 0: 1/sqrt(128) */
	int32_t layout;              /* a gdn_layout */
	int32_t l2norm;              /* flag: normalise q and k inside */
	int32_t gate_in_kernel;      /* flag: g = -exp(a_log) softplus(g + dt_bias) */
	int32_t beta_logits;         /* flag: beta = sigmoid(beta) */
	int32_t neg_eigval;          /* flag, with beta_logits: beta = 2 sigmoid(beta) */
} gdn_full_args;

/* A decode call (gdn.DecodeArgs): 1 to 8 tokens a sequence, from a pool. */
typedef struct {
	gdn_tensor q, k, v, g, beta;
	gdn_tensor a_log, dt_bias;   /* with gate_in_kernel only */
	gdn_pool pool;               /* required */
	gdn_tensor o;                /* written */
	gdn_tensor token_states;     /* optional, written */
	gdn_seqs cu_seqlens;         /* optional */
	float scale;                 /* 0: 1/sqrt(128) */
	int32_t layout;              /* a gdn_layout */
	int32_t l2norm;              /* flags as in gdn_full_args */
	int32_t gate_in_kernel;
	int32_t beta_logits;
	int32_t neg_eigval;
} gdn_decode_args;

#ifndef GDN_TYPES_ONLY /* defined by libgdn's own Go sources only */

/* GDN_ABI_VERSION of the library loaded. */
int32_t gdn_abi_version(void);

/* sizeof of a struct as the library sees it (a gdn_struct), or 0 for an
 * unknown one: a binding compares it with its own. */
int64_t gdn_struct_size(int32_t which);

/* Opens a runtime on a device's primary context and stores its handle in
 * *out. On failure *out is 0 and gdn_last_error(0, ...) says why. */
int32_t gdn_open(const gdn_options *opts, gdn_runtime *out);

/* Closes a runtime once its calls in flight finish; the handle is then
 * unknown (GDN_ERR_CLOSED). A failure's message is in slot 0. */
int32_t gdn_close(gdn_runtime rt);

/* gdn.Runtime.Forward, .ForwardFull, .Decode and .ForwardMixed, enqueued
 * on stream. */
int32_t gdn_forward(gdn_runtime rt, const gdn_core_args *a, uintptr_t stream);
int32_t gdn_forward_full(gdn_runtime rt, const gdn_full_args *a, uintptr_t stream);
int32_t gdn_decode(gdn_runtime rt, const gdn_decode_args *a, uintptr_t stream);
int32_t gdn_forward_mixed(gdn_runtime rt, const gdn_full_args *a, uintptr_t stream);

/* Copies the message of the runtime's last failed call into buf,
 * NUL-terminated and cut to len-1 bytes, and returns its whole length in
 * bytes ("" and 0 if none failed). Failures that belong to no open runtime
 * (gdn_open's, gdn_close's, a call on an unknown handle) go to slot 0, read
 * with rt 0 (or any unknown handle). With several threads failing on one
 * runtime at once, the message is one of theirs. */
int64_t gdn_last_error(gdn_runtime rt, char *buf, int64_t len);

/* Copies one line naming the library's build into buf, as gdn_last_error
 * copies its message, and returns the line's whole length: the commit it
 * was built from (and whether the tree had uncommitted changes), the Go
 * version, the platform and the build tags. For bug reports and logs.
 * Added after GDN_ABI_VERSION 1's first functions: a binding that may
 * load an older library looks the symbol up before calling it. */
int64_t gdn_build_info(char *buf, int64_t len);

#endif /* GDN_TYPES_ONLY */

#ifdef __cplusplus
}
#endif

#endif /* GDN_H */
