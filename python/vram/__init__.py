"""vram: GPU memory with TensorFlow tf.config's configuration model, from Python.

A ctypes binding over libvram.so (standard library only). ``vram.config`` mirrors ``tf.config``;
the top level has the runtime's life cycle, raw allocation, tags, sleep and wake, and diagnosis:

    import vram
    print(vram.diagnose())                    # why there is no GPU, or the GPUs on one line
    gpus = vram.config.list_physical_devices('GPU')
    ptr = vram.malloc('256MiB')               # an int address on logical GPU 0
    vram.free(ptr)
    with vram.tag("weights"):                 # what this thread allocates inside carries the tag
        w = vram.malloc('1GiB')
    vram.sleep(0, "weights")                  # off the card (bytes kept on the host), same addresses
    vram.wake(0, "weights")

Errors are TensorFlow's exceptions with vram's messages: RuntimeError for a configuration change
after the start, ValueError for unrecognized devices and bad arguments, vram.OutOfMemoryError
(a MemoryError) when an allocation does not fit, vram.VramError for the rest.
"""
from . import config
from . import cupy, torch  # noqa: F401  (vram.torch.install(), vram.cupy.install(); import nothing heavy)
from ._core import (diagnose, free, get_live_limit, get_tag, init, is_initialized, malloc, parse_size,
                    set_live_limit, shutdown, sleep, tag, trim, version, wake)
from ._errors import OutOfMemoryError, VramError

__version__ = version()

__all__ = [
    "config", "cupy", "torch", "diagnose", "free", "get_tag", "init", "is_initialized", "malloc", "parse_size",
    "shutdown", "sleep", "tag", "trim", "wake", "set_live_limit", "get_live_limit",
    "OutOfMemoryError", "VramError", "__version__",
]
