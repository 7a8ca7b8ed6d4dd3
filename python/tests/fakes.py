"""Objects exposing __cuda_array_interface__ without any GPU behind them:
enough for the argument checks, which run before anything touches a device."""

_TYPESTR = {"fp16": "<f2", "fp32": "<f4", "int32": "<i4", "int64": "<i8", "fp64": "<f8"}


class FakeCuda:
    def __init__(self, shape, dtype="fp16", ptr=0x7f0000000000, strides=None):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": _TYPESTR[dtype], "data": (ptr, False),
            "strides": strides, "version": 3,
        }


def full_inputs(B=1, T=64, H=2, HV=4, dtype="fp16"):
    """Valid chunk_gated_delta_rule arguments (q, k, v, g, beta, out)."""
    return dict(
        q=FakeCuda((B, T, H, 128), dtype), k=FakeCuda((B, T, H, 128), dtype),
        v=FakeCuda((B, T, HV, 128), dtype), g=FakeCuda((B, T, HV), "fp32"),
        beta=FakeCuda((B, T, HV), "fp32"), out=FakeCuda((B, T, HV, 128), dtype),
    )
