/*
 * ledger.h: the per-machine ledger of processes under `vram run`, shared by libvram_preload.so
 * (which writes its own slots), libvram (a program that allocates through it: ledger_member.h),
 * `vram top`, `vram limit` and the Slurm plugin (src/common: compiled into each, hidden).
 *
 * Where (vram__ledger_place, the one place this is decided, for the preload library, vram top, vram run and
 * the Slurm plugin), the first that applies:
 *   (a) VRAM_LEDGER_DIR, when set (an absolute path; a relative one is refused by name);
 *   (b) $XDG_RUNTIME_DIR/vram, when XDG_RUNTIME_DIR is an absolute path to an existing directory of
 *       this user (one exported from another machine, as srun exports the login session's, or
 *       another user's, is passed over);
 *   (c) /dev/shm/vram-<uid>;
 *   (d) when (c) is taken (a directory of another user, a symlink or another file: a predictable name in
 *       sticky /dev/shm that anyone can make first and only its owner can remove), a place only this
 *       user can own, the same for all of its processes on this machine whatever their environment:
 *       /run/user/<uid>/vram when /run/user/<uid> (logind's) is a directory of this user, else
 *       <home>/.cache/vram/ledger-<host name> (home from the password database; the host name so that
 *       a home shared by machines never shares a ledger). vram__ledger_open says so in l->note.
 * LEDGER_PLACE_NODE skips (a) and (b): the node's place for the user, which the Slurm plugin gives every
 * task of a job (as VRAM_LEDGER_DIR) and its epilog uses, whatever environment the job brought.
 * The directory is created 0700 and must be a real directory (not a symlink) owned by the user with
 * no group/other permissions; otherwise the ledger is refused. It holds:
 *   ledger       the table, mmap'd MAP_SHARED (0600, opened O_NOFOLLOW, checked: regular file, owner)
 *   ledger.lock  a file whose flock() is the ledger lock (never renamed, so a rebuild of `ledger`
 *                cannot split the lock). flock is released by the kernel when its holder dies (kill -9
 *                included), so a dead process never leaves the ledger locked. Its 16 bytes record the
 *                device and inode of the ledger file last opened, so that a file put at the path by
 *                anything else is noticed.
 *
 * Layout: a header (magic, layout version, header size, slot size, slot count, file size and an
 * FNV-1a checksum of the header) and LEDGER_SLOTS slots, one per (process, device). A file whose
 * size, magic, version, sizes or checksum do not match is renamed aside to ledger.bad.<pid>.<time>
 * and a fresh one is written (under the lock): it is never trusted.
 *
 * Faults to the file (vram__ledger_open, vram__ledger_follow_locked): a rebuild copies the live slots of the file
 * moved aside. When the file is made anew (it was deleted, truncated to nothing or rebuilt) or was
 * replaced behind vram's back, running processes that still map the old file, or keep a shadow of
 * their slots (vram__ledger_shadow_create: what survives a truncation), are found through their open
 * descriptors (/proc/<pid>/fd of this user's processes) and those live slots are copied in
 * (ledger_proc.c), so the budget of a group still counts members that make no call meanwhile. A
 * member follows the file at the path itself the next time it takes the lock for its group
 * (vram__ledger_follow_locked), finds its copied slot or claims one, and publishes its usage there.
 *
 * Slots: claimed and released under the lock; their counters (in_use, peak) are written by the
 * owning process alone with relaxed atomic stores, without the lock, and read with atomic loads.
 * A slot is live when its state is LEDGER_SLOT_LIVE and its pid runs with the start time recorded
 * (/proc/<pid>/stat field 22, so that a reused pid does not keep a dead process's slot); whoever
 * scans under the lock (vram top, a process checking its group limit, a process claiming a slot)
 * frees the stale ones.
 *
 * Sleep (layout 2; shim/sleep.h): a process put to sleep through the driver's checkpoint API (`vram
 * sleep`, the idle watcher of `vram run --idle-sleep`) has its device memory in host memory. Its
 * slots' sleep field says so; it is written, with host_bytes, slept_ns and the sleeper's identity,
 * under the lock by whoever sleeps or wakes the process, never by the owner (which is locked by the
 * driver meanwhile). LEDGER_ASLEEP slots hold nothing on their card: group sums skip them, and vram
 * top shows their host_bytes; every other state counts in_use (a process is on its card until its
 * checkpoint is done, and again from the moment a wake has passed the budget check). A waker that
 * moves a process to another card (`vram wake --device`) rewrites its slot's uuid; the owner reads
 * it back when it next takes the lock. A process under an idle watcher names the watcher in its
 * slots (watcher_pid, watcher_start, idle_ns) and the descriptor of its activity page
 * (activity_fd: a sealed memfd "vram-activity" holding a ledger_activity, which the watcher opens
 * through /proc/<pid>/fd), all written by the owner when it claims the slot.
 *
 * Limits that move (layout 3; shim/limits.c, tools/limit.c): `vram limit PID SIZE` writes limit_set
 * into the process's slots, `vram limit --group NAME SIZE` group_limit_set into every live member's,
 * and a guaranteed member of a group with a budget writes group_cap into its opportunistic members'
 * (vram__ledger_group_rebalance_locked); each under the lock, then limits_gen is bumped. The owner compares
 * limits_gen with the last it applied at each accounted call (one atomic load) and applies the new
 * limits there: min(limit_set, else its start limit; group_cap), never above limit_max nor the card
 * (it clamps from its own environment: the ledger is the user's file, so nothing in it can lift a
 * ceiling the Slurm plugin set). Only the owner of a process (or root, switched to the owner's uid)
 * can write its slots: the ledger's directory and files are the user's alone (0700, 0600).
 */
