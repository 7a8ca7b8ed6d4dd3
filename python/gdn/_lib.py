"""Finding and loading libgdn, and the runtimes opened on it.

libgdn's CUDA binding initialises the driver when the library is loaded and
ends the process when that fails, so the driver is initialised here first,
through ctypes on libcuda.so.1, and libgdn is loaded only once cuInit(0)
succeeded: without a GPU the caller gets GdnUnavailable, never an exit.
"""
import ctypes
import os
import threading

from . import _abi
from .errors import ArgumentError, GdnError, GdnUnavailable

LIBRARY_NAME = "libgdn.so"
ENV_LIBRARY = "GDN_LIBRARY"

_lock = threading.Lock()
_lib = None
_cuda = None
_runtimes = {}


def candidates():
    """The paths tried for libgdn, in order: GDN_LIBRARY if set, else the
    library beside this package's files."""
    env = os.environ.get(ENV_LIBRARY)
    if env:
        return [env]
    return [os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)]


def init_driver():
    """Loads libcuda.so.1 and calls cuInit(0); returns the library or raises
    GdnUnavailable saying why."""
    global _cuda
    if _cuda is not None:
        return _cuda
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise GdnUnavailable(f"gdn: no CUDA driver: cannot load libcuda.so.1 ({e})", _abi.ERR_NO_CUDA) from None
    rc = cuda.cuInit(0)
    if rc != 0:
        raise GdnUnavailable(
            f"gdn: no usable GPU: cuInit(0) returned CUDA error {rc}"
            " (100 is no device, 999 an unknown error, 3 a driver not initialised)", _abi.ERR_NO_CUDA)
    _cuda = cuda
    return cuda


def load(path=None, check_driver=True):
    """Loads libgdn (from path, or the first of candidates()) and checks that
    it speaks this package's ABI. check_driver=False skips cuInit: only for
    a library built without CUDA (the CPU tests)."""
    if check_driver:
        init_driver()
    paths = [path] if path else candidates()
    for p in paths:
        if os.path.exists(p):
            break
    else:
        raise GdnUnavailable(
            "gdn: libgdn not found; looked for " + ", ".join(paths)
            + f". Build it with `make python` in gdn's repository, or set {ENV_LIBRARY} to its path.",
            _abi.ERR_NO_CUDA)
    try:
        lib = ctypes.CDLL(p)
    except OSError as e:
        raise GdnUnavailable(f"gdn: cannot load {p}: {e}", _abi.ERR_OTHER) from None
    _abi.declare(lib)
    version = lib.gdn_abi_version()
    if version != _abi.ABI_VERSION:
        raise GdnUnavailable(f"gdn: {p} has ABI version {version}, this package needs {_abi.ABI_VERSION}")
    for which, struct in _abi.STRUCTS.items():
        size = lib.gdn_struct_size(which)
        if size != ctypes.sizeof(struct):
            raise GdnUnavailable(
                f"gdn: {p} has {struct.__name__} of {size} bytes, this package {ctypes.sizeof(struct)}")
    return lib


def library():
    """The process's libgdn, loaded on first use (after cuInit)."""
    global _lib
    with _lock:
        if _lib is None:
            _lib = load()
        return _lib


def _text(fn, *args):
    """The string a libgdn function copies into a buffer (fn(*args, buf,
    len) returns its whole length): read again into a large enough buffer
    when the first was too short."""
    buf = ctypes.create_string_buffer(512)
    n = fn(*args, buf, len(buf))
    if n >= len(buf):
        buf = ctypes.create_string_buffer(n + 1)
        fn(*args, buf, len(buf))
    return buf.value.decode(errors="replace")


def last_error(lib, handle):
    """The message libgdn keeps for handle (0: the failures of no runtime)."""
    return _text(lib.gdn_last_error, handle)


def build_info(lib):
    """libgdn's line about its build (commit, Go version, tags), and its path."""
    path = getattr(lib, "_name", "libgdn")
    if not hasattr(lib, "gdn_build_info"):
        return f"libgdn (built before gdn_build_info existed) at {path}"
    return f"{_text(lib.gdn_build_info)} at {path}"


def raise_for(lib, handle, status):
    """Raises the exception of a libgdn status (nothing for GDN_OK)."""
    if status == _abi.OK:
        return
    msg = last_error(lib, handle)
    if status == _abi.ERR_INVALID_ARGUMENT:
        # gdn's messages read "gdn: ARG: what"; keep ARG for the exception.
        arg = msg.split(": ", 2)[1] if msg.count(": ") >= 2 else "args"
        raise ArgumentError(arg, msg.split(": ", 2)[-1])
    if status in (_abi.ERR_NO_CUDA, _abi.ERR_UNSUPPORTED_GPU):
        raise GdnUnavailable(msg, status)
    raise GdnError(msg, status)


def runtime(device):
    """The handle of the runtime on CUDA device `device`, opened on first use
    (on the device's primary context, PyTorch's) and kept for the process."""
    lib = library()
    with _lock:
        h = _runtimes.get(device)
        if h is None:
            opts = _abi.Options(device=device)  # kernel cache: GDN_CACHE_DIR or the user's
            out = ctypes.c_uint64(0)
            raise_for(lib, 0, lib.gdn_open(ctypes.byref(opts), ctypes.byref(out)))
            h = _runtimes[device] = out.value
        return lib, h
