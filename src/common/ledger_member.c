/*
 * ledger_member.c: a libvram process in the ledger (ledger_member.h says what, the two ways to be a
 * member, the faults and the locks): its slots claimed, found again after a fault, published; the gate
 * of its cards' budgets under a group (the preload library's policy, ledger.c's rebalance); the wait
 * for a change of its limits (a shared futex on the slot's limits_gen, woken by every setter:
 * vram__ledger_gen_bump) and the limits in force read back (vram__ledger_limit_in_force).
 *
 * Invariants: card[i].slot is NULL or points into m->l's current mapping, and is read or written only
 * under mu and the ledger lock, after member_lock made the mapping current; own, the slot's in_use is
 * card[i].held whenever the lock is released. Locks: mu, then the ledger's flock (ledger.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "common/ledger_member.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t member_sat_add(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

void vram__ledger_member_init(ledger_member *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->l.fd = m->l.lock_fd = -1;
}

/* /proc/self/comm, as the preload library lists a process. */
static void member_command(char out[LEDGER_NAME_LEN]) {
    snprintf(out, LEDGER_NAME_LEN, "?");
    FILE *f = fopen("/proc/self/comm", "re");
    if (!f) return;
    size_t got = fread(out, 1, LEDGER_NAME_LEN - 1, f);
    fclose(f);
    if (got == 0) {
        snprintf(out, LEDGER_NAME_LEN, "?");
        return;
    }
    out[got] = '\0';
    if (out[got - 1] == '\n') out[got - 1] = '\0';
}

/* Own: the counters of card i into its slot (mu and the lock held, the slot this process's). */
static void member_publish(ledger_member_card *c) {
    if (c->held > c->peak) c->peak = c->held;
    if (!c->slot) return;
    __atomic_store_n(&c->slot->in_use, c->held, __ATOMIC_RELAXED);
    __atomic_store_n(&c->slot->peak, c->peak, __ATOMIC_RELAXED);
    __atomic_store_n(&c->slot->overflow_bytes, c->overflow, __ATOMIC_RELAXED);
}

/* Own: what a slot just claimed carries besides vram__ledger_claim_locked's fields (as the preload library's
 * shim_slot_watch): priority, ceilings, the card's size, the overflow's cap, the group's budget set
 * from outside that its members carry, and the counters. */
static void member_slot_fill(ledger_member *m, ledger_member_card *c, ledger_slot *s) {
    s->priority = (uint32_t)m->priority;
    /* the pools are sized at start (a reserved range of twice the limit): a limit set from outside may
     * lower it and raise it back, not above, so the slot says so to `vram limit` and `vram top` */
    s->limit_max = c->start_limit && (!m->limit_max || c->start_limit < m->limit_max) ? c->start_limit : m->limit_max;
    s->group_limit_max = m->group_limit_max;
    s->card_bytes = c->card_bytes;
    s->overflow_max = c->overflow_max;
    if (m->group[0]) {
        uint64_t budget = vram__ledger_group_budget_set_locked(&m->l, m->group);
        if (budget) s->group_limit_set = budget;
    }
    vram__ledger_gen_bump(s);
}

/* Under mu: takes the ledger lock, follows the file at the path when it is no longer the one mapped
 * (or was cut short), and makes each used card's slot current: own, this process's (found, else
 * claimed; published), follow, the preload library's when it has one. 1 with the lock held; 0 without
 * it (not open, or the file at the path cannot be opened: the mapping may be stale). */
