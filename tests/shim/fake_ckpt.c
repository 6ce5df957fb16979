/*
 * fake_ckpt.c: the fake driver's process checkpoint API (cuCheckpointProcess*, CUDA 12.8; fake_cuda.c
 * says what the fake models), with the semantics cuda.h documents, across the processes that share
 * the fake cards (FAKE_CUDA_SHARED: another process is locked, checkpointed, restored and unlocked
 * through the shared file; without it no process can be found: CUDA_ERROR_INVALID_VALUE):
 *
 *   Lock(pid)        RUNNING -> LOCKED: the process's later driver calls block (the gate of every
 *                    exported call, fake_cuda.c), and the lock waits for the calls already inside to
 *                    return; when args->timeoutMs passes first the process stays RUNNING and the
 *                    answer is CUDA_ERROR_NOT_READY
 *   Checkpoint(pid)  LOCKED -> CHECKPOINTED: the process's device memory leaves the cards (its bytes
 *                    per ordinal are kept aside, its contents word too, fake_cuda_poke), so other
 *                    processes can take the room
 *   Restore(pid)     CHECKPOINTED -> LOCKED: the bytes go back on their cards, or on the cards
 *                    args->gpuPairs names (every checkpointed card must be named, the new one of the
 *                    same size and compute capability, else CUDA_ERROR_INVALID_VALUE); a card without
 *                    room for them refuses with CUDA_ERROR_OUT_OF_MEMORY and the process stays
 *                    CHECKPOINTED, nothing changed
 *   Unlock(pid)      LOCKED -> RUNNING: the blocked calls go on
 *   GetState(pid)    the state; GetRestoreThreadId(pid): the pid itself (the fake has no such thread)
 * A call in the wrong state is CUDA_ERROR_ILLEGAL_STATE; a pid of no live process of the shared
 * file CUDA_ERROR_INVALID_VALUE; a process of another user (not as root) CUDA_ERROR_NOT_PERMITTED. A
 * process that dies checkpointed leaves nothing behind (its entry counts nothing on any card). The
 * checkpoint calls are not gated (they act on other processes). FAKE_CUDA_CHECKPOINT=off makes each
 * of them answer CUDA_ERROR_NOT_SUPPORTED (a sandbox that refuses them); the build with
 * FAKE_NO_CHECKPOINT (fakecuda-nockpt/) has none of them (a driver older than CUDA 12.8).
 *
 * Backdoors (fake_cuda.h): fake_cuda_poke(v) writes the process's contents word ("device memory"
 * the fake keeps per process), fake_cuda_peek() reads it back, through the gate (a read of device
 * memory blocks while the process is locked); a checkpoint moves it aside (0 on the card), a restore
 * brings it back.
 *
 * Invariants: a process's state changes only here, under fake_lock (the shared file's flock); its
 * usage (fake_share_entry.used) is zero while CHECKPOINTED and its saved bytes zero otherwise. Locks:
 * fake_lock around each step; a lock's wait for the calls inside polls without it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fake_internal.h"

static int fake_ckpt_off(void) {
    const char *v = getenv("FAKE_CUDA_CHECKPOINT");
    return v && strcmp(v, "off") == 0;
}

/* Whether this process may act on pid: the same user, or root. */
static int fake_ckpt_allowed(int pid) {
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d", pid);
    if (stat(path, &st) != 0) return 1;   /* gone: the lookup says so */
    return geteuid() == 0 || st.st_uid == geteuid();
}

/* The process a call acts on: its entry of the shared file, its checkpoint state and its usage. */
typedef struct fake_ckpt_target {
    int                 at;     /* its entry's index, -1 when not found */
    fake_ckpt_entry    *ck;
    unsigned long long *used;   /* its bytes per ordinal */
} fake_ckpt_target;

enum { FAKE_CKPT_ANY = -1 };   /* a call that any state allows */

/* The start of every call: takes fake_lock, finds pid, and checks that the call may act on it in its
 * state now (`from`, or FAKE_CKPT_ANY); CUDA_SUCCESS, or the error of the call. The caller gives the
 * lock back (fake_unlock) whatever the answer. */
