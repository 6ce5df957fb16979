/*
 * limits.c: accounting and limits. Owns the bytes in use per device (g.used, g.peak), the checks
 * against VRAM_LIMIT / VRAM_LIMIT_<i> and the group limit, the refusal messages, the records of
 * pointers and arrays, and the program's view of its device (shim_view: what cuMemGetInfo and NVML
 * report).
 *
 * Per device, bytes in use = what the driver holds for the program through the interposed calls:
 * the sizes of its live pointers, arrays and cuMemCreate allocations (table.c; allocs.c keeps the
 * allocations), plus the memory its pools, graphs and context limits hold (held.c, through
 * shim_adjust). Memory is reserved against the limit before the driver is called (shim_reserve: so
 * that concurrent threads cannot together pass the limit) and settled afterwards (shim_settle).
 * Frees subtract when the driver's call returned success (shim_forget before the call, shim_freed
 * after; never before: no one is granted bytes the driver still holds). An allocation that would
 * pass a limit fails with CUDA_ERROR_OUT_OF_MEMORY, the program's normal error path; with
 * VRAM_LOG=1 one line on stderr says the vram limit was the cause, with the numbers.
 *
 * Limits that move (ledger.h): the limit in force, g.limit[d], starts as VRAM_LIMIT(_<i>) and follows
 * what the process's ledger slot says at each accounted call (shim_limits_follow: one atomic load of
 * the slot's limits_gen when nothing moved): the limit set from outside (`vram limit PID`), else the start
 * limit, lowered to the group cap a guaranteed member of its group set (group.c), never above
 * VRAM_LIMIT_MAX nor the card; and the group's budget, VRAM_GROUP_LIMIT or the one set from outside
 * (`vram limit --group`), never above VRAM_GROUP_LIMIT_MAX. A limit lowered below what the process
 * holds kills nothing: live memory stays, later allocations are refused (or overflow, overflow.c)
 * until frees bring it under, and a balloon gives what is above the new limit back to the card.
 *
 * Invariants: g.used[d] counts every reserved or recorded byte of device d and never wraps below 0;
 * with a limit, a reservation never takes g.used[d] past it (shim_adjust may: the driver already
 * holds what it reports); every change of g.used is published to the ledger (shim_publish_unsafe)
 * under g.mu. Locks: g.mu around each change, briefly; the group check holds ledger_mu and the
 * ledger lock around it (group.c); the balloon is changed after g.mu is released (balloon_mu is
 * taken before g.mu, never inside it).
 */
#include <stdint.h>
#include <stdio.h>

#include "shim.h"

/* ---- limits that move ------------------------------------------------------------------------------ */

int shim_limits_follow_unsafe(int dev) {
    ledger_slot *s = g.slot[dev];
    if (!s || g.ledger_lost) return 0;
    uint32_t gen = __atomic_load_n(&s->limits_gen, __ATOMIC_ACQUIRE);
    if (gen == g.limits_seen[dev]) return 0;
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != LEDGER_SLOT_LIVE || s->pid != g.self_pid ||
        s->start_time != g.self_start)
        return 0;   /* no longer this process's (a ledger re-initialised): the next follow finds it */
    g.limits_seen[dev] = gen;
    /* the ceilings come from this process's own environment and the driver, never from the ledger */
    int from = LEDGER_LIMIT_FROM_START;
    size_t lim = (size_t)vram__ledger_limit_in_force(s, g.limit_start[dev], g.limit_max, g.card[dev], &from);
    int src = from == LEDGER_LIMIT_FROM_SET ? SHIM_LIMIT_SET : from == LEDGER_LIMIT_FROM_CAP ? SHIM_LIMIT_CAP
                                                                                           : g.limit_start_src[dev];
    int changed = lim != g.limit[dev];
    __atomic_store_n(&g.limit[dev], lim, __ATOMIC_RELAXED);
    g.limit_src[dev] = src;
    __atomic_store_n(&g.group_limit, (size_t)vram__ledger_group_limit_in_force(s, g.group_limit_start, g.group_limit_max),
                     __ATOMIC_RELAXED);
    if (changed && g.log) {
        char was[32], now[32];
        vram__format_bytes(now, sizeof now, lim);
        vram__format_bytes(was, sizeof was, g.used[dev]);
        fprintf(stderr, "vram: the limit of device %d is now %s (%s; in use %s)\n", dev, lim ? now : "none",
                src == SHIM_LIMIT_SET ? "set by vram limit"
                : src == SHIM_LIMIT_CAP ? "lowered while the group's guaranteed members need room"
                                        : "the start limit",
                was);
    }
    return changed;
}

