/*
 * fake_cuda.h: what the tests that run over the fake libcuda.so.1 (tests/shim/fake_*.c; fake_cuda.c
 * says what it models) may set and call besides the driver's own functions. Tests look the
 * functions up by name: dlsym(dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW), "fake_cuda_held"),
 * as a fake_cuda_held_fn *, and so on. Every one is thread-safe.
 *
 * Backdoors
 *   fake_cuda_held(dev)        the bytes the fake driver holds on device `dev` for the calling
 *                              process (plain and managed allocations, live cuMemCreate allocations,
 *                              arrays, what the memory pools reserve, graph memory reserved and what
 *                              context limits reserve); 0 for a device that does not exist
 *   fake_cuda_fail(spec)       replaces the plan of failures (below) with `spec` (NULL or "": none)
 *                              and counts calls from 0 again; 0, or -1 for a malformed spec (said on
 *                              stderr; the old plan stays)
 *   fake_cuda_fail_next(sym, n, err)  replaces sym's entries of the plan with "its next n calls fail
 *                              with err" (n 0: none), keeping the other entries; 0, or -1 for a
 *                              symbol the fake does not have
 *   fake_cuda_failed()         how many calls the plan failed since fake_cuda_fail set it (or the
 *                              library was loaded with FAKE_CUDA_FAIL)
 *   fake_cuda_stream_complete(s)  the work queued on stream s so far is done (FAKE_CUDA_STREAMS=lazy):
 *                              its events complete, the waits blocked on it go on; 0, or -1 when
 *                              host memory is short
 *   fake_cuda_hold_waits(on)   with 1, a wait (cuEventSynchronize, cuStreamSynchronize,
 *                              cuCtxSynchronize) on lazy work blocks until fake_cuda_stream_complete
 *                              reaches it, as the driver waits for a busy GPU; 0 releases them all
 *   fake_cuda_waiting()        how many waits are blocked now
 *   fake_cuda_events()         how many events exist (created and not destroyed)
 *   fake_cuda_backed(a, n)     1 when every byte of [a, a + n) is device memory of this process (in
 *                              a mapping, or in an allocation a device pointer names), else 0
 *   fake_cuda_host_held()      the bytes of pinned host memory (cuMemHostAlloc) this process holds
 *   fake_cuda_poke(v), fake_cuda_peek()  write and read the contents word of this process's device
 *                              memory (with FAKE_CUDA_SHARED; poke -1 and peek 0 without): a
 *                              checkpoint of the process keeps it aside, a restore brings it back
 *                              (fake_ckpt.c); both wait while the process is locked
 *
 * Variables (read at each call unless said otherwise)
 *   FAKE_CUDA_DEVICES=N        N cards (default 2, at most 16)
 *   FAKE_CUDA_MEM=LIST         the cards' sizes and compute capabilities, as VRAM_SIM_DEVICES spells
 *                              them: "16GiB", "2x16GiB", "80GiB,24GiB@8.6" (sizes in B, K/KiB, M/MiB,
 *                              G/GiB, T/TiB; 9.0 without "@MAJOR.MINOR"); the number of cards too,
 *                              unless FAKE_CUDA_DEVICES names fewer (default: every card 16 GiB, 9.0)
 *   FAKE_CUDA_FAIL=PLAN        failures on demand, read once when the library is loaded (a malformed
 *                              plan stops the process): comma-separated entries
 *                                SYMBOL:N:ERROR    the Nth call (1 = the first) of SYMBOL fails
 *                                SYMBOL:N+:ERROR   the Nth and every later call fails
 *                                SYMBOL:N-M:ERROR  calls N to M fail
 *                              SYMBOL is a function of the fake by its exported name, exactly
 *                              (cuMemFree_v2, cuMemFreeAsync and cuMemFreeAsync_ptsz are three);
 *                              ERROR a CUresult by number (2) or by name (CUDA_ERROR_OUT_OF_MEMORY).
 *                              Calls through dlsym and through cuGetProcAddress count alike. A
 *                              failing call does nothing and returns ERROR, as a driver that
 *                              refuses the call: a refused cuMemFree_v2 of a live pointer leaves it
 *                              allocated, its bytes held. Example: "cuMemMap:3:2,cuMemRelease:1+:999"
 *   FAKE_CUDA_VMM=off          no virtual memory management (cuMemCreate, cuMemAddressReserve and
 *                              cuMulticastCreate: CUDA_ERROR_NOT_SUPPORTED; the attribute says 0)
 *   FAKE_CUDA_SHAREABLE=off    cuMemCreate asked for exportable memory (requestedHandleTypes) is
 *                              CUDA_ERROR_NOT_SUPPORTED, as on a device that cannot share memory
 *   FAKE_CUDA_STREAMS=lazy     the work of every stream stays pending until a wait reaches it
 *                              (cuEventSynchronize, cuStreamSynchronize, cuCtxSynchronize) or
 *                              fake_cuda_stream_complete, as the simulated backend's streams; by
 *                              default it is done as soon as it is queued
 *   FAKE_CUDA_PROC=internal    cuGetProcAddress hands out internal entry points, not the exports
 *   FAKE_CUDA_SHARED=FILE      the cards are shared by every process naming FILE; the process
 *                              checkpoint API (fake_ckpt.c) acts on the processes sharing them
 *   FAKE_CUDA_CHECKPOINT=off   every call of the checkpoint API is CUDA_ERROR_NOT_SUPPORTED (a
 *                              sandbox that refuses it); the library built in fakecuda-nockpt/ has
 *                              no checkpoint API at all (a driver older than CUDA 12.8)
 *   FAKE_CUDA_UUID_BASE=N      added to the last byte of every UUID
 */
#ifndef VRAM_FAKE_CUDA_H
#define VRAM_FAKE_CUDA_H

#include <stddef.h>

#ifndef SHIM_EXPORT
#define SHIM_EXPORT __attribute__((visibility("default")))
#endif

typedef size_t fake_cuda_held_fn(int dev);
typedef size_t fake_cuda_host_held_fn(void);
typedef int fake_cuda_fail_fn(const char *spec);
typedef int fake_cuda_fail_next_fn(const char *symbol, unsigned long long n, int error);
typedef int fake_cuda_stream_complete_fn(void *stream);
typedef unsigned long long fake_cuda_failed_fn(void);
typedef void fake_cuda_hold_waits_fn(int on);
typedef int fake_cuda_waiting_fn(void);
typedef size_t fake_cuda_events_fn(void);
typedef int fake_cuda_backed_fn(unsigned long long addr, size_t size);
typedef int fake_cuda_poke_fn(unsigned long long value);
typedef unsigned long long fake_cuda_peek_fn(void);

SHIM_EXPORT size_t fake_cuda_held(int dev);
SHIM_EXPORT size_t fake_cuda_host_held(void);
SHIM_EXPORT int fake_cuda_fail(const char *spec);
SHIM_EXPORT int fake_cuda_fail_next(const char *symbol, unsigned long long n, int error);
SHIM_EXPORT int fake_cuda_stream_complete(void *stream);
SHIM_EXPORT unsigned long long fake_cuda_failed(void);
SHIM_EXPORT void fake_cuda_hold_waits(int on);
SHIM_EXPORT int fake_cuda_waiting(void);
SHIM_EXPORT size_t fake_cuda_events(void);
SHIM_EXPORT int fake_cuda_backed(unsigned long long addr, size_t size);
SHIM_EXPORT int fake_cuda_poke(unsigned long long value);
SHIM_EXPORT unsigned long long fake_cuda_peek(void);

#endif /* VRAM_FAKE_CUDA_H */
