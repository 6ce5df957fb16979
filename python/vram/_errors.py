"""vram's exceptions, and the mapping from a vram_status to the exception TensorFlow raises.

    VRAM_ERR_ALREADY_INITIALIZED                               -> RuntimeError
    VRAM_ERR_UNRECOGNIZED_DEVICE, _INVALID_ARGUMENT, _CONFLICT -> ValueError
    VRAM_ERR_OUT_OF_MEMORY                                     -> vram.OutOfMemoryError (a MemoryError)
    any other                                                  -> vram.VramError (a RuntimeError)

The message is vram's (vram_last_error()), which for a configuration change after the start is
TensorFlow's sentence. Every exception raised from a C status carries ``.status``, the status's
C name.
"""
from . import _lib


class VramError(RuntimeError):
    """A vram call failed in a way TensorFlow has no exception for; ``.status`` names the C status."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class OutOfMemoryError(MemoryError):
    """An allocation did not fit; the message says whether the limit, the card or fragmentation is why."""

    def __init__(self, message, status="VRAM_ERR_OUT_OF_MEMORY"):
        super().__init__(message)
        self.status = status


_BY_STATUS = {
    "VRAM_ERR_ALREADY_INITIALIZED": RuntimeError,
    "VRAM_ERR_UNRECOGNIZED_DEVICE": ValueError,
    "VRAM_ERR_INVALID_ARGUMENT": ValueError,
    "VRAM_ERR_CONFLICT": ValueError,
    "VRAM_ERR_OUT_OF_MEMORY": OutOfMemoryError,
}


def error_for(status, message=None):
    """The exception for a failed vram_status (the message defaults to vram_last_error())."""
    name = _lib.status_name(status)
    if message is None:
        message = _lib.last_error() or name
    cls = _BY_STATUS.get(name)
    if cls is None or cls is OutOfMemoryError:
        return (cls or VramError)(message, name)
    error = cls(message)
    error.status = name
    return error


def status_error(name, message):
    """The exception vram raises for C status `name` ("VRAM_ERR_UNRECOGNIZED_DEVICE"), for a check the
    Python face makes itself before calling the library: the same class and ``.status``."""
    cls = _BY_STATUS.get(name, VramError)
    if cls in (VramError, OutOfMemoryError):
        return cls(message, name)
    error = cls(message)
    error.status = name
    return error


def check(status):
    """Raises the exception for `status` unless it is VRAM_OK."""
    if status != _lib.OK:
        raise error_for(status)