void shim_limits_follow(int dev) {
    if (dev < 0 || !__atomic_load_n(&g.slot_tried[dev], __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&g.mu);
    int changed = shim_limits_follow_unsafe(dev);
    pthread_mutex_unlock(&g.mu);
    if (changed) shim_balloon_fit(dev);
}

/* ---- refusals -------------------------------------------------------------------------------------- */

static void shim_log_refusal(const char *fn, int dev, size_t size, size_t used, size_t limit, int src) {
    char req[32], in_use[32], lim[32], from[64];
    vram__format_bytes(req, sizeof req, size);
    vram__format_bytes(in_use, sizeof in_use, used);
    vram__format_bytes(lim, sizeof lim, limit);
    if (src == SHIM_LIMIT_DEVICE) snprintf(from, sizeof from, "VRAM_LIMIT_%d", dev);
    else if (src == SHIM_LIMIT_SET) snprintf(from, sizeof from, "vram limit");
    else if (src == SHIM_LIMIT_CAP) snprintf(from, sizeof from, "the group's guaranteed members");
    else snprintf(from, sizeof from, "VRAM_LIMIT");
    fprintf(stderr,
            "vram: %s of %s (%zu bytes) on device %d refused: the vram limit would be exceeded "
            "(in use %s = %zu bytes, limit %s = %zu bytes, from %s); returning "
            "CUDA_ERROR_OUT_OF_MEMORY\n",
            fn, req, size, dev, in_use, used, lim, limit, from);
}

/* Says (VRAM_LOG=1) why a reservation was refused: a malformed limit, the limit, the group limit. */
static void shim_say_refusal(const char *fn, int dev, size_t size, size_t used, int over, int over_group,
                             uint64_t total) {
    if (!g.log) return;
    if (over && g.malformed[0])
        fprintf(stderr, "vram: %s of %zu bytes on device %d refused: %s; returning "
                "CUDA_ERROR_OUT_OF_MEMORY\n", fn, size, dev, g.malformed);
    else if (over)
        shim_log_refusal(fn, dev, size, used, g.limit[dev], g.limit_src[dev]);
    if (over_group) shim_log_group_refusal(fn, dev, size, total);
}

/* Reserves `size` bytes on `dev` against its limit and, with a group limit, against the group's
 * total on that device (group.c: the slow path, two scans of the ledger per allocation (the sum, the rebalance), taken only
 * when a group limit is set). 0 on success, -1 (logged when `say`) when a limit would be passed.
 * dev -1 is not accounted. Without a slot in the ledger (unavailable or full) the group limit still
 * holds, for this process's own usage (it fails closed, never open). */
int shim_reserve(const char *fn, int dev, size_t size, int say) {
    if (dev < 0) return 0;
    shim_register(dev);
    shim_limits_follow(dev);   /* a limit or group budget set from outside, before the group is read */
    shim_balloon_start(dev);
    shim_note_ledger_lost();
    uint64_t total = 0;
    int grouped = shim_group_begin(dev, &total);
    /* a guaranteed member (the default) is held to what the group's guaranteed members use, an
     * opportunistic one to the whole group's use (group.c); the rebalance first, so that this
     * process's own group cap is current when it is applied below */
    if (grouped && g.priority != LEDGER_PRIORITY_OPPORTUNISTIC && total != UINT64_MAX)
        total = shim_group_rebalance_locked(dev);
    else if (grouped && total != UINT64_MAX)
        (void)shim_group_rebalance_locked(dev);
    pthread_mutex_lock(&g.mu);
    int moved = shim_limits_follow_unsafe(dev);
    size_t used = g.used[dev], limit = g.limit[dev], group_limit = g.group_limit;
    if (group_limit && !grouped) total = used;
    int over = (limit && (size > limit || used > limit - size)) || g.malformed[0];
    int over_group = !over && group_limit && (size > group_limit || total > group_limit - size);
    if (!over && !over_group) {
        g.used[dev] = used + size;
        shim_publish_unsafe(dev);
    }
    pthread_mutex_unlock(&g.mu);
    /* a guaranteed member that took memory: its group's opportunistic members get less room */
    if (grouped && !over && !over_group && g.priority != LEDGER_PRIORITY_OPPORTUNISTIC &&
        __atomic_load_n(&g.saw_opportunistic, __ATOMIC_RELAXED))
        (void)shim_group_rebalance_locked(dev);
    if (grouped) shim_group_end();
    if (moved) shim_balloon_fit(dev);
    if (say) shim_say_refusal(fn, dev, size, used, over, over_group, total);
    if (over || over_group) return -1;
    shim_balloon_make_room(dev, size);
    return 0;
}

void shim_unreserve(int dev, size_t size) {
    if (dev < 0) return;
    pthread_mutex_lock(&g.mu);
    g.used[dev] = g.used[dev] > size ? g.used[dev] - size : 0;
    shim_publish_unsafe(dev);
    pthread_mutex_unlock(&g.mu);
    shim_note_ledger_lost();
    shim_balloon_refill(dev);
}

/* Records a successful allocation whose bytes were reserved; -1 when the table cannot hold it
 * (the reservation is then given back). */
static int shim_record(int kind, unsigned long long key, size_t size, int dev) {
    if (dev < 0) return 0;
    shim_entry e = { .key = key, .size = size, .dev = dev, .kind = kind };
    pthread_mutex_lock(&g.mu);
    int rc = shim_insert_unsafe(&e);
    pthread_mutex_unlock(&g.mu);
    if (rc != 0) shim_unreserve(dev, size);
    return rc;
}

/* Subtracts bytes the driver freed from dev's use, then refills the balloon (to the limit in force,
 * which a limit set from outside may have moved) and gives a guaranteed member's group its room back. */
void shim_uncount(int dev, size_t size) {
    if (dev < 0) return;
    pthread_mutex_lock(&g.mu);
    g.used[dev] = g.used[dev] > size ? g.used[dev] - size : 0;
    shim_publish_unsafe(dev);
    int moved = shim_limits_follow_unsafe(dev);
    pthread_mutex_unlock(&g.mu);
    shim_note_ledger_lost();
    if (moved) shim_balloon_fit(dev);
    else shim_balloon_refill(dev);
    shim_group_freed(dev);
}

void shim_adjust(int dev, long long delta) {
    if (dev < 0 || delta == 0) return;
    if (delta < 0) {
        shim_uncount(dev, (size_t)-delta);
        return;
    }
    shim_register(dev);
    pthread_mutex_lock(&g.mu);
    g.used[dev] = (size_t)delta > SIZE_MAX - g.used[dev] ? SIZE_MAX : g.used[dev] + (size_t)delta;
    shim_publish_unsafe(dev);
    pthread_mutex_unlock(&g.mu);
    shim_note_ledger_lost();
}

int shim_over_limit(int dev) {
    if (dev < 0) return 0;
    pthread_mutex_lock(&g.mu);
    int over = g.limit[dev] && g.used[dev] > g.limit[dev];
    pthread_mutex_unlock(&g.mu);
    return over;
}

/* Takes the entry of a pointer or handle being freed out of the table (before the driver call, so
 * that the address, once freed, can be handed out and recorded again); its bytes stay in use until
 * the driver freed them (shim_freed), so that no other process or thread is granted them while
 * the memory is still held. 1 when there was one (copied to *out), 0 for memory not counted. */
int shim_forget(int kind, unsigned long long key, shim_entry *out) {
    int found = 0;
    pthread_mutex_lock(&g.mu);
    shim_entry *e = shim_find_unsafe(key, kind);
    if (e) {
        *out = *e;
        shim_remove_unsafe(e);
        found = 1;
    }
    pthread_mutex_unlock(&g.mu);
    return found;
}

/* After the driver's free of a forgotten entry: r success gives its bytes back; a refusal puts the
 * entry back in the table (its bytes were never given back; when the table cannot hold it again,
 * they are: an entry not in the table could never be freed). */
void shim_freed(CUresult r, const shim_entry *e) {
    if (r == CUDA_SUCCESS) {
        shim_uncount(e->dev, e->size);
        return;
    }
    pthread_mutex_lock(&g.mu);
    int rc = shim_insert_unsafe(e);
    pthread_mutex_unlock(&g.mu);
    if (rc != 0) shim_uncount(e->dev, e->size);
}

/* The memory of a record that cannot be kept goes back to the driver, with the kind's own call. */
static void shim_give_back(int kind, unsigned long long value) {
    if (kind == SHIM_KIND_ARRAY) {
        pfn_cuArrayDestroy destroy = SHIM_REAL(cuArrayDestroy);
        if (destroy) destroy((CUarray)(uintptr_t)value);
    } else if (kind == SHIM_KIND_MIPMAP) {
        pfn_cuMipmappedArrayDestroy destroy = SHIM_REAL(cuMipmappedArrayDestroy);
        if (destroy) destroy((CUmipmappedArray)(uintptr_t)value);
    } else {
        pfn_cuMemFree_v2 real_free = SHIM_REAL(cuMemFree_v2);
        if (real_free) real_free(value);
    }
}

/* The common tail of an allocation: settles the reservation after the driver answered; when the shim
 * cannot record it, the memory goes back. `value` is where the driver wrote the key (NULL when dev is
 * -1: nothing is recorded then). */
CUresult shim_settle(CUresult r, int kind, unsigned long long *value, size_t size, int dev) {
    if (r != CUDA_SUCCESS) {
        shim_unreserve(dev, size);
        return r;
    }
    if (dev >= 0 && shim_record(kind, *value, size, dev) != 0) {
        shim_give_back(kind, *value);
        *value = 0;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

/* The program's view of its device `dev` (-1: none), shared by cuMemGetInfo and NVML. *total and
 * *free_bytes come in as the card's numbers (SIZE_MAX where not known) and are narrowed: with a
 * limit, total = the limit (the card when smaller) and free = total - in use (0 when in use passes
 * it, never an unsigned wrap), never more than the card's free plus the balloon (preallocated memory
 * is free to the program, not to the driver); with a group limit, free is at most `group_free`, what
 * the group has left on the device (SIZE_MAX: no group limit). Returns the SHIM_VIEW_* that applied. */
int shim_view(int dev, size_t group_free, size_t *total, size_t *free_bytes) {
    int applied = 0;
    size_t limit = 0, used = 0, balloon = 0;
    if (dev >= 0) {
        shim_limits_follow(dev);
        pthread_mutex_lock(&g.mu);
        limit = g.limit[dev];
        used = g.used[dev];
        pthread_mutex_unlock(&g.mu);
        balloon = shim_balloon_bytes(dev);
    }
    if (limit) {
        size_t t = *total < limit ? *total : limit;
        size_t f = used >= t ? 0 : t - used;
        size_t room = *free_bytes > SIZE_MAX - balloon ? SIZE_MAX : *free_bytes + balloon;
        *total = t;
        *free_bytes = room < f ? room : f;
        applied |= SHIM_VIEW_LIMIT;
    }
    if (group_free != SIZE_MAX) {
        if (group_free < *free_bytes) *free_bytes = group_free;
        applied |= SHIM_VIEW_GROUP;
    }
    return applied;
}
