/*
 * fake_launch.c: the fake driver's kernel launches, copies and sets (fake_cuda.c says what the fake
 * models): cuLaunchKernel, cuLaunchKernelEx and cuLaunchCooperativeKernel, cuMemcpy, cuMemcpyAsync,
 * cuMemcpyHtoD/DtoH/DtoD (_v2) and their Async forms, cuMemsetD8Async and cuMemsetD32Async, each with
 * its per-thread-stream twin (_ptsz, _ptds). The fake has no device bytes and no modules: they run
 * nothing and hold nothing. They check what the driver would refuse first: a call without a current
 * context is CUDA_ERROR_INVALID_CONTEXT, a NULL function CUDA_ERROR_INVALID_HANDLE, a NULL launch
 * configuration or a NULL host pointer of a copy of some bytes CUDA_ERROR_INVALID_VALUE. Like every
 * call of the fake they wait while their process is locked (the gate, fake_cuda.c), but a launch in a
 * process whose memory is checkpointed faults (SIGSEGV: as the real driver did, FAKE_EXPORT_LAUNCH), and
 * they fail when the plan says so (fake_fault.c): what the preload library's tests look at.
 *
 * No state, no lock (fake_current_device takes fake_mu briefly).
 */
#include <signal.h>

#include "fake_internal.h"

static CUresult fake_launch_check(CUfunction f) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    return f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult fake_copy_check(const void *host, size_t n) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    return n && !host ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

#define FAKE_LAUNCH_PARAMS (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, \
                            unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void **params, \
                            void **extra)
#define FAKE_LAUNCH_ARGS (f, gx, gy, gz, bx, by, bz, shared, s, params, extra)
#define FAKE_COOP_PARAMS (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, \
                          unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void **params)
#define FAKE_COOP_ARGS (f, gx, gy, gz, bx, by, bz, shared, s, params)

static CUresult fake_launch FAKE_LAUNCH_PARAMS {
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)s, (void)params, (void)extra;
    return fake_launch_check(f);
}

CUresult impl_cuLaunchKernel FAKE_LAUNCH_PARAMS { return fake_launch FAKE_LAUNCH_ARGS; }
CUresult impl_cuLaunchKernel_ptsz FAKE_LAUNCH_PARAMS { return fake_launch FAKE_LAUNCH_ARGS; }
CUresult impl_cuLaunchCooperativeKernel FAKE_COOP_PARAMS { return fake_launch(f, gx, gy, gz, bx, by, bz, shared, s, params, NULL); }
CUresult impl_cuLaunchCooperativeKernel_ptsz FAKE_COOP_PARAMS {
    return fake_launch(f, gx, gy, gz, bx, by, bz, shared, s, params, NULL);
}

CUresult impl_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {
    (void)params, (void)extra;
    return config ? fake_launch_check(f) : CUDA_ERROR_INVALID_VALUE;
}

CUresult impl_cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {
    return impl_cuLaunchKernelEx(config, f, params, extra);
}

/* device to device: nothing on the host to check */
CUresult impl_cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) { (void)d, (void)s; return fake_copy_check("", n); }
CUresult impl_cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { return impl_cuMemcpy(d, s, n); }
CUresult impl_cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { (void)st; return impl_cuMemcpy(d, s, n); }
CUresult impl_cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { (void)st; return impl_cuMemcpy(d, s, n); }
CUresult impl_cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { return impl_cuMemcpy(d, s, n); }
CUresult impl_cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { return impl_cuMemcpy(d, s, n); }
CUresult impl_cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { (void)st; return impl_cuMemcpy(d, s, n); }
CUresult impl_cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
    (void)st;
    return impl_cuMemcpy(d, s, n);
}

CUresult impl_cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) { (void)d; return fake_copy_check(h, n); }
CUresult impl_cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *h, size_t n) { (void)d; return fake_copy_check(h, n); }
CUresult impl_cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, CUstream st) { (void)d, (void)st; return fake_copy_check(h, n); }
CUresult impl_cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *h, size_t n, CUstream st) {
    (void)d, (void)st;
    return fake_copy_check(h, n);
}
CUresult impl_cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) { (void)d; return fake_copy_check(h, n); }
CUresult impl_cuMemcpyDtoH_v2_ptds(void *h, CUdeviceptr d, size_t n) { (void)d; return fake_copy_check(h, n); }
CUresult impl_cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, CUstream st) { (void)d, (void)st; return fake_copy_check(h, n); }
CUresult impl_cuMemcpyDtoHAsync_v2_ptsz(void *h, CUdeviceptr d, size_t n, CUstream st) {
    (void)d, (void)st;
    return fake_copy_check(h, n);
}

