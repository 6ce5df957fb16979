/*
 * group.c: the ledger glue (ledger.h; read by `vram top`) and group limits.
 *
 * The ledger. At the first accounted call on a device the process claims a slot for (itself, that
 * device) in the per-machine ledger: pid, start time, the device's UUID (shim_device_uuid), its
 * limit, VRAM_GROUP, the group limit and /proc/self/comm. Every change of a device's usage stores
 * in_use and peak into the process's own slot (shim_publish_unsafe: two relaxed atomic stores under
 * g.mu; no ledger lock). The slots are freed at exit (a destructor); a process killed before that
 * is reclaimed by whoever scans the ledger. Each slot is mirrored in the process's shadow
 * (vram__ledger_shadow_create: a sealed memfd no one can shrink, published with the same stores), from
 * which a ledger made anew after a truncation or deletion recovers the process's slot and usage
 * even when it makes no call. After fork the child starts with no slot and nothing counted (env.c).
 * A ledger that cannot be opened (bad permissions, full) is said on stderr with VRAM_LOG=1 or a
 * group limit, and the program runs on; a ledger moved from its default place taken by another user
 * (ledger.h, "Where") is said with VRAM_LOG=1.
 *
 * Group limits (VRAM_GROUP=NAME, VRAM_GROUP_LIMIT=SIZE). An allocation on a device is refused
 * (CUDA_ERROR_OUT_OF_MEMORY; with VRAM_LOG=1 a line naming the group limit) when the bytes in use
 * of the group's live slots on that device's UUID plus the request would pass VRAM_GROUP_LIMIT.
 * The slow path (shim_group_begin): under ledger_mu and the ledger's flock the ledger's slots are
 * scanned (1024 slots, a /proc/<pid>/stat read per live slot), then the reservation is published
 * into the slot (limits.c) before the lock is released (shim_group_end), so that processes of the
 * group cannot pass the limit together. Frees need no lock (usage only falls). Each process
 * enforces its own VRAM_GROUP_LIMIT. When the ledger file was rebuilt, deleted or replaced by
 * another process, or truncated under this one, the slow path first follows the file now at the
 * path (shim_follow_locked: maps it, finds or claims this process's slots, publishes its usage);
 * meanwhile whoever made the new file carried this process's slot over from the old one
 * (ledger.h, "Faults to the file"), so a member that makes no call is still counted. With a group
 * limit, cuMemGetInfo's and NVML's free is at most what the group has left on the device
 * (shim_group_free). The slots of a process put to sleep (`vram sleep`, an idle watcher) count
 * nothing in its group's sums while it sleeps (ledger.h); a waker that moved it to another card wrote
 * that card's UUID into its slot, which the process takes as its own when it next follows the ledger
 * (shim_slot_card_unsafe). With an idle watcher (VRAM_IDLE_WATCHER) each slot names the watcher and
 * the process's activity page (activity.c) when it is claimed.
 *
 * Groups that rebalance (VRAM_PRIORITY; vram__ledger_group_rebalance_locked). The policy, in full: a
 * guaranteed member (the default) may use up to budget - what the group's other guaranteed members
 * use on the card (opportunistic members do not count against it); an opportunistic member's limit
 * is what is left, budget - the guaranteed members' use - the other opportunistic members' use,
 * while the guaranteed members use anything, and its own limit again once they use nothing; an
 * opportunistic member's allocation is also held to the whole group's use. Under the group's
 * lock, each grouped allocation rebalances first (so the allocating member's own cap is current), a
 * guaranteed member rebalances again after it took memory, and after each of its frees while the
 * group had opportunistic members: their caps are written into their slots (group_cap, limits_gen
 * bumped) and each applies its own at its next accounted call (limits.c), refusing, or overflowing
 * to host memory, until its frees bring it under; with preallocation its balloon gives the
 * difference back to the card. The budget is the group limit in force (VRAM_GROUP_LIMIT, or one set
 * by `vram limit --group`, which a member joining the group takes from the others' slots).
 *
 * Invariants: g.slot[d] is this process's slot of device d in the mapped ledger or NULL; it is
 * written under ledger_mu and g.mu and read under g.mu; the counters are written only into a slot
 * that is still this process's (state, pid, start time). Locks: ledger_mu, then the ledger's
 * flock, then g.mu; never ledger_mu together with balloon_mu.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim.h"

/* ---- the process's slots ----------------------------------------------------------------------- */

