/*
 * fake_cuda.h: the backdoor of the fake libcuda.so.1 (tests/shim/fake_cuda.c) for the tests that run
 * over it. fake_cuda_held(dev) is the number of bytes the fake driver holds on device `dev` for the
 * calling process (plain and managed allocations, live cuMemCreate allocations, arrays, what the
 * memory pools reserve, graph memory reserved and what context limits reserve); 0 for a device
 * that does not exist. Tests look it up by name: dlsym(libcuda, "fake_cuda_held"), as a
 * fake_cuda_held_fn *. Thread-safe.
 */
#ifndef VRAM_FAKE_CUDA_H
#define VRAM_FAKE_CUDA_H

#include <stddef.h>

#ifndef SHIM_EXPORT
#define SHIM_EXPORT __attribute__((visibility("default")))
#endif

typedef size_t fake_cuda_held_fn(int dev);

SHIM_EXPORT size_t fake_cuda_held(int dev);

#endif /* VRAM_FAKE_CUDA_H */