static int member_lock(ledger_member *m) {
    if (!m->open) return 0;
    vram__ledger_lock(&m->l);
    char err[512];
    int r = vram__ledger_follow_locked(&m->l, 0, err, sizeof err);
    if (r < 0) {
        vram__ledger_unlock(&m->l);
        return 0;
    }
    for (int i = 0; i < LEDGER_MEMBER_CARDS; i++) {
        ledger_member_card *c = &m->card[i];
        if (!c->used) continue;
        ledger_slot *s = r == 0 ? c->slot : NULL;
        if (s && __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == LEDGER_SLOT_LIVE && s->pid == m->pid &&
            s->start_time == m->start && s->device == i)
            continue;
        s = vram__ledger_find_locked(&m->l, m->pid, m->start, i);
        if (!s && !m->follow) {
            s = vram__ledger_claim_locked(&m->l, m->pid, m->start, i, c->uuid, m->group, m->command, c->start_limit,
                                    m->group_limit);
            if (s) {   /* after a fault, what was set from outside survives in this process's memory of it */
                s->limit_set = c->kept_set;
                s->group_cap = c->kept_cap;
                member_slot_fill(m, c, s);
                if (c->kept_gset) s->group_limit_set = c->kept_gset;
            }
        }
        if (s != c->slot) c->polled = 0;
        c->slot = s;
        if (!m->follow) member_publish(c);
    }
    return 1;
}