/* Publishes g.used[dev] (and the peak) into this process's slot: two stores, no lock. Caller holds g.mu. */
void shim_publish_unsafe(int dev) {
    if (g.used[dev] > g.peak[dev]) g.peak[dev] = g.used[dev];
    ledger_slot *s = g.slot[dev];
    if (!s) return;
    if (g.shadow) {
        __atomic_store_n(&g.shadow[dev].in_use, (uint64_t)g.used[dev], __ATOMIC_RELAXED);
        __atomic_store_n(&g.shadow[dev].peak, (uint64_t)g.peak[dev], __ATOMIC_RELAXED);
    }
    /* a ledger re-initialised under this process may have given the place to another process: never
     * write its counters (shim_follow_locked finds this process's slot again) */
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != LEDGER_SLOT_LIVE || s->pid != g.self_pid ||
        s->start_time != g.self_start)
        return;
    __atomic_store_n(&s->in_use, (uint64_t)g.used[dev], __ATOMIC_RELAXED);
    __atomic_store_n(&s->peak, (uint64_t)g.peak[dev], __ATOMIC_RELAXED);
    __atomic_store_n(&s->overflow_bytes, (uint64_t)g.overflow_bytes[dev], __ATOMIC_RELAXED);
}

/* Copies this process's slot of `dev` into its shadow (vram__ledger_shadow_create), the state last, or
 * clears the shadow's slot when s is NULL. Caller holds g.mu. */
static void shim_shadow_set_unsafe(int dev, const ledger_slot *s) {
    if (!g.shadow) return;
    ledger_slot *t = &g.shadow[dev];
    __atomic_store_n(&t->state, 0, __ATOMIC_RELEASE);
    if (!s) return;
    ledger_slot c = *s;
    c.state = 0;
    c.reserved0 = (uint32_t)(s - g.ledger.slots) + 1;   /* its place in the ledger, for a recovery */
    memcpy(t, &c, sizeof c);
    __atomic_store_n(&t->state, LEDGER_SLOT_LIVE, __ATOMIC_RELEASE);
}
/* The overflow cap of device dev (overflow.c): VRAM_OVERFLOW_MAX, else the device's start limit, else
 * its card; 0 with overflow off. */
static size_t shim_overflow_cap(int dev) {
    if (!g.overflow) return 0;
    if (g.overflow_max_set) return g.overflow_max;
    return g.limit_start[dev] ? g.limit_start[dev] : g.card[dev];
}

/* A slot just claimed names the idle watcher and the activity page, when there is one (activity.c),
 * and carries what the limits that move need (ledger.h): the priority, the ceilings, the card's size,
 * the overflow cap, and the group budget set from outside that its group's members carry. Caller
 * holds the ledger lock. */
static void shim_slot_watch(ledger_slot *s) {
    if (!s) return;
    int dev = s->device;
    s->priority = (uint32_t)g.priority;
    s->limit_max = g.limit_max;
    s->group_limit_max = g.group_limit_max;
    s->card_bytes = dev >= 0 && dev < SHIM_MAX_DEVICES ? g.card[dev] : 0;
    s->overflow_max = dev >= 0 && dev < SHIM_MAX_DEVICES ? shim_overflow_cap(dev) : 0;
    if (g.group[0]) {
        uint64_t budget = vram__ledger_group_budget_set_locked(&g.ledger, g.group);
        if (budget) {
            s->group_limit_set = budget;
            vram__ledger_gen_bump(s);
        }
    }
    if (!g.watcher_pid) return;
    s->watcher_pid = g.watcher_pid;
    s->watcher_start = g.watcher_start;
    s->idle_ns = g.idle_ns;
    s->activity_fd = g.activity ? g.activity_fd : -1;
}

/* The card of this process's device dev as its slot names it: a waker that moved the process to
 * another card (vram wake --device) wrote that card's UUID there. Caller holds ledger_mu, the ledger
 * lock and g.mu; s is this process's slot of dev. */
static void shim_slot_card_unsafe(int dev, const ledger_slot *s) {
    char uuid[LEDGER_UUID_LEN];
    vram__ledger_copy_name(uuid, sizeof uuid, s->uuid, sizeof s->uuid);
    if (uuid[0] && strcmp(uuid, g.uuid[dev]) != 0) memcpy(g.uuid[dev], uuid, sizeof uuid);
}

/* ---- a ledger file truncated under the mapping ---------------------------------------------------- *
 *
 * The ledger is a shared mapping of a file any process of the user may truncate; a store or load past
 * its new end raises SIGBUS, which would kill the program over a bookkeeping file. The handler
 * replaces the whole mapping with private memory and returns: the access is made again and succeeds,
 * and the process goes on: one with a group limit reads the file at the path again before its next
 * allocation is decided (shim_follow_locked; the allocation is refused when the file keeps being
 * truncated), one without stays unlisted; meanwhile its shadow keeps it counted. A SIGBUS anywhere
 * else goes to the handler the program had (or the default action). */
