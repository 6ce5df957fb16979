/*
 * fake_fault.c: the fake driver's failures on demand and its error names (fake_cuda.c says what the
 * fake models; fake_cuda.h documents the plan's syntax for the tests).
 *
 * Fault injection: a plan of entries SYMBOL:N:ERROR ("the Nth call of SYMBOL fails with ERROR"),
 * SYMBOL:N+:ERROR (the Nth and every later call) or SYMBOL:N-M:ERROR (calls N to M), comma
 * separated, from the variable FAKE_CUDA_FAIL (read when the library is loaded) or from
 * fake_cuda_fail(spec) (which replaces the plan and starts counting again); fake_cuda_fail_next(
 * SYMBOL, n, ERROR) replaces SYMBOL's entries with "its next n calls fail" (0: none), keeping the
 * others'. SYMBOL is one of the fake's exported functions, by its exact name
 * (cuMemFree_v2, cuMemFreeAsync_ptsz); ERROR a CUresult by number or by name
 * (CUDA_ERROR_OUT_OF_MEMORY). Every call counts, through the exported symbol or through the
 * internal twin cuGetProcAddress hands out (FAKE_EXPORT asks fake_fault first); a call that fails so
 * does nothing at all and returns ERROR, as a driver that refuses a call. A malformed plan in the
 * variable stops the process (a test must not run with a plan it did not mean); fake_cuda_fail
 * returns -1 for one and keeps the old plan.
 *
 * Error names: cuGetErrorName and cuGetErrorString answer for every CUresult of CUDA 13.0's cuda.h
 * (the driver's short descriptions); an unknown code is CUDA_ERROR_INVALID_VALUE and NULL, as the
 * driver documents.
 *
 * Invariants: at most FAKE_FAULT_MAX entries; counts only grow while a plan is in force.
 * Locks: fake_fault_mu guards the plan and its counts (never held with fake_mu); fake_faults, the
 * number of entries, is read without it on the fast path (no plan: no lock).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

/* ---- the driver's error names -------------------------------------------------------------------- */

