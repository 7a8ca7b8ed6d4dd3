"""The exceptions of the gdn package."""


class GdnError(RuntimeError):
    """A failure of libgdn (status is the gdn_status code, 0 for none)."""

    def __init__(self, message, status=0):
        super().__init__(message)
        self.status = status


class GdnUnavailable(GdnError):
    """gdn cannot run here: no CUDA driver, no usable GPU, an unsupported
    GPU, or libgdn not found or not matching this package."""


class ArgumentError(ValueError):
    """A bad argument, named in arg: wrong device, not contiguous, an
    unsupported dtype or a wrong shape. Raised before anything runs."""

    def __init__(self, arg, message):
        super().__init__(f"gdn: {arg}: {message}")
        self.arg = arg