static struct sigaction shim_old_sigbus;

static void shim_sigbus(int sig, siginfo_t *si, void *uctx) {
    char *map = g.ledger.map, *addr = si ? (char *)si->si_addr : NULL;
    size_t size = g.ledger.size;
    if (map != NULL && addr >= map && addr < map + size &&
        mmap(map, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
        g.ledger_lost = 1;
        return;
    }
    if (shim_old_sigbus.sa_flags & SA_SIGINFO) {
        shim_old_sigbus.sa_sigaction(sig, si, uctx);
    } else if (shim_old_sigbus.sa_handler != SIG_DFL && shim_old_sigbus.sa_handler != SIG_IGN) {
        shim_old_sigbus.sa_handler(sig);
    } else {
        signal(SIGBUS, SIG_DFL);      /* the access is made again on return: the default action then */
    }
}

/* Says once, outside the handler, that the ledger was lost. */
void shim_note_ledger_lost(void) {
    if (!g.ledger_lost || __atomic_exchange_n(&g.ledger_lost_said, 1, __ATOMIC_RELAXED)) return;
    fprintf(stderr, "vram: the ledger file was truncated under this process: %s\n",
            g.group_limit ? "it reads the file at the path again at its next allocation"
                          : "it is no longer listed by vram top");
}

static void shim_sigbus_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = shim_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &shim_old_sigbus);
}

/* Opens the ledger once (caller holds ledger_mu); 0 when it is open. */
static int shim_ledger_ready_locked(void) {
    if (g.ledger_state) return g.ledger_state == 1 ? 0 : -1;
    char err[512];
    g.self_pid = (int)getpid();
    if (vram__ledger_start_time(g.self_pid, &g.self_start) != 0 || vram__ledger_open(&g.ledger, err, sizeof err) != 0) {
        if (!g.self_start) snprintf(err, sizeof err, "cannot read /proc/%d/stat", g.self_pid);
        g.ledger_state = -1;
        if (g.log || g.group_limit)
            fprintf(stderr, "vram: the ledger is unavailable (%s): this process is not listed by vram top%s\n",
                    err, g.group_limit ? " and its group limit holds for its own usage alone" : "");
        return -1;
    }
    if (g.ledger.rebuilt[0] && g.log) fprintf(stderr, "vram: the ledger %s\n", g.ledger.rebuilt);
    if (g.ledger.note[0] && g.log) fprintf(stderr, "vram: %s\n", g.ledger.note);
    shim_sigbus_install();
    g.shadow_fd = vram__ledger_shadow_create(&g.ledger);
    if (g.shadow_fd >= 0) {
        void *m = mmap(NULL, SHIM_LEDGER_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, g.shadow_fd, 0);
        if (m != MAP_FAILED) {
            g.shadow_map = m;
            g.shadow = (ledger_slot *)((char *)m + sizeof(ledger_header));
        }
    }
    __atomic_store_n(&g.ledger_state, 1, __ATOMIC_RELEASE);
    return 0;
}

/* Caller holds ledger_mu and the ledger lock (ledger_state 1). When the ledger file at the path is no
 * longer the one mapped (deleted, replaced, rebuilt by another process) or the mapping was lost to a
 * truncation, maps the current file; and every slot of this process that is no longer its own there
 * (not carried over, or wiped by a re-initialised file) is found or claimed again, with the current
 * usage published, so the group's budget counts this process again. 0, or -1 when the file at the
 * path cannot be opened (the old mapping is kept; it may miss what other members hold now). g.mu is
 * held across the swap of the mapping (slot pointers change), so a free waits for a recovery's
 * search of /proc while it runs: rare, after a fault only. */