#ifndef VRAM_SHIM_LEDGER_H
#define VRAM_SHIM_LEDGER_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LEDGER_MAGIC 0x3152474c4d415256ull   /* "VRAMLGR1" little-endian */
#define LEDGER_VERSION 3u
#define LEDGER_SLOTS 1024u
#define LEDGER_SLOT_LIVE 0x45564c53u          /* "SLVE" */
#define LEDGER_UUID_LEN 48
#define LEDGER_NAME_LEN 32

typedef struct ledger_header {
    uint64_t magic;
    uint32_t version;
    uint32_t header_size;
    uint32_t slot_size;
    uint32_t nslots;
    uint64_t file_size;
    uint64_t created_ns;   /* CLOCK_REALTIME when written */
    uint64_t checksum;     /* FNV-1a 64 of this header with checksum = 0 */
    uint64_t reserved[2];
} ledger_header;

typedef struct ledger_slot {
    uint32_t state;        /* 0 free, LEDGER_SLOT_LIVE */
    int32_t pid;
    uint64_t start_time;   /* /proc/<pid>/stat field 22 (clock ticks since boot) */
    int32_t device;        /* the device ordinal as the program numbers it */
    uint32_t reserved0;
    uint64_t in_use;       /* bytes; written by the owner only */
    uint64_t peak;         /* bytes; written by the owner only */
    uint64_t limit;        /* bytes, 0 none */
    uint64_t group_limit;  /* bytes, 0 none */
    char uuid[LEDGER_UUID_LEN];    /* "GPU-...", or "unknown-<ordinal>"; a waker that moved the process
                                    * to another card writes that card's */
    char group[LEDGER_NAME_LEN];   /* "" when none */
    char command[LEDGER_NAME_LEN]; /* /proc/<pid>/comm */
    /* layout 2: sleep and wake. Written under the lock by the sleeper or waker: */
    uint32_t sleep;        /* LEDGER_AWAKE, LEDGER_SLEEPING, LEDGER_ASLEEP, LEDGER_WAKING */
    int32_t sleeper_pid;   /* who last slept or woke it (its start time next), 0 none */
    uint64_t sleeper_start;
    uint64_t host_bytes;   /* asleep: the bytes of its device memory now in host memory */
    uint64_t slept_ns;     /* CLOCK_REALTIME when it was put to sleep */
    /* written by the owner when it claims the slot: */
    int32_t watcher_pid;   /* its idle watcher (vram run --idle-sleep), 0 none */
    int32_t activity_fd;   /* its descriptor of its activity page, -1 none */
    uint64_t watcher_start;
    uint64_t idle_ns;      /* the watcher puts it to sleep after this long without a driver call */
    /* layout 3: limits that move ("Limits that move" above). Written under the lock by a setter
     * (`vram limit`, a guaranteed member rebalancing its group), the generation bumped last: */
    uint64_t limit_set;       /* the limit set from outside (vram limit PID), 0 none */
    uint64_t group_limit_set; /* the group's budget set from outside (vram limit --group), 0 none */
    uint64_t group_cap;       /* an opportunistic member's limit lowered for its group's guaranteed
                               * members, 0 none */
    uint32_t limits_gen;      /* bumped (atomic) after each of the three above changed */
    uint32_t priority;        /* LEDGER_PRIORITY_*: written by the owner when it claims the slot */
    /* written by the owner when it claims the slot: */
    uint64_t limit_max;       /* the most a limit set from outside may be: VRAM_LIMIT_MAX (the Slurm
                               * plugin's limit), 0 none (the card then) */
    uint64_t group_limit_max; /* the same for the group's budget (VRAM_GROUP_LIMIT_MAX), 0 none */
    uint64_t card_bytes;      /* the card's memory (cuDeviceTotalMem), 0 unknown */
    uint64_t overflow_max;    /* overflow to host memory: its cap, 0 when overflow is off */
    /* written by the owner alone, as in_use: */
    uint64_t overflow_bytes;  /* the host memory its overflow blocks hold now */
    uint64_t reserved[3];     /* zero; for later layouts */
} ledger_slot;

