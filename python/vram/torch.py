"""vram as PyTorch's CUDA allocator.

    import torch, vram
    vram.torch.install()        # before the first CUDA allocation
    x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda')   # served by vram

PyTorch's CUDAPluggableAllocator loads libvram.so's vram_plugin_alloc / vram_plugin_free, which take
PyTorch's (size, device, stream) arguments and allocate stream-ordered on the caller's stream. vram's
configuration (vram.config: visibility, growth, limits, logical devices) applies as it does to C
programs; configure before the first allocation.

Known limitation: when vram cannot serve a request (a limit, a full card) it returns NULL, and
PyTorch 2.11's pluggable-allocator path does not raise torch.OutOfMemoryError for it: the tensor
comes back with a null data pointer (check `tensor.data_ptr()`; vram.torch.last_error() says why).
"""
from . import _core, _lib

_installed = False


def install():
    """Makes vram PyTorch's CUDA allocator; call it before PyTorch allocates CUDA memory."""
    global _installed
    if _installed:
        return
    from torch.cuda.memory import CUDAPluggableAllocator, change_current_allocator
    allocator = CUDAPluggableAllocator(_lib.path, "vram_plugin_alloc", "vram_plugin_free")
    change_current_allocator(allocator)
    _installed = True


def memory_info(device=0):
    """vram's statistics of the logical device serving CUDA device `device` (a dict)."""
    from . import config
    return config.get_memory_info_full(_core.logical_for_physical(device))


def last_error():
    """The message of this thread's last failed vram call (why an allocation was refused)."""
    return _lib.lib.vram_last_error().decode(errors="replace")
