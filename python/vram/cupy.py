"""vram as CuPy's allocator.

    import cupy, vram
    vram.cupy.install()
    a = cupy.ones(10**8)        # served by vram

cupy.cuda.set_allocator gets a function that takes the bytes from vram on the current device and
returns a MemoryPointer whose memory goes back to vram when CuPy releases it.
"""
from . import _core


class _Block:
    """Owns one vram allocation; frees it when CuPy drops the memory."""

    def __init__(self, ptr):
        self.ptr = ptr

    def __del__(self):
        if self.ptr:
            _core.free(self.ptr)
            self.ptr = 0


def _allocate(size):
    import cupy
    device = cupy.cuda.Device().id
    ptr = _core.malloc(size, _core.logical_for_physical(device)) if size else 0
    memory = cupy.cuda.memory.UnownedMemory(ptr, size, _Block(ptr), device)
    return cupy.cuda.memory.MemoryPointer(memory, 0)


def install():
    """Makes vram CuPy's allocator (cupy.cuda.set_allocator)."""
    import cupy
    cupy.cuda.set_allocator(_allocate)