/* ledger_slot.priority (vram run --priority) */
#define LEDGER_PRIORITY_GUARANTEED 0u      /* the default: never lowered for others */
#define LEDGER_PRIORITY_OPPORTUNISTIC 1u   /* lowered while the group's guaranteed members need room */

/* ledger_slot.sleep */
#define LEDGER_AWAKE 0u
#define LEDGER_SLEEPING 1u   /* being locked and checkpointed: still on its card */
#define LEDGER_ASLEEP 2u     /* its device memory in host memory: nothing on its card */
#define LEDGER_WAKING 3u     /* being restored: counted on its card again */

_Static_assert(sizeof(ledger_header) == 64, "ledger header layout");
_Static_assert(sizeof(ledger_slot) == 320, "ledger slot layout");

/* The activity page of a process under an idle watcher: one page of a sealed memfd named
 * "vram-activity" (it cannot shrink, so no mapping of it ever faults), made by the preload library
 * at the process's first slot and mapped there for the process's life; the watcher maps it
 * read-only through /proc/<pid>/fd/<activity_fd>. calls grows at every driver call the preload
 * library sees (relaxed load and store by the owner's threads: a lost increment still changes the
 * value); waits counts the synchronising calls in progress (atomic), during which the process is
 * not idle. */
#define LEDGER_ACTIVITY_MAGIC 0x5954495649544341ull   /* "ACTIVITY" little-endian */
#define LEDGER_ACTIVITY_NAME "vram-activity"
#define LEDGER_ACTIVITY_BYTES 4096u
typedef struct ledger_activity {
    uint64_t magic;
    int32_t pid;
    uint32_t pad;
    uint64_t start_time;
    uint64_t calls;
    uint64_t waits;
} ledger_activity;

typedef struct ledger {
    int lock_fd, fd;
    void *map;
    size_t size;
    ledger_header *hdr;
    ledger_slot *slots;
    dev_t dev;                 /* the mapped file's identity (fstat after opening it) */
    ino_t ino;
    int recovered;             /* after vram__ledger_open / a follow: slots of running processes carried in */
    char dir[PATH_MAX];
    char path[PATH_MAX + 16];
    char lock_path[PATH_MAX + 16];
    char rebuilt[3 * PATH_MAX];/* after vram__ledger_open: why the file found there was rebuilt, or "" */
    char note[2 * PATH_MAX];   /* after vram__ledger_open: why the ledger is not in its default place (d), or "" */
} ledger;

