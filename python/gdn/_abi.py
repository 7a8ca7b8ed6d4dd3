"""ctypes mirrors of cmd/libgdn/gdn.h, the C ABI of libgdn.

Field for field these are the header's structs; the library reports its own
sizes (gdn_struct_size) and the loader refuses a library whose sizes or ABI
version differ from these (tests/test_abi.py checks the offsets too).
"""
import ctypes

ABI_VERSION = 1
MAX_DIMS = 5

# gdn_status
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_CLOSED = 2
ERR_NO_CUDA = 3
ERR_UNSUPPORTED_GPU = 4
ERR_OTHER = 5

# gdn_dtype
BF16, FP16, FP32, INT32, INT64 = 1, 2, 3, 4, 5
DTYPE_NAMES = {BF16: "bfloat16", FP16: "float16", FP32: "float32", INT32: "int32", INT64: "int64"}
DTYPE_SIZES = {BF16: 2, FP16: 2, FP32: 4, INT32: 4, INT64: 8}

# gdn_layout
LAYOUT_KV, LAYOUT_VK = 0, 1

# gdn_struct
(STRUCT_TENSOR, STRUCT_OPTIONS, STRUCT_POOL, STRUCT_SEQS,
 STRUCT_CORE_ARGS, STRUCT_FULL_ARGS, STRUCT_DECODE_ARGS) = range(7)


class Tensor(ctypes.Structure):
    _fields_ = [
        ("ptr", ctypes.c_uint64),
        ("bytes", ctypes.c_int64),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
    ]


class Options(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_int32),
        ("sms", ctypes.c_int32),
        ("no_graphs", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("cache_dir", ctypes.c_char_p),
    ]


class Pool(ctypes.Structure):
    _fields_ = [
        ("states", Tensor),
        ("slots", ctypes.POINTER(ctypes.c_int32)),
        ("n_slots", ctypes.c_int64),
        ("slots_device", Tensor),
    ]


class Seqs(ctypes.Structure):
    _fields_ = [
        ("host", ctypes.POINTER(ctypes.c_int64)),
        ("n", ctypes.c_int64),
        ("device", Tensor),
    ]


_STATE = [("cu_seqlens", Seqs), ("pool", Pool), ("checkpoints", Tensor),
          ("checkpoint_every", ctypes.c_int64), ("scale", ctypes.c_float), ("layout", ctypes.c_int32)]
_FLAGS = [("l2norm", ctypes.c_int32), ("gate_in_kernel", ctypes.c_int32),
          ("beta_logits", ctypes.c_int32), ("neg_eigval", ctypes.c_int32)]


class CoreArgs(ctypes.Structure):
    _fields_ = [(n, Tensor) for n in ("q", "k", "v", "g", "beta", "a", "h0", "o", "ht")] + _STATE


class FullArgs(ctypes.Structure):
    _fields_ = [(n, Tensor) for n in ("q", "k", "v", "g", "beta", "a_log", "dt_bias", "h0", "o", "ht")] + _STATE + _FLAGS


class DecodeArgs(ctypes.Structure):
    _fields_ = ([(n, Tensor) for n in ("q", "k", "v", "g", "beta", "a_log", "dt_bias")]
                + [("pool", Pool), ("o", Tensor), ("token_states", Tensor), ("cu_seqlens", Seqs),
                   ("scale", ctypes.c_float), ("layout", ctypes.c_int32)] + _FLAGS)


# The structs by their gdn_struct value, for the loader's size check.
STRUCTS = {
    STRUCT_TENSOR: Tensor, STRUCT_OPTIONS: Options, STRUCT_POOL: Pool, STRUCT_SEQS: Seqs,
    STRUCT_CORE_ARGS: CoreArgs, STRUCT_FULL_ARGS: FullArgs, STRUCT_DECODE_ARGS: DecodeArgs,
}


def declare(lib):
    """Sets the argument and result types of libgdn's functions on lib."""
    rt, st, i32, i64 = ctypes.c_uint64, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64
    lib.gdn_abi_version.argtypes, lib.gdn_abi_version.restype = [], i32
    lib.gdn_struct_size.argtypes, lib.gdn_struct_size.restype = [i32], i64
    lib.gdn_open.argtypes, lib.gdn_open.restype = [ctypes.POINTER(Options), ctypes.POINTER(rt)], st
    lib.gdn_close.argtypes, lib.gdn_close.restype = [rt], st
    for name, args in (("gdn_forward", CoreArgs), ("gdn_forward_full", FullArgs),
                       ("gdn_decode", DecodeArgs), ("gdn_forward_mixed", FullArgs)):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = [rt, ctypes.POINTER(args), ctypes.c_size_t], st
    lib.gdn_last_error.argtypes = [rt, ctypes.c_char_p, i64]
    lib.gdn_last_error.restype = i64
    # gdn_build_info came after the first functions of ABI version 1: an
    # older library lacks it (_lib.build_info says so).
    if hasattr(lib, "gdn_build_info"):
        lib.gdn_build_info.argtypes, lib.gdn_build_info.restype = [ctypes.c_char_p, i64], i64
