/*
 * ledger_member.h: a libvram process in the per-machine ledger (ledger.h), so that `vram limit PID`,
 * `vram limit --group` and a group's rebalancing reach a program that allocates through libvram as they
 * reach one under the preload library alone. The runtime (src/runtime/limits.c) decides whether and how
 * the process is a member, fills the configuration below and opens it; the card budgets of the pool
 * call the gate (vram__ledger_member_take / _give) when memory is taken from a card or given back; the
 * runtime's watcher thread waits for a change (vram__ledger_member_wait) and reads the limits in force
 * (vram__ledger_member_poll), which it posts (vram__limit_post).
 *
 * Two ways to be a member:
 *   own     the process has slots of its own, one per card it uses (claimed at open), and publishes in
 *           them the bytes its pools hold on each card (in_use, peak) and its overflow bytes. With a
 *           group (VRAM_GROUP and a budget) each take checks the group's use under the ledger lock and
 *           rebalances it (the preload library's policy, ledger.h: vram__ledger_group_rebalance_locked), so
 *           that members are held to exact byte counts; a take past the limit in force (a limit set
 *           from outside, an opportunistic member's group cap) is refused at once.
 *   follow  the preload library is in the process and counts its driver calls (libvram's CUDA backend
 *           under `vram run`): the slots are the preload library's, which publishes, checks the group
 *           and rebalances. The member only reads the limits set on those slots, so that libvram's pools
 *           follow them (idle memory given back, requests refused or overflowed) instead of meeting the
 *           preload library's refusals as a full card; nothing is counted twice.
 *
 * Faults: every access to the mapped file is made under `mu` and the ledger lock after
 * vram__ledger_follow_locked found the file whole (a file rebuilt, replaced or truncated by vram is followed,
 * the slots found or claimed again); only a truncation by something else between that check and the
 * access could fault. A ledger that cannot be opened (another user's directory, a file of the wrong
 * kind) leaves the process unlisted: the gate then holds a grouped process to its group's budget for its
 * own use alone (fails closed, as the preload library does), and nothing from the ledger can lift a limit
 * (what is posted is at most the configuration's, runtime/limits.c); a ledger replaced by a file that
 * cannot be opened refuses a grouped process's takes until it can be (its group's use is unknown). A slot that went missing is claimed
 * again (own) or looked for again (follow) at the next wait or take.
 *
 * Locks: `mu` (the member's state and its use of the ledger lock, which does not exclude threads of one
 * process), then the ledger's flock. The gate is called with an arena's lock held (pool/backing.c), so
 * the member never calls into the pool or the runtime.
 */
#ifndef VRAM_COMMON_LEDGER_MEMBER_H
#define VRAM_COMMON_LEDGER_MEMBER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ledger.h"

#define LEDGER_MEMBER_CARDS 64

typedef struct ledger_member_card {
    int          used;           /* configured: the process uses this card */
    char         uuid[LEDGER_UUID_LEN];
    uint64_t     start_limit;    /* configured: the limit the process started with on it, 0 none */
    uint64_t     card_bytes;     /* configured: the card's memory */
    uint64_t     overflow_max;   /* configured: the overflow's cap, 0 overflow off */
    ledger_slot *slot;           /* own: this process's slot; follow: the preload library's once found */
    uint64_t     held, peak;     /* own: the bytes the pools hold on the card (published as in_use) */
    uint64_t     overflow;       /* own: the overflow's bytes (published as overflow_bytes) */
    uint32_t     seen;           /* the slot's limits_gen last read by vram__ledger_member_poll */
    int          polled;         /* a poll has read the slot since it was found or claimed */
    uint64_t     limit;          /* the limit from outside last read (0 none) */
    uint64_t     kept_set, kept_gset, kept_cap;   /* own: the slot's limit_set, group_limit_set and group_cap
                                                   * last read, written into a slot claimed again after a
                                                   * fault (what the preload library's shadow keeps) */
    char         refused[512];   /* why the last take was refused ("" none) */
} ledger_member_card;