#define LEDGER_FILE_SIZE (sizeof(ledger_header) + (size_t)LEDGER_SLOTS * sizeof(ledger_slot))

/* The header's FNV-1a 64 checksum (its checksum field taken as 0), and a valid header of a fresh
 * ledger of this layout (the fuzzer builds its inputs with them). */
uint64_t vram__ledger_checksum(const ledger_header *h);
void     vram__ledger_header_init(ledger_header *h);

/* The ledger's directory of this user (see "Where" above): decided, made (0700) when missing, into dir.
 * flags 0 or LEDGER_PLACE_NODE (the environment ignored). 0, with `note` (when not NULL) "" or why the
 * ledger is not in its default place (taken by another user) and where it is instead; -1 with err
 * (VRAM_LEDGER_DIR relative, no place of this user's left). What the directory is (a real directory of
 * this user, mode 0700) is checked by vram__ledger_open. */
#define LEDGER_PLACE_NODE 1u
int vram__ledger_place(char *dir, size_t len, unsigned flags, char *note, size_t notelen, char *err, size_t errlen);

/* Opens (creating the directory and files, or rebuilding a bad file) and maps the ledger of the place
 * vram__ledger_place gives (flags 0; l->note says where it moved). 0 on success; -1 with the reason in err. */
int vram__ledger_open(ledger *l, char *err, size_t errlen);
/* The same for the ledger in the directory `dir` (absolute; a place vram__ledger_place gave). */
int vram__ledger_open_in(ledger *l, const char *dir, char *err, size_t errlen);
void vram__ledger_close(ledger *l);

/* A process's shadow of its own slots: a sealed memfd (it cannot be shrunk, so its mapping never
 * faults) of the ledger's size, named "vram:<ledger path>", where the process keeps a copy of each
 * of its slots at index = its device. ledger_recover_from_procs finds it through /proc/<pid>/fd
 * like a deleted ledger file, so a ledger wiped by truncation still learns what running members
 * hold. The descriptor (close-on-exec), or -1. */
int vram__ledger_shadow_create(const ledger *l);

/* The ledger directory of this user (vram__ledger_place's, flags 0), when it is a real directory of this user
 * open to group or others, is set to 0700 (what `vram run --group-limit` repairs before it opens the
 * ledger; nothing else is changed: a symlink, another owner or an unsafe file is left for vram__ledger_open to
 * refuse). 1 repaired (said in `said`), 0 nothing to do, -1 it could not be changed. */
int vram__ledger_repair_dir(char *said, size_t saidlen);

/* Under the lock: when the file at l->path is no longer the one mapped (deleted, replaced, moved aside
 * by a rebuild), or `force`, opens and maps the current one (as vram__ledger_open does, recovering slots)
 * and unmaps the old. 0 unchanged, 1 followed (every slot pointer into the old mapping is stale:
 * find or claim again), -1 with err (l unchanged). */
int vram__ledger_follow_locked(ledger *l, int force, char *err, size_t errlen);

/* The ledger lock (flock on ledger.lock). Callers in one process must serialise among their own
 * threads: flock does not exclude threads sharing the descriptor. Once held, the lock file is checked
 * to be the one at the path still; when it was deleted or replaced the file now there is opened (into
 * the same descriptor number) and locked instead, so that the lock is never split in two. */
void vram__ledger_lock(ledger *l);
void vram__ledger_unlock(ledger *l);

/* /proc/<pid>/stat field 22; 0 on success. */
int vram__ledger_start_time(int pid, uint64_t *out);

/* 1 when the slot is live (its process runs with the recorded start time). */
int vram__ledger_slot_alive(const ledger_slot *s);

/* Under the lock: frees every stale slot; returns how many. */
int vram__ledger_reclaim_locked(ledger *l);

/* Under the lock: a free (or stale, reclaimed) slot filled with the fields given (in_use and peak
 * 0), or NULL when the ledger is full. */