static int shim_follow_locked(void) {
    char err[512];
    pthread_mutex_lock(&g.mu);
    int lost = g.ledger_lost;
    int r = vram__ledger_follow_locked(&g.ledger, lost, err, sizeof err);
    if (r < 0) {
        pthread_mutex_unlock(&g.mu);
        static int said;   /* under ledger_mu */
        if (!said && (g.log || g.group_limit)) {
            said = 1;
            fprintf(stderr, "vram: the ledger was replaced and the new one cannot be opened (%s): this process's "
                    "allocations under its group limit are refused until it can be\n", err);
        }
        return -1;
    }
    if (r > 0) {
        g.ledger_lost = 0;
        __atomic_store_n(&g.ledger_lost_said, 0, __ATOMIC_RELAXED);
    }
    int reclaimed = 0;
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        ledger_slot *s = g.slot[d];
        if (!s && !g.slot_tried[d]) continue;
        if (!s && r == 0) continue;   /* the ledger was full when this device came: it stays unlisted */
        if (s && r == 0 && s->state == LEDGER_SLOT_LIVE && s->pid == g.self_pid && s->start_time == g.self_start &&
            s->device == d) {
            shim_slot_card_unsafe(d, s);
            continue;
        }
        s = vram__ledger_find_locked(&g.ledger, g.self_pid, g.self_start, d);
        if (s) {
            shim_slot_card_unsafe(d, s);
        } else {
            s = vram__ledger_claim_locked(&g.ledger, g.self_pid, g.self_start, d, g.uuid[d], g.group, g.command,
                                    g.limit[d], g.group_limit);
            shim_slot_watch(s);
        }
        g.slot[d] = s;
        shim_sleep_slot_unsafe();
        g.limits_seen[d] = 0;   /* a slot found or claimed anew: its limits are read again */
        if (s && s->limits_gen == 0) vram__ledger_gen_bump(s);
        shim_shadow_set_unsafe(d, s);
        if (s) shim_publish_unsafe(d);
        reclaimed++;
    }
    pthread_mutex_unlock(&g.mu);
    if (reclaimed && g.log)
        fprintf(stderr, "vram: the ledger file was %s: this process follows the file now at %s and is listed there again\n",
                r > 0 ? "replaced" : "re-initialised", g.ledger.path);
    return 0;
}

/* Registers this process's slot for `dev` at the first accounted call on it (slow path, once). */
void shim_register(int dev) {
    if (__atomic_load_n(&g.slot_tried[dev], __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&g.ledger_mu);
    if (!g.slot_tried[dev] && shim_ledger_ready_locked() == 0) {
        char comm[LEDGER_NAME_LEN] = "?";
        FILE *f = fopen("/proc/self/comm", "re");
        if (f) {   /* the name and one line feed; a line feed in the name stays (vram__ledger_copy_name shows '?') */
            size_t got = fread(comm, 1, sizeof comm - 1, f);
            if (got) {
                comm[got] = '\0';
                if (comm[got - 1] == '\n') comm[got - 1] = '\0';
            }
            fclose(f);
        }
        memcpy(g.command, comm, sizeof comm);
        shim_device_uuid(dev, g.uuid[dev], sizeof g.uuid[dev]);
        size_t card = 0;
        if (g.real.cuDeviceTotalMem_v2 && g.real.cuDeviceTotalMem_v2(&card, dev) == CUDA_SUCCESS) g.card[dev] = card;
        if (g.watcher_pid) shim_activity_start();   /* once: the page the watcher reads */
        vram__ledger_lock(&g.ledger);
        ledger_slot *s = vram__ledger_claim_locked(&g.ledger, g.self_pid, g.self_start, dev, g.uuid[dev], g.group,
                                             comm, g.limit[dev], g.group_limit);
        shim_slot_watch(s);
        pthread_mutex_lock(&g.mu);
        g.slot[dev] = s;
        shim_sleep_slot_unsafe();
        g.limits_seen[dev] = 0;
        shim_shadow_set_unsafe(dev, s);
        if (s) shim_publish_unsafe(dev);
        pthread_mutex_unlock(&g.mu);
        vram__ledger_unlock(&g.ledger);
        if (!s && (g.log || g.group_limit))
            fprintf(stderr, "vram: the ledger is full (%u slots): device %d of this process is not listed "
                    "by vram top%s\n", LEDGER_SLOTS, dev,
                    g.group_limit ? " and its group limit holds for its own usage alone" : "");
    }
    __atomic_store_n(&g.slot_tried[dev], 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g.ledger_mu);
}

/* At exit: the slots are freed (a process killed before this is reclaimed by whoever scans). */
__attribute__((destructor)) static void shim_unregister(void) {
    pthread_mutex_lock(&g.ledger_mu);
    if (g.ledger_state == 1 && g.self_pid == (int)getpid()) {
        vram__ledger_lock(&g.ledger);
        pthread_mutex_lock(&g.mu);
        for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
            if (g.slot[d]) vram__ledger_release_locked(g.slot[d], g.self_pid, g.self_start);
            g.slot[d] = NULL;
            shim_shadow_set_unsafe(d, NULL);
        }
        shim_sleep_slot_unsafe();
        pthread_mutex_unlock(&g.mu);
        vram__ledger_unlock(&g.ledger);
    }
    pthread_mutex_unlock(&g.ledger_mu);
}

