"""Reading the caller's tensors: torch tensors, or any object exposing
__cuda_array_interface__ (CuPy, Numba, ...), described as gdn_tensor.

Everything here runs before libgdn is loaded, so a bad argument is reported
the same way on a machine without a GPU.
"""
import sys

from . import _abi
from .errors import ArgumentError

# __cuda_array_interface__ typestrs gdn reads (bfloat16 has none: torch
# refuses the interface for it, and bf16 tensors come as torch tensors).
_TYPESTRS = {"<f2": _abi.FP16, "<f4": _abi.FP32, "<i4": _abi.INT32, "<i8": _abi.INT64}


def torch_module():
    """torch if the caller imported it (gdn never imports it first)."""
    return sys.modules.get("torch")


class Described:
    """A tensor as gdn sees it: pointer, dtype, shape, and its CUDA device
    (None where only the driver can tell: a __cuda_array_interface__ object)."""

    __slots__ = ("name", "obj", "ptr", "dtype", "shape", "device")

    def __init__(self, name, obj, ptr, dtype, shape, device):
        self.name, self.obj, self.ptr, self.dtype, self.shape, self.device = name, obj, ptr, dtype, shape, device

    @property
    def nbytes(self):
        n = _abi.DTYPE_SIZES[self.dtype]
        for d in self.shape:
            n *= d
        return n

    def c(self):
        """The gdn_tensor of this tensor."""
        t = _abi.Tensor(ptr=self.ptr, bytes=self.nbytes, dtype=self.dtype, ndim=len(self.shape))
        for i, d in enumerate(self.shape):
            t.shape[i] = d
        return t


def _torch_dtype(torch, dt):
    return {torch.bfloat16: _abi.BF16, torch.float16: _abi.FP16, torch.float32: _abi.FP32,
            torch.int32: _abi.INT32, torch.int64: _abi.INT64}.get(dt)


def describe(name, obj):
    """Describes obj (a torch CUDA tensor or a __cuda_array_interface__
    object), or raises ArgumentError naming it."""
    torch = torch_module()
    if torch is not None and isinstance(obj, torch.Tensor):
        if not obj.is_cuda:
            raise ArgumentError(name, f"must be on a CUDA device, is on {obj.device}")
        if not obj.is_contiguous():
            raise ArgumentError(name, "must be contiguous (row-major, dense): call .contiguous() first")
        dt = _torch_dtype(torch, obj.dtype)
        if dt is None:
            raise ArgumentError(name, f"unsupported dtype {obj.dtype}")
        return Described(name, obj, obj.data_ptr(), dt, tuple(obj.shape), obj.device.index)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None:
        raise ArgumentError(name, f"must be a CUDA tensor (torch, or an object with __cuda_array_interface__), got {type(obj).__name__}")
    try:
        shape = tuple(int(d) for d in cai["shape"])
        typestr = cai["typestr"]
        ptr = int(cai["data"][0])
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise ArgumentError(name, f"malformed __cuda_array_interface__ ({e!r})") from None
    dt = _TYPESTRS.get(typestr)
    if dt is None:
        raise ArgumentError(name, f"unsupported typestr {typestr!r} (gdn reads {', '.join(_TYPESTRS)}; bfloat16 as a torch tensor)")
    strides = cai.get("strides")
    if strides is not None:
        want, s = [], _abi.DTYPE_SIZES[dt]
        for d in reversed(shape):
            want.append(s)
            s *= d
        if any(d != 1 and st != w for d, st, w in zip(shape, strides, reversed(want))):
            raise ArgumentError(name, f"must be C-contiguous, has strides {tuple(strides)}")
    if cai.get("mask") is not None:
        raise ArgumentError(name, "masked arrays are not supported")
    return Described(name, obj, ptr, dt, shape, None)


def check_dtype(t, *allowed):
    if t.dtype not in allowed:
        want = " or ".join(_abi.DTYPE_NAMES[d] for d in allowed)
        raise ArgumentError(t.name, f"dtype {_abi.DTYPE_NAMES[t.dtype]}, want {want}")


def check_shape(t, want):
    """want: a tuple of ints and None (any size)."""
    if len(t.shape) != len(want) or any(w is not None and w != d for d, w in zip(t.shape, want)):
        shown = "[" + ", ".join("*" if w is None else str(w) for w in want) + "]"
        raise ArgumentError(t.name, f"shape {list(t.shape)}, want {shown}")


def common_device(tensors):
    """The one CUDA device of the tensors that name theirs, or None."""
    device, first = None, None
    for t in tensors:
        if t is None or t.device is None:
            continue
        if device is None:
            device, first = t.device, t.name
        elif t.device != device:
            raise ArgumentError(t.name, f"is on cuda:{t.device}, {first} on cuda:{device}: all tensors must be on one device")
    return device