int vram__ledger_member_open(ledger_member *m) {
    pthread_mutex_lock(&m->mu);
    m->pid = (int)getpid();
    member_command(m->command);
    char err[sizeof m->said - 64];
    int rc = -1;
    if (vram__ledger_start_time(m->pid, &m->start) != 0) {
        snprintf(m->said, sizeof m->said, "cannot read /proc/%d/stat", m->pid);
    } else if (vram__ledger_open(&m->l, err, sizeof err) != 0) {
        snprintf(m->said, sizeof m->said, "%s", err);
    } else {
        m->open = 1;
        rc = 0;
        if (member_lock(m)) vram__ledger_unlock(&m->l);
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* Why card c's take of `bytes` is refused with the limit `lim` (from `src`) in force. */
static void member_refused_limit(ledger_member_card *c, uint64_t lim, int src, size_t bytes) {
    snprintf(c->refused, sizeof c->refused, "%s of %llu bytes is reached (the process holds %llu bytes on the card, "
             "%zu more were asked for)",
             src == LEDGER_LIMIT_FROM_CAP ? "the limit lowered while its group's guaranteed members need room"
                                          : "the limit set on this process from outside it (vram limit)",
             (unsigned long long)lim, (unsigned long long)c->held, bytes);
}

int vram__ledger_member_take(ledger_member *m, int i, size_t bytes) {
    if (i < 0 || i >= LEDGER_MEMBER_CARDS) return 1;
    ledger_member_card *c = &m->card[i];
    pthread_mutex_lock(&m->mu);
    uint64_t want = member_sat_add(c->held, bytes);
    int ok = 1, locked = member_lock(m);
    c->refused[0] = '\0';
    if (locked && c->slot) {
        ledger_slot *s = c->slot;
        uint64_t budget = m->group[0] ? vram__ledger_group_limit_in_force(s, m->group_limit, m->group_limit_max) : 0;
        uint64_t total = 0;
        if (budget) {
            /* the rebalance first, so that this member's own group cap is current below */
            int opportunistic = 0;
            uint64_t guaranteed = vram__ledger_group_rebalance_locked(&m->l, m->group, c->uuid, budget, &opportunistic);
            m->saw_opportunistic = opportunistic > 0;
            total = m->priority == LEDGER_PRIORITY_OPPORTUNISTIC ? vram__ledger_group_total_locked(&m->l, m->group, c->uuid)
                                                                 : guaranteed;
        }
        int src = LEDGER_LIMIT_FROM_START;
        uint64_t lim = vram__ledger_limit_in_force(s, 0, m->limit_max, c->card_bytes, &src);
        if (lim && want > lim) {
            ok = 0;
            member_refused_limit(c, lim, src, bytes);
        } else if (budget && (bytes > budget || total > budget - bytes)) {
            ok = 0;
            snprintf(c->refused, sizeof c->refused, "the budget of its group %s on the card (%llu bytes) is reached: "
                     "%s use %llu bytes and %zu more were asked for", m->group, (unsigned long long)budget,
                     m->priority == LEDGER_PRIORITY_OPPORTUNISTIC ? "its members" : "its guaranteed members",
                     (unsigned long long)total, bytes);
        }
        if (ok) {
            c->held = want;
            member_publish(c);
            if (budget && m->priority != LEDGER_PRIORITY_OPPORTUNISTIC && m->saw_opportunistic) {
                int opportunistic = 0;   /* the opportunistic members get less room */
                (void)vram__ledger_group_rebalance_locked(&m->l, m->group, c->uuid, budget, &opportunistic);
            }
        }
    } else if (m->open && !locked && m->group[0] && (m->group_limit || c->kept_gset)) {
        /* the file at the path was replaced and cannot be opened: the group's use is unknown, so its
         * allocations are refused until it can be (as the preload library does), never its own use alone */
        ok = 0;
        snprintf(c->refused, sizeof c->refused, "the ledger was replaced and the new one cannot be opened, so the "
                 "use of its group %s is unknown: its requests for more of the card are refused until it can be",
                 m->group);
    } else if (m->group_limit && want > m->group_limit) {
        /* unlisted (no ledger, or no slot left in it): the group's budget holds for this process's own use */
        ok = 0;
        snprintf(c->refused, sizeof c->refused, "the budget of its group %s (%llu bytes, VRAM_GROUP_LIMIT) is "
                 "reached by this process alone: it is not in the ledger (%.120s), so its group's budget holds for its "
                 "own use", m->group, (unsigned long long)m->group_limit,
                 m->said[0] ? m->said : "no slot was free");
    }
    if (ok && c->held != want) c->held = want;
    if (locked) vram__ledger_unlock(&m->l);
    pthread_mutex_unlock(&m->mu);
    return ok;
}

int vram__ledger_member_refusal(ledger_member *m, int i, char *buf, size_t len) {
    if (i < 0 || i >= LEDGER_MEMBER_CARDS) return 0;
    pthread_mutex_lock(&m->mu);
    int refused = m->card[i].refused[0] != '\0';
    if (refused) snprintf(buf, len, "%s", m->card[i].refused);
    pthread_mutex_unlock(&m->mu);
    return refused;
}

void vram__ledger_member_give(ledger_member *m, int i, size_t bytes) {
    if (i < 0 || i >= LEDGER_MEMBER_CARDS) return;
    ledger_member_card *c = &m->card[i];
    pthread_mutex_lock(&m->mu);
    c->held = c->held > bytes ? c->held - bytes : 0;
    if (member_lock(m)) {
        member_publish(c);
        uint64_t budget = m->group[0] && c->slot ? vram__ledger_group_limit_in_force(c->slot, m->group_limit,
                                                                                m->group_limit_max) : 0;
        if (budget && m->priority != LEDGER_PRIORITY_OPPORTUNISTIC && m->saw_opportunistic) {
            int opportunistic = 0;   /* the opportunistic members get their room back */
            (void)vram__ledger_group_rebalance_locked(&m->l, m->group, c->uuid, budget, &opportunistic);
            m->saw_opportunistic = opportunistic > 0;
        }
        vram__ledger_unlock(&m->l);
    }
    pthread_mutex_unlock(&m->mu);
}

void vram__ledger_member_overflow(ledger_member *m, int i, size_t bytes) {
    if (i < 0 || i >= LEDGER_MEMBER_CARDS) return;
    pthread_mutex_lock(&m->mu);
    m->card[i].overflow = bytes;
    if (member_lock(m)) {
        member_publish(&m->card[i]);
        vram__ledger_unlock(&m->l);
    }
    pthread_mutex_unlock(&m->mu);
}

static void member_futex(const void *word, int op, uint32_t val, int timeout_ms) {
    struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
    syscall(SYS_futex, word, op, val, op == FUTEX_WAIT ? &ts : NULL, NULL, 0);
}

void vram__ledger_member_wait(ledger_member *m, int timeout_ms) {
    pthread_mutex_lock(&m->mu);
    const ledger_slot *s = NULL;
    uint32_t seen = 0;
    for (int i = 0; i < LEDGER_MEMBER_CARDS && !s; i++) {
        if (m->card[i].used && m->card[i].slot && m->card[i].polled) {
            s = m->card[i].slot;
            seen = m->card[i].seen;
        }
    }
    uint32_t idle = __atomic_load_n(&m->idle_word, __ATOMIC_ACQUIRE);
    m->waiting_on = s ? (const void *)&s->limits_gen : (const void *)&m->idle_word;
    int stop = m->stop;
    pthread_mutex_unlock(&m->mu);
    if (stop) return;
    /* s may be unmapped meanwhile by a follow of another thread: the kernel then says EFAULT (no fault
     * in this process), and a mapping put at its address is a spurious wake at worst */
    if (s) (void)vram__ledger_gen_wait(s, seen, timeout_ms);
    else member_futex(&m->idle_word, FUTEX_WAIT, idle, timeout_ms);
    pthread_mutex_lock(&m->mu);
    m->waiting_on = NULL;
    pthread_mutex_unlock(&m->mu);
}

void vram__ledger_member_wake_all(ledger_member *m) {
    pthread_mutex_lock(&m->mu);
    m->stop = 1;
    const void *w = m->waiting_on;
    __atomic_add_fetch(&m->idle_word, 1, __ATOMIC_RELEASE);
    member_futex(&m->idle_word, FUTEX_WAKE, INT_MAX, 0);
    if (w && w != (const void *)&m->idle_word) member_futex(w, FUTEX_WAKE, INT_MAX, 0);
    pthread_mutex_unlock(&m->mu);
}

int vram__ledger_member_poll(ledger_member *m, uint64_t limit[LEDGER_MEMBER_CARDS]) {
    int changed = 0;
    pthread_mutex_lock(&m->mu);
    int locked = member_lock(m);
    for (int i = 0; i < LEDGER_MEMBER_CARDS; i++) {
        ledger_member_card *c = &m->card[i];
        limit[i] = UINT64_MAX;
        if (!c->used) continue;
        if (locked && c->slot) {
            uint32_t gen = __atomic_load_n(&c->slot->limits_gen, __ATOMIC_ACQUIRE);
            /* the ceilings are this process's own (its environment, the card): nothing in the ledger lifts one */
            uint64_t lim = vram__ledger_limit_in_force(c->slot, 0, m->limit_max, c->card_bytes, NULL);
            changed += !c->polled || lim != c->limit;
            if (!m->follow) {
                c->kept_set = __atomic_load_n(&c->slot->limit_set, __ATOMIC_RELAXED);
                c->kept_gset = __atomic_load_n(&c->slot->group_limit_set, __ATOMIC_RELAXED);
                c->kept_cap = __atomic_load_n(&c->slot->group_cap, __ATOMIC_RELAXED);
            }
            c->seen = gen;
            c->polled = 1;
            c->limit = lim;
        }
        /* unlisted now (the ledger unavailable, the slot gone): the last limit read stays in force */
        limit[i] = c->limit ? c->limit : UINT64_MAX;
    }
    if (locked) vram__ledger_unlock(&m->l);
    pthread_mutex_unlock(&m->mu);
    return changed;
}

void vram__ledger_member_close(ledger_member *m) {
    pthread_mutex_lock(&m->mu);
    if (m->open) {
        vram__ledger_lock(&m->l);
        char err[512];
        if (!m->follow && vram__ledger_follow_locked(&m->l, 0, err, sizeof err) >= 0) {
            for (int i = 0; i < LEDGER_MEMBER_CARDS; i++) {
                ledger_slot *s = m->card[i].used ? vram__ledger_find_locked(&m->l, m->pid, m->start, i) : NULL;
                if (s) vram__ledger_release_locked(s, m->pid, m->start);
                m->card[i].slot = NULL;
            }
        }
        vram__ledger_unlock(&m->l);
        vram__ledger_close(&m->l);
        m->open = 0;
    }
    for (int i = 0; i < LEDGER_MEMBER_CARDS; i++) m->card[i].slot = NULL;
    pthread_mutex_unlock(&m->mu);
}

void vram__ledger_member_forget(ledger_member *m) {
    pthread_mutex_init(&m->mu, NULL);   /* (a thread of the parent may have held it at the fork) */
    if (m->open) vram__ledger_close(&m->l);   /* this process's descriptors: the parent keeps its lock and slots */
    m->open = 0;
    for (int i = 0; i < LEDGER_MEMBER_CARDS; i++) m->card[i].slot = NULL;
}
