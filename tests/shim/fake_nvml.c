/*
 * fake_nvml.c: a libnvidia-ml.so.1 double for tests/shim, next to the fake libcuda.so.1. It
 * enumerates every fake card (FAKE_CUDA_DEVICES, default 2), ignoring CUDA_VISIBLE_DEVICES as NVML
 * does, with the fake driver's UUIDs (GPU-fa4ec0da-0000-4000-8000-0000000000<d>, FAKE_CUDA_UUID_BASE
 * added to the last byte). Memory: 16 GiB; nvmlDeviceGetMemoryInfo reports it all free,
 * nvmlDeviceGetMemoryInfo_v2 512 MiB of it reserved and the rest free (the usage of the fake cards
 * is not tracked here). nvmlDeviceGetName: "Fake GPU 16GB" for every card; with FAKE_NVML_MIXED=1
 * card 1 is "Fake GPU Small" (cards of different models, whose CUDA order NVML cannot tell).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_types.h"

#define FAKE_NVML_MAX 16
#define FAKE_NVML_CARD (16ull << 30)
#define FAKE_NVML_RESERVED (512ull << 20)

SHIM_EXPORT nvmlReturn_t nvmlInit_v2(void);
SHIM_EXPORT nvmlReturn_t nvmlShutdown(void);
SHIM_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
SHIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
SHIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
SHIM_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
SHIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);

static int fake_nvml_initialized;
static char fake_nvml_cards[FAKE_NVML_MAX];   /* a handle is &fake_nvml_cards[index] */

static unsigned int fake_nvml_count(void) {
    const char *v = getenv("FAKE_CUDA_DEVICES");
    int n = v ? atoi(v) : 2;
    return n < 0 ? 0 : n > FAKE_NVML_MAX ? FAKE_NVML_MAX : (unsigned int)n;
}

/* The index of a handle, or -1. */
static int fake_nvml_index(nvmlDevice_t device) {
    const char *p = (const char *)device;
    if (p < fake_nvml_cards || p >= fake_nvml_cards + fake_nvml_count()) return -1;
    return (int)(p - fake_nvml_cards);
}

SHIM_EXPORT nvmlReturn_t nvmlInit_v2(void) {
    fake_nvml_initialized = 1;
    return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlShutdown(void) {
    fake_nvml_initialized = 0;
    return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!fake_nvml_initialized) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = fake_nvml_count();
    return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!fake_nvml_initialized) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= fake_nvml_count()) return NVML_ERROR_INVALID_ARGUMENT;
    *device = (nvmlDevice_t)(void *)&fake_nvml_cards[index];
    return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    if (!fake_nvml_initialized) return NVML_ERROR_UNINITIALIZED;
    int i = fake_nvml_index(device);
    if (i < 0 || !uuid) return NVML_ERROR_INVALID_ARGUMENT;
    const char *add = getenv("FAKE_CUDA_UUID_BASE");
    unsigned last = (unsigned char)(i + (add ? atoi(add) : 0));
    int n = snprintf(uuid, length, "GPU-fa4ec0da-0000-4000-8000-0000000000%02x", last);
    return n < 0 || (unsigned int)n >= length ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    if (!fake_nvml_initialized) return NVML_ERROR_UNINITIALIZED;
    int i = fake_nvml_index(device);
    if (i < 0 || !index) return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned int)i;
    return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    if (!fake_nvml_initialized) return NVML_ERROR_UNINITIALIZED;
    int i = fake_nvml_index(device);
    if (i < 0 || !name) return NVML_ERROR_INVALID_ARGUMENT;
    const char *mixed = getenv("FAKE_NVML_MIXED");
    int small = i == 1 && mixed && strcmp(mixed, "1") == 0;
    int n = snprintf(name, length, "%s", small ? "Fake GPU Small" : "Fake GPU 16GB");
    return n < 0 || (unsigned int)n >= length ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    if (!fake_nvml_initialized) return NVML_ERROR_UNINITIALIZED;
    if (fake_nvml_index(device) < 0 || !memory) return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = FAKE_NVML_CARD;
    memory->free = FAKE_NVML_CARD;
    memory->used = 0;
    return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    if (!fake_nvml_initialized) return NVML_ERROR_UNINITIALIZED;
    if (fake_nvml_index(device) < 0 || !memory) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = FAKE_NVML_CARD;
    memory->reserved = FAKE_NVML_RESERVED;
    memory->free = FAKE_NVML_CARD - FAKE_NVML_RESERVED;
    memory->used = 0;
    return NVML_SUCCESS;
}