static const struct fake_error {
    CUresult code;
    const char *name, *text;
} fake_errors[] = {
    { 0, "CUDA_SUCCESS", "no error" },
    { 1, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
    { 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
    { 3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
    { 4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down" },
    { 5, "CUDA_ERROR_PROFILER_DISABLED", "profiler disabled while using external profiling tool" },
    { 6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED", "profiler not initialized: call cudaProfilerInitialize()" },
    { 7, "CUDA_ERROR_PROFILER_ALREADY_STARTED", "profiler already started" },
    { 8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED", "profiler already stopped" },
    { 34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library" },
    { 36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", "API call is not supported in the installed CUDA driver" },
    { 46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable" },
    { 100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
    { 101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
    { 102, "CUDA_ERROR_DEVICE_NOT_LICENSED", "device doesn't have valid Grid license" },
    { 200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid" },
    { 201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
    { 202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "context already current" },
    { 205, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed" },
    { 206, "CUDA_ERROR_UNMAP_FAILED", "unmapping of buffer object failed" },
    { 207, "CUDA_ERROR_ARRAY_IS_MAPPED", "array is mapped" },
    { 208, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped" },
    { 209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device" },
    { 210, "CUDA_ERROR_ALREADY_ACQUIRED", "resource already acquired" },
    { 211, "CUDA_ERROR_NOT_MAPPED", "resource not mapped" },
    { 212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY", "resource not mapped as array" },
    { 213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER", "resource not mapped as pointer" },
    { 214, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered" },
    { 215, "CUDA_ERROR_UNSUPPORTED_LIMIT", "limit is not supported on this architecture" },
    { 216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "exclusive-thread device already in use by a different thread" },
    { 217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices" },
    { 218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed" },
    { 219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", "invalid OpenGL or DirectX context" },
    { 220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", "uncorrectable NVLink error detected during the execution" },
    { 221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "PTX JIT compiler library not found" },
    { 222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain." },
    { 223, "CUDA_ERROR_JIT_COMPILATION_DISABLED", "PTX JIT compilation was disabled" },
    { 224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", "the provided execution affinity is not supported" },
    { 225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", "the provided PTX contains unsupported call to cudaDeviceSynchronize" },
    { 226, "CUDA_ERROR_CONTAINED", "an exception occurred on the device that is now contained by the GPU's error containment capability" },
    { 300, "CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid" },
    { 301, "CUDA_ERROR_FILE_NOT_FOUND", "file not found" },
    { 302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", "shared object symbol not found" },
    { 303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "shared object initialization failed" },
    { 304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS" },
    { 400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
    { 401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state" },
    { 402, "CUDA_ERROR_LOSSY_QUERY", "attempted introspection would be semantically lossy" },
    { 500, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
    { 600, "CUDA_ERROR_NOT_READY", "device not ready" },
    { 700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered" },
    { 701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch" },
    { 702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated" },
    { 703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", "launch uses incompatible texturing mode" },
    { 704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled" },
    { 705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled" },
    { 708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "cannot set while device is active in this process" },
    { 709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed" },
    { 710, "CUDA_ERROR_ASSERT", "device-side assert triggered" },
    { 711, "CUDA_ERROR_TOO_MANY_PEERS", "peer mapping resources exhausted" },
    { 712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped" },
    { 713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region" },
    { 714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error" },
    { 715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered" },
    { 716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address" },
    { 717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "operation not supported on global/shared address space" },
    { 718, "CUDA_ERROR_INVALID_PC", "invalid program counter" },
    { 719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure" },
    { 720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "too many blocks in cooperative launch" },
    { 721, "CUDA_ERROR_TENSOR_MEMORY_LEAK", "tensor memory not completely freed" },
    { 800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted" },
    { 801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
    { 802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized" },
    { 803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination" },
    { 804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward compatibility was attempted on non supported HW" },
    { 805, "CUDA_ERROR_MPS_CONNECTION_FAILED", "MPS client failed to connect to the MPS control daemon or the MPS server" },
    { 806, "CUDA_ERROR_MPS_RPC_FAILURE", "the remote procedural call between the MPS server and the MPS client failed" },
    { 807, "CUDA_ERROR_MPS_SERVER_NOT_READY", "MPS server is not ready to accept new MPS client requests" },
    { 808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", "the hardware resources required to create MPS client have been exhausted" },
    { 809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED", "the hardware resources required to support device connections have been exhausted" },
    { 810, "CUDA_ERROR_MPS_CLIENT_TERMINATED", "the MPS client has been terminated by the server" },
    { 811, "CUDA_ERROR_CDP_NOT_SUPPORTED", "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it" },
    { 812, "CUDA_ERROR_CDP_VERSION_MISMATCH", "unsupported interaction between different versions of CUDA Dynamic Parallelism" },
    { 900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing" },
    { 901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture" },
    { 902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "operation would result in a merge of separate capture sequences" },
    { 903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "capture was not ended in the same stream as it began" },
    { 904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "capturing stream has unjoined work" },
    { 905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "dependency created on uncaptured work in another stream" },
    { 906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream" },
    { 907, "CUDA_ERROR_CAPTURED_EVENT", "operation not permitted on an event last recorded in a capturing stream" },
    { 908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread" },
    { 909, "CUDA_ERROR_TIMEOUT", "wait operation timed out" },
    { 910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update" },
    { 911, "CUDA_ERROR_EXTERNAL_DEVICE", "an async error has occured in external entity outside of CUDA" },
    { 912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "a kernel launch error has occurred due to cluster misconfiguration" },
    { 913, "CUDA_ERROR_FUNCTION_NOT_LOADED", "the function handle is not loaded when calling an API that requires a loaded function" },
    { 914, "CUDA_ERROR_INVALID_RESOURCE_TYPE", "one or more resources passed in are not valid resource types for the operation" },
    { 915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION", "one or more resources are insufficient or non-applicable for the operation" },
    { 916, "CUDA_ERROR_KEY_ROTATION", "an error happened during the key rotation sequence" },
    { 999, "CUDA_ERROR_UNKNOWN", "unknown error" },
};

static const struct fake_error *fake_error_of(CUresult code) {
    for (size_t i = 0; i < sizeof fake_errors / sizeof fake_errors[0]; i++)
        if (fake_errors[i].code == code) return &fake_errors[i];
    return NULL;
}

/* Needs no cuInit, as in the driver. */
CUresult impl_cuGetErrorName(CUresult error, const char **str) {
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    const struct fake_error *e = fake_error_of(error);
    *str = e ? e->name : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult impl_cuGetErrorString(CUresult error, const char **str) {
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    const struct fake_error *e = fake_error_of(error);
    *str = e ? e->text : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- the plan ------------------------------------------------------------------------------------ */

#define FAKE_FAULT_MAX 32

typedef struct fake_fault_entry {
    char symbol[64];
    unsigned long long first, last;   /* the calls that fail, 1-based; last 0: every one from first on */
    CUresult error;
    unsigned long long calls;         /* calls of symbol since the entry came into force */
} fake_fault_entry;

static pthread_mutex_t fake_fault_mu = PTHREAD_MUTEX_INITIALIZER;
static fake_fault_entry fake_plan[FAKE_FAULT_MAX];
static int fake_faults;                  /* entries in force; read without the lock on the fast path */
static unsigned long long fake_failed;   /* calls failed by the plan, since it came into force */

static const char *const fake_symbols[] = {
#define FAKE_SYMBOL_NAME(symbol, type) #symbol,
    FAKE_FUNCTIONS(FAKE_SYMBOL_NAME)
#undef FAKE_SYMBOL_NAME
};

static int fake_known_symbol(const char *name) {
    for (size_t i = 0; i < sizeof fake_symbols / sizeof fake_symbols[0]; i++)
        if (strcmp(fake_symbols[i], name) == 0) return 1;
    return 0;
}

/* ERROR: a number, or a name of the table. */
static int fake_parse_error(const char *s, CUresult *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end != s && *end == '\0' && errno == 0 && v > 0 && v <= 100000) {
        *out = (CUresult)v;
        return 0;
    }
    for (size_t i = 1; i < sizeof fake_errors / sizeof fake_errors[0]; i++)
        if (strcmp(fake_errors[i].name, s) == 0) {
            *out = fake_errors[i].code;
            return 0;
        }
    return -1;
}

/* One entry SYMBOL:N[+]:ERROR (text of `len` bytes); 0, or -1 with the reason in why. */
static int fake_parse_entry(const char *text, size_t len, fake_fault_entry *e, char *why, size_t why_len) {
    char buf[160];
    if (len == 0 || len >= sizeof buf) {
        snprintf(why, why_len, "an entry is empty or too long");
        return -1;
    }
    memcpy(buf, text, len);
    buf[len] = '\0';
    char *c1 = strchr(buf, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c1 || !c2 || strchr(c2 + 1, ':')) {
        snprintf(why, why_len, "'%s' is not SYMBOL:N:ERROR", buf);
        return -1;
    }
    *c1 = *c2 = '\0';
    memset(e, 0, sizeof *e);
    if (!fake_known_symbol(buf) || strlen(buf) >= sizeof e->symbol) {
        snprintf(why, why_len, "'%s' is not a function of the fake driver", buf);
        return -1;
    }
    snprintf(e->symbol, sizeof e->symbol, "%.63s", buf);
    char *n = c1 + 1, *end = NULL;
    errno = 0;
    unsigned long long first = n[0] >= '0' && n[0] <= '9' ? strtoull(n, &end, 10) : 0, last = first;
    if (first != 0 && errno == 0 && *end == '+' && end[1] == '\0') {
        last = 0;
    } else if (first != 0 && errno == 0 && *end == '-' && end[1] >= '0' && end[1] <= '9') {
        char *m = end + 1;
        last = strtoull(m, &end, 10);
        if (*end != '\0' || errno != 0 || last < first) first = 0;
    } else if (first == 0 || errno != 0 || *end != '\0') {
        first = 0;
    }
    if (first == 0) {
        snprintf(why, why_len, "'%.40s' is not a call number of %.63s (N, N+ for N and later, N-M)", n, e->symbol);
        return -1;
    }
    e->first = first;
    e->last = last;
    if (fake_parse_error(c2 + 1, &e->error) != 0) {
        snprintf(why, why_len, "'%s' is not a CUresult (a number or a CUDA_ERROR_* name)", c2 + 1);
        return -1;
    }
    return 0;
}

/* Parses a whole plan into plan/count; 0, or -1 with the reason. */
static int fake_parse_plan(const char *spec, fake_fault_entry *plan, int *count, char *why, size_t why_len) {
    int n = 0;
    const char *p = spec;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (n == FAKE_FAULT_MAX) {
            snprintf(why, why_len, "more than %d entries", FAKE_FAULT_MAX);
            return -1;
        }
        if (fake_parse_entry(p, len, &plan[n], why, why_len) != 0) return -1;
        n++;
        p = end ? end + 1 : NULL;
    }
    *count = n;
    return 0;
}

SHIM_EXPORT int fake_cuda_fail(const char *spec) {
    fake_fault_entry plan[FAKE_FAULT_MAX];
    int n = 0;
    char why[256];
    if (spec && fake_parse_plan(spec, plan, &n, why, sizeof why) != 0) {
        fprintf(stderr, "fake libcuda: fake_cuda_fail(\"%s\"): %s\n", spec, why);
        return -1;
    }
    pthread_mutex_lock(&fake_fault_mu);
    memcpy(fake_plan, plan, (size_t)n * sizeof plan[0]);
    fake_failed = 0;
    __atomic_store_n(&fake_faults, n, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&fake_fault_mu);
    return 0;
}

SHIM_EXPORT int fake_cuda_fail_next(const char *symbol, unsigned long long n, int error) {
    if (!symbol || !fake_known_symbol(symbol) || strlen(symbol) >= sizeof fake_plan[0].symbol) {
        fprintf(stderr, "fake libcuda: fake_cuda_fail_next: '%s' is not a function of the fake driver\n",
                symbol ? symbol : "(null)");
        return -1;
    }
    int rc = 0;
    pthread_mutex_lock(&fake_fault_mu);
    int kept = 0;
    for (int i = 0; i < fake_faults; i++)   /* the symbol's entries are replaced */
        if (strcmp(fake_plan[i].symbol, symbol) != 0) fake_plan[kept++] = fake_plan[i];
    if (n > 0 && kept == FAKE_FAULT_MAX) {
        rc = -1;
    } else if (n > 0) {
        fake_fault_entry *e = &fake_plan[kept++];
        memset(e, 0, sizeof *e);
        snprintf(e->symbol, sizeof e->symbol, "%s", symbol);
        e->first = 1;
        e->last = n;
        e->error = (CUresult)error;
    }
    __atomic_store_n(&fake_faults, kept, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&fake_fault_mu);
    return rc;
}

__attribute__((constructor)) static void fake_fault_from_environment(void) {
    const char *spec = getenv("FAKE_CUDA_FAIL");
    if (!spec || !*spec) return;
    if (fake_cuda_fail(spec) != 0) {
        fprintf(stderr, "fake libcuda: FAKE_CUDA_FAIL=\"%s\" is malformed: stopping\n", spec);
        abort();
    }
}

CUresult fake_fault(const char *symbol) {
    if (__atomic_load_n(&fake_faults, __ATOMIC_ACQUIRE) == 0) return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&fake_fault_mu);
    for (int i = 0; i < fake_faults; i++) {
        fake_fault_entry *e = &fake_plan[i];
        if (strcmp(e->symbol, symbol) != 0) continue;
        e->calls++;
        if (r == CUDA_SUCCESS && e->calls >= e->first && (e->last == 0 || e->calls <= e->last)) r = e->error;
    }
    if (r != CUDA_SUCCESS) fake_failed++;
    pthread_mutex_unlock(&fake_fault_mu);
    return r;
}

SHIM_EXPORT unsigned long long fake_cuda_failed(void) {
    pthread_mutex_lock(&fake_fault_mu);
    unsigned long long n = fake_failed;
    pthread_mutex_unlock(&fake_fault_mu);
    return n;
}

FAKE_EXPORT(cuGetErrorName, (CUresult error, const char **str), (error, str))
FAKE_EXPORT(cuGetErrorString, (CUresult error, const char **str), (error, str))