CUresult impl_cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream st) {
    (void)d, (void)v, (void)st;
    return fake_copy_check("", n);
}
CUresult impl_cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream st) { return impl_cuMemsetD8Async(d, v, n, st); }
CUresult impl_cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream st) {
    (void)d, (void)v, (void)st;
    return fake_copy_check("", n);
}
CUresult impl_cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream st) { return impl_cuMemsetD32Async(d, v, n, st); }

/* A kernel launch in a process whose device memory is checkpointed faults before the gate instead of
 * waiting at it: so did a PyTorch process put to sleep by the idle watcher, at its first work after the
 * idle spell (H100, driver 580.159.04, CUDA 13.0), although the checkpoint API's lock is documented to
 * hold every call. The preload library holds its process's calls while it is asleep (shim_activity). */
#define FAKE_EXPORT_LAUNCH(symbol, params, args) \
    FAKE_EXPORT_BEFORE(symbol, params, args, if (fake_checkpointed_self()) raise(SIGSEGV))

FAKE_EXPORT_LAUNCH(cuLaunchKernel, FAKE_LAUNCH_PARAMS, FAKE_LAUNCH_ARGS)
FAKE_EXPORT_LAUNCH(cuLaunchKernel_ptsz, FAKE_LAUNCH_PARAMS, FAKE_LAUNCH_ARGS)
FAKE_EXPORT_LAUNCH(cuLaunchKernelEx, (const CUlaunchConfig *config, CUfunction f, void **params, void **extra),
            (config, f, params, extra))
FAKE_EXPORT_LAUNCH(cuLaunchKernelEx_ptsz, (const CUlaunchConfig *config, CUfunction f, void **params, void **extra),
            (config, f, params, extra))
FAKE_EXPORT_LAUNCH(cuLaunchCooperativeKernel, FAKE_COOP_PARAMS, FAKE_COOP_ARGS)
FAKE_EXPORT_LAUNCH(cuLaunchCooperativeKernel_ptsz, FAKE_COOP_PARAMS, FAKE_COOP_ARGS)
FAKE_EXPORT(cuMemcpy, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))
FAKE_EXPORT(cuMemcpy_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))
FAKE_EXPORT(cuMemcpyAsync, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))
FAKE_EXPORT(cuMemcpyAsync_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))
FAKE_EXPORT(cuMemcpyHtoD_v2, (CUdeviceptr d, const void *h, size_t n), (d, h, n))
FAKE_EXPORT(cuMemcpyHtoD_v2_ptds, (CUdeviceptr d, const void *h, size_t n), (d, h, n))
FAKE_EXPORT(cuMemcpyDtoH_v2, (void *h, CUdeviceptr d, size_t n), (h, d, n))
FAKE_EXPORT(cuMemcpyDtoH_v2_ptds, (void *h, CUdeviceptr d, size_t n), (h, d, n))
FAKE_EXPORT(cuMemcpyDtoD_v2, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))
FAKE_EXPORT(cuMemcpyDtoD_v2_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))
FAKE_EXPORT(cuMemcpyHtoDAsync_v2, (CUdeviceptr d, const void *h, size_t n, CUstream st), (d, h, n, st))
FAKE_EXPORT(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr d, const void *h, size_t n, CUstream st), (d, h, n, st))
FAKE_EXPORT(cuMemcpyDtoHAsync_v2, (void *h, CUdeviceptr d, size_t n, CUstream st), (h, d, n, st))
FAKE_EXPORT(cuMemcpyDtoHAsync_v2_ptsz, (void *h, CUdeviceptr d, size_t n, CUstream st), (h, d, n, st))
FAKE_EXPORT(cuMemcpyDtoDAsync_v2, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))
FAKE_EXPORT(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))
FAKE_EXPORT(cuMemsetD8Async, (CUdeviceptr d, unsigned char v, size_t n, CUstream st), (d, v, n, st))
FAKE_EXPORT(cuMemsetD8Async_ptsz, (CUdeviceptr d, unsigned char v, size_t n, CUstream st), (d, v, n, st))
FAKE_EXPORT(cuMemsetD32Async, (CUdeviceptr d, unsigned int v, size_t n, CUstream st), (d, v, n, st))
FAKE_EXPORT(cuMemsetD32Async_ptsz, (CUdeviceptr d, unsigned int v, size_t n, CUstream st), (d, v, n, st))
