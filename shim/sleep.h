/*
 * sleep.h: putting a CUDA process to sleep and waking it, from another process, through the driver's
 * process checkpoint API (cuCheckpointProcessLock / Checkpoint / Restore / Unlock / GetState, CUDA 12.8
 * and later), loaded at run time (dlopen "libcuda.so.1", as the backend loads the driver), with the
 * ledger (ledger.h) kept in step. Used by `vram sleep` / `vram wake` (tools/sleepwake.c) and the idle
 * watcher (watch.h), in `vram` and in the Slurm plugin; not in the preload library.
 *
 * Sleep: lock (the process's CUDA calls block; the lock waits for the calls inside, up to a timeout),
 * checkpoint (its device memory goes to host memory, the card's memory is free). Wake: restore (onto
 * the same cards, or onto another card of the same kind: --device), then unlock. While asleep its
 * slots in the ledger say so (ledger.h, "Sleep"): vram top shows the host bytes, group sums skip it. A
 * wake first checks, under the ledger lock, that the process's group (every group it is in, on the
 * card it wakes on) has room for what it held, then marks it waking (counted) before the restore, so
 * that no one else takes that room meanwhile; a card without room makes the driver refuse the restore
 * (CUDA_ERROR_OUT_OF_MEMORY), and the process stays asleep. A process not under vram run (no slot) can
 * be slept and woken all the same; then nothing is known of its memory or group.
 *
 * Only the process's owner or root may sleep or wake it (checked here first, then by the driver).
 * Every refusal of the driver is said with the driver's error name.
 *
 * Invariants: the ledger's sleep fields of a process change only under the ledger lock, here; a mark
 * (SLEEPING, WAKING) names its sleeper, whose death leaves a stale mark that the next sleep or wake
 * of the process settles from the driver's state. No lock of its own; one thread per sleep_driver.
 */
#ifndef VRAM_SHIM_SLEEP_H
#define VRAM_SHIM_SLEEP_H

#include <stddef.h>
#include <stdint.h>

#include "common/cuda_abi.h"
#include "common/ledger.h"

typedef struct sleep_driver {
    void *lib;
    int version;   /* cuDriverGetVersion's, 0 unknown */
    pfn_cuInit init;
    pfn_cuDriverGetVersion driver_version;
    pfn_cuGetErrorName error_name;
    pfn_cuGetErrorString error_string;
    pfn_cuDeviceGetCount device_count;
    pfn_cuDeviceGet device_get;
    pfn_cuDeviceGetUuid device_uuid;
    pfn_cuCheckpointProcessGetState get_state;
    pfn_cuCheckpointProcessLock lock;
    pfn_cuCheckpointProcessCheckpoint checkpoint;
    pfn_cuCheckpointProcessRestore restore;
    pfn_cuCheckpointProcessUnlock unlock;
} sleep_driver;

/* Loads the driver and its checkpoint API; with `init`, cuInit too (a restore needs it). 0, or -1
 * with one sentence in err naming what is missing (no driver; a driver without the checkpoint API,
 * with its CUDA version; cuInit's failure by name). */
int sleep_driver_open(sleep_driver *d, int init, char *err, size_t errlen);
void sleep_driver_close(sleep_driver *d);

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" */
void sleep_error_text(const sleep_driver *d, CUresult r, char *buf, size_t len);

/* What a sleep or wake came to. */
enum {
    SLEEP_DONE = 0,      /* asleep / awake now */
    SLEEP_ALREADY,       /* it was so already (the ledger set right when it said otherwise) */
    SLEEP_REFUSED,       /* wake: no room on the card or in a group; it stays asleep */
    SLEEP_GONE,          /* no such process (its slots freed) */
    SLEEP_FAILED         /* anything else: said in the message */
};

/* The process pid's command (/proc/<pid>/comm), "?" when unknown. */
void sleep_command(int pid, char *out, size_t len);

/* Puts pid to sleep (lock within lock_ms, 0: no limit; checkpoint). `l` is the ledger (opened by the
 * caller; NULL: none); the marks name this process as the sleeper. A process asleep already
 * (SLEEP_ALREADY) is marked as this process's with `claim` (vram sleep: an idle watcher then leaves
 * it asleep until vram wake), else its marks stay. Returns a SLEEP_* and one line in msg (without the
 * tool's prefix); *host gets the bytes its slots moved to host memory (0 when not under vram run). */
int sleep_process(const sleep_driver *d, ledger *l, int pid, unsigned lock_ms, int claim, char *msg, size_t len,
                  uint64_t *host);

/* Wakes pid (restore, unlock), onto the card of UUID `to` ("GPU-...") when not NULL (a process of one
 * card, as the ledger knows it). Returns a SLEEP_* and one line in msg. */
int wake_process(const sleep_driver *d, ledger *l, int pid, const char *to, char *msg, size_t len);

/* The UUID ("GPU-...") of the card DEV names: a UUID as is (checked: it names a card the driver
 * sees), or an index of the driver's (as vram ls shows them). 0, or -1 with err. */
int sleep_card_uuid(const sleep_driver *d, const char *dev, char *uuid, size_t len, char *err, size_t errlen);

#endif /* VRAM_SHIM_SLEEP_H */
