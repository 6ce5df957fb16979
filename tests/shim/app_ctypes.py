"""app_ctypes.py: the fake driver through Python's ctypes (dlopen + dlsym, as a Python framework
loads libcuda). Prints total=, alloc_2GiB=, alloc_512MiB=, free_after=."""
import ctypes

cu = ctypes.CDLL("libcuda.so.1")
size_t = ctypes.c_size_t
assert cu.cuInit(0) == 0
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
free, total = size_t(), size_t()
cu.cuMemGetInfo_v2.argtypes = [ctypes.POINTER(size_t), ctypes.POINTER(size_t)]
cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), size_t]
cu.cuMemFree_v2.argtypes = [ctypes.c_ulonglong]
assert cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
print(f"total={total.value}")
p = ctypes.c_ulonglong()
print(f"alloc_2GiB={cu.cuMemAlloc_v2(ctypes.byref(p), 2 << 30)}")
r = cu.cuMemAlloc_v2(ctypes.byref(p), 512 << 20)
print(f"alloc_512MiB={r}")
if r == 0:
    assert cu.cuMemFree_v2(p.value) == 0
assert cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
print(f"free_after={free.value}")
