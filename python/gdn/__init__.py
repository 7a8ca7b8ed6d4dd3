"""gdn: Gated DeltaNet on Hopper GPUs, from Python.

A drop-in for FLA's forward:

    from gdn import chunk_gated_delta_rule
    o, final_state = chunk_gated_delta_rule(q, k, v, g, beta, output_final_state=True)

on the caller's torch tensors and current stream, capturable in a CUDA graph,
through libgdn (gdn's C ABI, loaded with ctypes on first call: beside this
file, or from GDN_LIBRARY). Importing needs neither torch nor a GPU; a call
without a usable GPU raises GdnUnavailable, a bad argument ArgumentError.
"""
from . import _lib
from ._ops import chunk_gated_delta_rule, decode
from .errors import ArgumentError, GdnError, GdnUnavailable

__all__ = ["build_info", "chunk_gated_delta_rule", "decode", "ArgumentError", "GdnError", "GdnUnavailable"]
__version__ = "0.1.0"


def build_info():
    """The loaded libgdn's build in one line (its commit, Go version and
    tags) and its path: what a bug report should quote. Loads libgdn as the
    first call does, so it needs a usable GPU (else GdnUnavailable)."""
    return _lib.build_info(_lib.library())