typedef struct ledger_member {
    pthread_mutex_t    mu;
    /* configuration, set before vram__ledger_member_open */
    int                follow;            /* 1: the preload library's slots (see above); 0: own */
    char               group[LEDGER_NAME_LEN];   /* "" none */
    uint64_t           group_limit;       /* the group's budget at start (VRAM_GROUP_LIMIT), 0 none */
    uint64_t           limit_max;         /* VRAM_LIMIT_MAX: the most a limit set from outside may be, 0 none */
    uint64_t           group_limit_max;   /* VRAM_GROUP_LIMIT_MAX */
    int                priority;          /* LEDGER_PRIORITY_* */
    ledger_member_card card[LEDGER_MEMBER_CARDS];
    /* state */
    int                open;              /* the ledger is open (else the process is unlisted) */
    ledger             l;
    int                pid;
    uint64_t           start;             /* the process's start time (vram__ledger_start_time) */
    char               command[LEDGER_NAME_LEN];
    int                saw_opportunistic; /* the group had opportunistic members at the last rebalance */
    int                stop;              /* vram__ledger_member_wake_all: waits return at once */
    uint32_t           idle_word;         /* what a wait with no slot to watch sleeps on */
    const void        *waiting_on;        /* the word a wait sleeps on now (vram__ledger_member_wake_all) */
    char               said[512];         /* why the ledger could not be opened, "" */
} ledger_member;

/* Initialises m (zeroed configuration, the mutex); the caller then fills the configuration. */
void vram__ledger_member_init(ledger_member *m);
/* Opens the ledger (vram__ledger_place's) and, own, claims a slot per used card; follow finds the preload
 * library's slots as they come (vram__ledger_member_poll). 0, or -1 with the reason in m->said (the process
 * is then unlisted: vram__ledger_member_take still holds a group to its budget for the process's own use). */
int  vram__ledger_member_open(ledger_member *m);
/* Own, the gate of card i's budget: `bytes` more are to be taken from the card. 1 allowed (and
 * published; a guaranteed member's group rebalanced), 0 refused (the reason in card[i].refused): past
 * the limit set from outside or the group cap in force, or past the group's budget. */
int  vram__ledger_member_take(ledger_member *m, int i, size_t bytes);
/* Why card i's last take was refused (copied into buf), 0 when it was not. */
int  vram__ledger_member_refusal(ledger_member *m, int i, char *buf, size_t len);
/* Own: `bytes` of card i were given back (published; a guaranteed member's group rebalanced). */
void vram__ledger_member_give(ledger_member *m, int i, size_t bytes);
/* Own: the overflow of card i holds `bytes` of host memory now (published). */
void vram__ledger_member_overflow(ledger_member *m, int i, size_t bytes);
/* Waits until a watched slot's limits changed, timeout_ms passed or vram__ledger_member_wake_all. */
void vram__ledger_member_wait(ledger_member *m, int timeout_ms);
/* Reads the limits from outside in force (vram__ledger_limit_in_force with the configured ceilings) into
 * limit[i] for every used card (UINT64_MAX: none, or not known), following the file and finding or
 * claiming the slots again. Returns how many cards' limits changed since the last poll. */
int  vram__ledger_member_poll(ledger_member *m, uint64_t limit[LEDGER_MEMBER_CARDS]);
/* Makes a waiting vram__ledger_member_wait return, now and from now on. */
void vram__ledger_member_wake_all(ledger_member *m);
/* Own: releases the slots; closes the ledger. */
void vram__ledger_member_close(ledger_member *m);
/* In the child of fork: the slots are the parent's; the descriptors and the mapping are dropped
 * without touching the ledger. */
void vram__ledger_member_forget(ledger_member *m);

#endif /* VRAM_COMMON_LEDGER_MEMBER_H */