static CUresult fake_ckpt_begin(int pid, int from, fake_ckpt_target *t) {
    *t = (fake_ckpt_target){ .at = -1 };
    fake_lock();
    if (fake_ckpt_off()) return CUDA_ERROR_NOT_SUPPORTED;
    if (pid <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!fake_ckpt_allowed(pid)) return CUDA_ERROR_NOT_PERMITTED;
    t->at = fake_ckpt_find_unsafe(pid, &t->ck, &t->used);
    if (t->at < 0) return CUDA_ERROR_INVALID_VALUE;
    if (from != FAKE_CKPT_ANY && __atomic_load_n(&t->ck->state, __ATOMIC_SEQ_CST) != from)
        return CUDA_ERROR_ILLEGAL_STATE;
    return CUDA_SUCCESS;
}

/* A call that only moves pid from state `from` to `to` (Lock's first step, Unlock). */
static CUresult fake_ckpt_move(int pid, int from, int to, fake_ckpt_target *t) {
    CUresult r = fake_ckpt_begin(pid, from, t);
    if (r == CUDA_SUCCESS) __atomic_store_n(&t->ck->state, to, __ATOMIC_SEQ_CST);
    fake_unlock();
    return r;
}

static uint64_t fake_ckpt_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

CUresult impl_cuCheckpointProcessGetState(int pid, CUprocessState *state) {
    if (!state) return CUDA_ERROR_INVALID_VALUE;
    fake_ckpt_target t;
    CUresult r = fake_ckpt_begin(pid, FAKE_CKPT_ANY, &t);
    if (r == CUDA_SUCCESS) *state = (CUprocessState)__atomic_load_n(&t.ck->state, __ATOMIC_SEQ_CST);
    fake_unlock();
    return r;
}

CUresult impl_cuCheckpointProcessGetRestoreThreadId(int pid, int *tid) {
    if (!tid) return CUDA_ERROR_INVALID_VALUE;
    fake_ckpt_target t;
    CUresult r = fake_ckpt_begin(pid, FAKE_CKPT_ANY, &t);
    fake_unlock();
    if (r == CUDA_SUCCESS) *tid = pid;
    return r;
}

CUresult impl_cuCheckpointProcessLock(int pid, CUcheckpointLockArgs *args) {
    unsigned timeout = args ? args->timeoutMs : 0;
    fake_ckpt_target t;
    CUresult r = fake_ckpt_move(pid, CU_PROCESS_STATE_RUNNING, CU_PROCESS_STATE_LOCKED, &t);
    if (r != CUDA_SUCCESS) return r;
    /* the calls already inside finish; new ones wait at the gate */
    uint64_t end = fake_ckpt_now_ms() + timeout;
    while (__atomic_load_n(&t.ck->inflight, __ATOMIC_SEQ_CST) > 0) {
        if (timeout && fake_ckpt_now_ms() >= end) {
            fake_lock();
            __atomic_store_n(&t.ck->state, CU_PROCESS_STATE_RUNNING, __ATOMIC_SEQ_CST);
            fake_unlock();
            return CUDA_ERROR_NOT_READY;
        }
        usleep(1000);
    }
    return CUDA_SUCCESS;
}

CUresult impl_cuCheckpointProcessCheckpoint(int pid, CUcheckpointCheckpointArgs *args) {
    (void)args;
    fake_ckpt_target t;
    CUresult r = fake_ckpt_begin(pid, CU_PROCESS_STATE_LOCKED, &t);
    if (r == CUDA_SUCCESS) {
        for (int o = 0; o < FAKE_MAX_DEVICES; o++) {
            t.ck->saved[o] = t.used[o];
            t.used[o] = 0;   /* off the card: the others may take the room */
        }
        t.ck->saved_data = t.ck->data;
        t.ck->data = 0;
        __atomic_store_n(&t.ck->state, CU_PROCESS_STATE_CHECKPOINTED, __ATOMIC_SEQ_CST);
    }
    fake_unlock();
    return r;
}