ledger_slot *vram__ledger_claim_locked(ledger *l, int pid, uint64_t start_time, int device, const char *uuid,
                                 const char *group, const char *command, uint64_t limit,
                                 uint64_t group_limit);

/* Under the lock: the live slot of (pid, start_time, device), or NULL. */
ledger_slot *vram__ledger_find_locked(ledger *l, int pid, uint64_t start_time, int device);

/* Under the lock: frees `s` if it is still pid's. */
void vram__ledger_release_locked(ledger_slot *s, int pid, uint64_t start_time);

/* Under the lock: the bytes in use of the live slots of `group` on device `uuid` (stale slots are
 * reclaimed on the way; asleep slots count nothing; a total that would overflow saturates at
 * UINT64_MAX). */
uint64_t vram__ledger_group_total_locked(ledger *l, const char *group, const char *uuid);

/* Bumps s's limits_gen (after a setter changed limit_set, group_limit_set or group_cap, under the lock)
 * and wakes whoever waits for it (vram__ledger_gen_wait: a libvram process's watcher). */
void vram__ledger_gen_bump(ledger_slot *s);
/* Blocks until s's limits_gen is no longer `seen` or timeout_ms passed (a shared futex on the mapped
 * file: the kernel reads the word, so a file truncated under the mapping is an error here, never a
 * SIGBUS). 1 it moved (or was not `seen` already), 0 the time passed, -1 the word cannot be read. */
int  vram__ledger_gen_wait(const ledger_slot *s, uint32_t seen, int timeout_ms);

/* The limit in force of slot s for its owner: limit_set (at most limit_max and card, when not 0) else
 * `start`, lowered to group_cap; 0 none. The owner passes the ceilings of its own environment and
 * driver (nothing in the ledger, the user's file, lifts one); *src (when not NULL) says which applied.
 * And its group's budget: group_limit_set (at most group_limit_max) else `start`. */
enum { LEDGER_LIMIT_FROM_START, LEDGER_LIMIT_FROM_SET, LEDGER_LIMIT_FROM_CAP };
uint64_t vram__ledger_limit_in_force(const ledger_slot *s, uint64_t start, uint64_t limit_max, uint64_t card, int *src);
uint64_t vram__ledger_group_limit_in_force(const ledger_slot *s, uint64_t start, uint64_t group_limit_max);

/* The limit in force of slot s as its fields say (what its owner applies at its next accounted call):
 * limit_set (at most limit_max and card_bytes) else the start limit, lowered to group_cap; 0 none.
 * And its group's budget in force: group_limit_set (at most group_limit_max) else group_limit. */
uint64_t vram__ledger_slot_limit(const ledger_slot *s);
uint64_t vram__ledger_slot_group_limit(const ledger_slot *s);

/* Under the lock: the group's budget set from outside (vram limit --group) that a live member of
 * `group` carries, 0 none (a member joining takes it). */
uint64_t vram__ledger_group_budget_set_locked(ledger *l, const char *group);

/* Under the lock: the group rebalances on `uuid` under `budget` (> 0): while its guaranteed members
 * use G > 0, each opportunistic member's group_cap becomes budget - G - what the other opportunistic
 * members use (at least 1 byte: a cap of 0 would read as none), and 0 (none) once G is 0; a slot
 * whose cap changed has its limits_gen bumped. Returns G; *opportunistic: how many such members. */
uint64_t vram__ledger_group_rebalance_locked(ledger *l, const char *group, const char *uuid, uint64_t budget,
                                       int *opportunistic);

/* Copies a NUL-terminated, printable version of a slot string field (the file may hold garbage). */
void vram__ledger_copy_name(char *dst, size_t dstlen, const char *src, size_t srclen);
/* Whether `name` can name a group: 1 to LEDGER_NAME_LEN - 1 of A-Z a-z 0-9 . _ - (vram run checks
 * --group with it, the preload library VRAM_GROUP). */
int  vram__ledger_valid_group(const char *name);

#endif /* VRAM_SHIM_LEDGER_H */