void shim_log_group_refusal(const char *fn, int dev, size_t size, uint64_t total) {
    char req[32], in_use[32], lim[32];
    vram__format_bytes(req, sizeof req, size);
    vram__format_bytes(in_use, sizeof in_use, (size_t)total);
    vram__format_bytes(lim, sizeof lim, g.group_limit);
    fprintf(stderr,
            "vram: %s of %s (%zu bytes) on device %d refused: the vram group limit would be exceeded "
            "(group %s uses %s = %llu bytes on %s, group limit %s = %zu bytes, from VRAM_GROUP_LIMIT); "
            "returning CUDA_ERROR_OUT_OF_MEMORY\n",
            fn, req, size, dev, g.group, in_use, (unsigned long long)total, g.uuid[dev], lim, g.group_limit);
}

/* ---- group limits ------------------------------------------------------------------------------ */

int shim_group_begin(int dev, uint64_t *total) {
    if (!__atomic_load_n(&g.group_limit, __ATOMIC_RELAXED) || __atomic_load_n(&g.ledger_state, __ATOMIC_ACQUIRE) != 1) return 0;
    int grouped = 0;
    pthread_mutex_lock(&g.ledger_mu);
    vram__ledger_lock(&g.ledger);
    /* A truncation while following or scanning (the rest reads as zeros) may hide members: the
     * file now at the path is read again, and the allocation refused when it keeps being
     * truncated; never this process's own usage alone, which would forget the others. */
    for (int tries = 0;; tries++) {
        if (shim_follow_locked() == 0 && !g.ledger_lost) {
            grouped = g.slot[dev] != NULL;   /* none: the ledger was full (own usage, limits.c) */
            if (!grouped) break;
            *total = vram__ledger_group_total_locked(&g.ledger, g.group, g.uuid[dev]);
            if (!g.ledger_lost) break;
        }
        if (tries == 2) {
            grouped = 1;
            *total = UINT64_MAX;
            break;
        }
    }
    if (!grouped) shim_group_end();
    return grouped;
}

uint64_t shim_group_rebalance_locked(int dev) {
    uint64_t budget = __atomic_load_n(&g.group_limit, __ATOMIC_RELAXED);
    if (!g.group[0] || !g.slot[dev] || !budget || g.ledger_lost) return UINT64_MAX;
    int opportunistic = 0;
    uint64_t used = vram__ledger_group_rebalance_locked(&g.ledger, g.group, g.uuid[dev], budget, &opportunistic);
    __atomic_store_n(&g.saw_opportunistic, opportunistic > 0, __ATOMIC_RELAXED);
    return g.ledger_lost ? UINT64_MAX : used;
}

void shim_group_freed(int dev) {
    if (dev < 0 || g.priority == LEDGER_PRIORITY_OPPORTUNISTIC || !__atomic_load_n(&g.saw_opportunistic, __ATOMIC_RELAXED))
        return;
    uint64_t total = 0;
    if (!shim_group_begin(dev, &total)) return;
    if (total != UINT64_MAX) (void)shim_group_rebalance_locked(dev);
    shim_group_end();
}

void shim_group_end(void) {
    vram__ledger_unlock(&g.ledger);
    pthread_mutex_unlock(&g.ledger_mu);
}

/* What the group may still take on the device of UUID `uuid` (its limit minus its members' use there,
 * from the ledger under its lock), or SIZE_MAX without a group limit or a ledger. */
size_t shim_group_free_uuid(const char *uuid) {
    if (!g.group_limit) return SIZE_MAX;
    size_t left = SIZE_MAX;
    pthread_mutex_lock(&g.ledger_mu);
    if (shim_ledger_ready_locked() == 0) {
        vram__ledger_lock(&g.ledger);
        /* a ledger that cannot be followed or keeps faulting reports nothing left (as allocations are refused) */
        int ok = shim_follow_locked() == 0 && !g.ledger_lost;
        uint64_t total = ok ? vram__ledger_group_total_locked(&g.ledger, g.group, uuid) : UINT64_MAX;
        if (g.ledger_lost) total = UINT64_MAX;
        vram__ledger_unlock(&g.ledger);
        left = total >= g.group_limit ? 0 : (size_t)(g.group_limit - total);
    }
    pthread_mutex_unlock(&g.ledger_mu);
    return left;
}

/* The same for the program's device `dev` (-1: none), whose slot it registers: a member that only
 * asks is still listed. */
size_t shim_group_free(int dev) {
    if (dev < 0 || !g.group_limit) return SIZE_MAX;
    shim_register(dev);
    if (!g.slot[dev]) return SIZE_MAX;
    return shim_group_free_uuid(g.uuid[dev]);
}