/* The card of a fake UUID (fake_cuda.c: the last byte is the card's index plus FAKE_CUDA_UUID_BASE), or -1. */
static int fake_ckpt_card_of_uuid(const CUuuid *u) {
    static const unsigned char base[15] = { 0xfa, 0x4e, 0xc0, 0xda, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0 };
    if (memcmp(u->bytes, base, sizeof base) != 0) return -1;
    const char *add = getenv("FAKE_CUDA_UUID_BASE");
    int card = (unsigned char)u->bytes[15] - (add ? atoi(add) : 0);
    return card >= 0 && card < fake_device_count() ? card : -1;
}

CUresult impl_cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs *args) {
    fake_ckpt_target t;
    CUresult r = fake_ckpt_begin(pid, CU_PROCESS_STATE_CHECKPOINTED, &t);
    int to[FAKE_MAX_DEVICES];   /* the card each ordinal goes back on */
    for (int o = 0; r == CUDA_SUCCESS && o < FAKE_MAX_DEVICES; o++) to[o] = fake_ckpt_entry_card(t.at, o);
    if (r == CUDA_SUCCESS && args && args->gpuPairsCount) {
        if (!args->gpuPairs) r = CUDA_ERROR_INVALID_VALUE;
        for (int o = 0; r == CUDA_SUCCESS && o < FAKE_MAX_DEVICES; o++) {
            if (!t.ck->saved[o]) continue;
            int from = fake_ckpt_entry_card(t.at, o), found = 0;
            for (unsigned k = 0; k < args->gpuPairsCount && r == CUDA_SUCCESS; k++) {
                if (fake_ckpt_card_of_uuid(&args->gpuPairs[k].oldUuid) != from) continue;
                int nc = fake_ckpt_card_of_uuid(&args->gpuPairs[k].newUuid);
                if (nc < 0 || fake_card_bytes(nc) != fake_card_bytes(from)) r = CUDA_ERROR_INVALID_VALUE;
                to[o] = nc;
                found = 1;
            }
            if (!found) r = CUDA_ERROR_INVALID_VALUE;   /* every checkpointed card must be named */
        }
    }
    /* room on every card for what goes back there, all or nothing */
    size_t need[FAKE_MAX_DEVICES] = { 0 };
    for (int o = 0; r == CUDA_SUCCESS && o < FAKE_MAX_DEVICES; o++) need[to[o]] += t.ck->saved[o];
    for (int c = 0; r == CUDA_SUCCESS && c < FAKE_MAX_DEVICES; c++)
        if (need[c] && need[c] > fake_ckpt_card_room_unsafe(c)) r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        for (int o = 0; o < FAKE_MAX_DEVICES; o++) {
            t.used[o] = t.ck->saved[o];
            t.ck->saved[o] = 0;
            t.ck->card[o] = to[o] == o ? 0 : to[o] + 1;
        }
        t.ck->data = t.ck->saved_data;
        t.ck->saved_data = 0;
        __atomic_store_n(&t.ck->state, CU_PROCESS_STATE_LOCKED, __ATOMIC_SEQ_CST);
    }
    fake_unlock();
    return r;
}

CUresult impl_cuCheckpointProcessUnlock(int pid, CUcheckpointUnlockArgs *args) {
    (void)args;
    fake_ckpt_target t;
    return fake_ckpt_move(pid, CU_PROCESS_STATE_LOCKED, CU_PROCESS_STATE_RUNNING, &t);
}

FAKE_EXPORT_UNGATED(cuCheckpointProcessGetRestoreThreadId, (int pid, int *tid), (pid, tid))
FAKE_EXPORT_UNGATED(cuCheckpointProcessGetState, (int pid, CUprocessState *state), (pid, state))
FAKE_EXPORT_UNGATED(cuCheckpointProcessLock, (int pid, CUcheckpointLockArgs *args), (pid, args))
FAKE_EXPORT_UNGATED(cuCheckpointProcessCheckpoint, (int pid, CUcheckpointCheckpointArgs *args), (pid, args))
FAKE_EXPORT_UNGATED(cuCheckpointProcessRestore, (int pid, CUcheckpointRestoreArgs *args), (pid, args))
FAKE_EXPORT_UNGATED(cuCheckpointProcessUnlock, (int pid, CUcheckpointUnlockArgs *args), (pid, args))
