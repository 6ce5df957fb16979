/*
 * arena.h: the arena's cross-file interface: its structures, and every function one of its files
 * calls in another, grouped by the file that owns it, in the order calls run. Included by the files
 * of an arena, by arenas.c (the device allocator over its arenas), thread_cache.c and the pool's unit
 * tests; nothing outside src/pool includes it. The headers beside it (backing.h, split_merge.h,
 * stream_order.h, stats.h, pointer_table.h, plan_arena.h) hold only what the warm path inlines.
 *
 * Words (one meaning each, here and in docs/DESIGN.md):
 *   device allocator  the allocator of one logical device (vram__pool, arenas.c; "pool" in the
 *                     vram__pool_* names): its arenas, its private pools (each by its private pool
 *                     index), one budget.
 *   arena             one best-fit coalescing allocator (pool_arena) with its own lock, the
 *                     *arena lock* (`lock`, lock.h): functions named `*_locked` need it held.
 *   region / chunk / block   memory an arena holds (plain, or the VMM range); a piece of a region in
 *                     address order (FREE, USED, PENDING); a USED chunk the program holds.
 *   pointer table     every live block by its address (`ptr_table`, pointer_table.h: shards of a ptr_map each).
 *   thread cache / parked    a thread's cache of blocks it freed, by exact size; a block in it
 *                     (the arena's part `tc`, thread_cache.c).
 *   pending / deferred       freed on a stream, waiting for its event; freed while still used on
 *                     other streams, waiting for theirs (the arena's part `order`, stream_order.c).
 *   solo              every stream-ordered request of the arena came on one stream (part `solo`).
 *   zone              a part of the VMM region with free bins of its own: the small zone at its
 *                     start, the large one, and the plan's zone at its end.
 *   plan / plan's zone / slot mode  the repeating step's placement (plan.c, plan_arena.c); the zone
 *                     it is placed in (both the arena's part `plan`); a settled plan served by a lookup of a
 *                     record per planned request, its plan slot (plan_slots.c). "Slot" means nothing
 *                     else in the pool (threads are spread over TC_CACHES thread caches; the pointer
 *                     table's maps have buckets; an extent's record is an entry of pool_vmm.ext).
 *   settle            what the front door does before anything walks the chunks or counts memory:
 *                     leave slot mode, flush the thread caches, recount the extents (arena.c).
 *
 * Calls run one way (tests/code_shape.py graph checks that no two files call each other, directly
 * or around a circle):
 *   front door       arena.c: every call arenas.c makes on an arena but sleep and wake, and settle
 *   allocation path  arena_alloc.c (a request's plan place or best fit and its retry ladder, the
 *                    hand-out, the free by kind); sleep.c (sleep and wake, which arenas.c calls
 *                    there: they settle nothing) beside it
 *   plan             plan_arena.c (it returns the place it chose; the allocation path hands it out),
 *                    then plan_slots.c
 *   backing memory   backing.c
 *   stream order     stream_order.c
 *   chunks           split_merge.c (split, merge, the pending list's links)
 *   readers          stats.c, oom.c, pool_check.c, pool_snapshot.c: they read what settle left
 *   leaves           vmm.c, free_bins.c, pointer_table.h / ptr_map.c, thread_cache.c, lock.c,
 *                    plan.c (the detector), ids.c; and arena.h's accessors, which call nothing
 * Lock order: the arena lock, then a thread cache's spin lock, then a pointer-table shard's.
 */
#ifndef VRAM_POOL_ARENA_H
#define VRAM_POOL_ARENA_H

#include "pool/free_bins.h"
#include "pool/lock.h"
#include "pool/pool.h"
#include "pool/ptr_map.h"
#include "pool/spin.h"
#include "pool/vmm.h"

#define VRAM_POOL_UNIT ((size_t)256)
#define VRAM_POOL_FALLBACK_REGION ((size_t)2 << 20)
#define VRAM_POOL_MAX_EXTENT ((size_t)1 << 30)     /* the default extent size on large cards */
/* The default extent is limit / POOL_EXTENT_DIV (between a granule and VRAM_POOL_MAX_EXTENT): an
 * extent goes back to the driver whole, so one that a live block keeps busy holds up to its size idle.
 * Under a limit 95% full, extents of limit / 64 left train_gpt2 (a 3.3 GB request, 1 GB idle inside
 * busy 256 MiB extents) and train_gpt2_generate failing requests; limit / 256 completes all nine
 * traces. Limits of POOL_LARGE_LIMIT and more (a whole H100 or H200) take limit / 128, 1 GiB on an
 * H200: fewer driver calls when growing, which is most of a cold start (cuMemCreate + cuMemMap cost
 * 56-79 us each whatever the size up to 512 MiB: bench/vmm_costs.c). On the H200 train_gpt2's cold
 * pass went from 0.575 to 0.452 of PyTorch's with 1 GiB instead of 256 MiB extents (131 -> 99
 * extents), the memory held unchanged on all nine traces but transformer_varlen (1.083 -> 1.086: where
 * extents end moves where memory mapped ahead goes; 384 and 768 MiB give 1.083, 512 and 896 1.086). */
#define POOL_EXTENT_DIV 256
#define POOL_EXTENT_DIV_LARGE 128
#define POOL_LARGE_LIMIT ((size_t)64 << 30)
/* A block of at least this many granules may have extents of its own, of block_extent bytes (its load,
 * a wake): it keeps them busy while it lives, and they go back whole */
#define POOL_BLOCK_EXTENT_GRANULES 16
#define POOL_MAP_AHEAD_DIV 16                      /* growth maps reserved / 16 beyond a block */
#define POOL_MAP_AHEAD_BURST 256                   /* ...when it grew at most this many allocations ago */
#define VRAM_POOL_TCACHE_MAX ((size_t)64 << 20)    /* the default thread cache on large cards */
#define POOL_SMALL_ZONE_DIV 8                      /* the small zone spans limit / 8 of address space */

enum { REGION_PLAIN = 1, REGION_VMM = 2 };

typedef struct pool_region {
    int                 kind;
    uint64_t            base;
    size_t              size;      /* bytes tiled by chunks (VMM: the whole reserved range) */
    size_t              held;      /* PLAIN: bytes held from the driver (VMM: see vmm.mapped) */
    pool_chunk         *first, *last;
    pool_vmm            vmm;       /* VMM: the physical backing */
    struct pool_region *next;
} pool_region;

/* Live blocks by address, in shards with a lock each, so that frees on several threads do not
 * meet on one lock. Lock order: arena lock, then a thread cache, then a shard. */
#define POOL_SHARDS 64

typedef struct pool_shard {
    _Alignas(64) pool_spin lock;
    ptr_map                map;
} pool_shard;

/* Thread caches (thread_cache.c): blocks the program freed, parked by exact size for the next
 * request of that size on the same thread, without the arena lock. Threads are spread over
 * TC_CACHES caches by the order in which they first allocated. */
#define TC_CACHES 64
#define TC_BINS 64

typedef struct tc_bin {
    size_t      size;    /* the rounded size parked here; any when head is NULL */
    pool_chunk *head;
} tc_bin;

typedef struct pool_tcache {
    _Alignas(64) pool_spin lock;
    _Atomic size_t cached;        /* bytes parked in the bins (written under the lock) */
    uint64_t       hits, parks;   /* allocations served from the bins, frees parked in them */
    tc_bin         bin[TC_BINS];
} pool_tcache;

typedef struct pool_event {
    void *event;
    int   refs;
} pool_event;

/* A block's uses on streams (vram_record_stream). Once the program frees it, one event per stream
 * (and the free's own) is recorded in `event` (nevents > 0: the block is deferred), and the block
 * waits in its arena's deferred list, USED but no longer counted, until every event completed. */
typedef struct pool_uses {
    int                n, cap;        /* streams recorded; room for cap (one more is kept for the free's) */
    int                nevents, done; /* after the free: events recorded, how many completed so far */
    int                unrecorded;    /* freed during a capture: the nevents events are recorded after it */
    struct pool_chunk *next;          /* the deferred list */
    struct { void *stream, *event; } use[];
} pool_uses;

typedef struct pool_arena pool_arena;

/* PyTorch's statistics (vram_get_allocator_stats), by kind: [0] all, [1] small (blocks of at most
 * VRAM_SMALL_BLOCK; the small zone's memory), [2] large. Under the arena lock. */
typedef struct pool_stat {
    size_t   cur, peak;
    uint64_t in;      /* added since start or the last reset of accumulated figures */
    size_t   cur0;    /* cur at that reset: taken away since = in + cur0 - cur */
} pool_stat;

typedef struct pool_stats {
    pool_stat blocks[3], bytes[3], req[3];           /* handed out: USED and not deferred, parked
                                                        blocks included (queries flush the caches).
                                                        Of [0] the hand-out and free paths keep only
                                                        blocks' peak and req's cur and peak; the rest
                                                        is the pool's own counts and the kinds' sums
                                                        (vram__stats_sync_all_locked, stats.c) */
    size_t    def_blocks[3], def_bytes[3];           /* freed, still used on other streams (deferred) */
    size_t    active_peak[3], active_blocks_peak[3]; /* high-water marks of handed out + deferred,
                                                        kept while blocks are deferred (else the
                                                        peaks of bytes and blocks are theirs) */
    pool_stat segs[3], held[3];                      /* physical pieces held and their bytes */
    size_t    nplain;                                /* plain regions held (counted large) */
    size_t    split_peak[3], split_blocks_peak[3];   /* inactive split: the highest queries saw */
    uint64_t  retries, syncs;
    uint64_t  ooms0, dev_allocs0, dev_frees0;        /* those counters at the last reset */
    size_t    act0[3], act0_n[3];                    /* active bytes and blocks at the last reset */
} pool_stats;

/* What the arenas of one logical device share (arenas.c owns it). */
typedef struct pool_shared {
    vram__card_budget budget;         /* the limit: every arena draws its physical memory from it */
    _Atomic size_t    reserved;       /* bytes all arenas hold, changed under the arena's lock after
                                         mapping and before giving the budget back: never above it */
    _Atomic size_t    peak_reserved;  /* its high-water mark since start or the last reset */
    _Atomic double    fraction;       /* vram__pool_set_fraction's (-1: none set); budget.cap is then
                                         at most cfg.limit, and reserved may stay above it until
                                         blocks are freed */
    _Atomic uint64_t  span_lo, span_hi;   /* every address any arena ever held lies in [lo, hi): widened
                                             when a region is added, never narrowed */
    atomic_int        captures;       /* CUDA-graph captures underway (vram_capture_begin/_end): while
                                         above 0 no arena records, queries or waits for an event nor
                                         gives memory back or moves it (see stream_order.h, "captures") */
    /* The limits that move while the pool runs (arenas.c, "limits that move"): budget.cap is the
     * least of cfg.limit and these, recomputed under the pool's grow_lock whenever one changes */
    _Atomic size_t    fraction_cap;   /* the memory fraction's bytes (SIZE_MAX: none set) */
    _Atomic size_t    live_limit;     /* vram_set_live_limit's bytes, at most cfg.limit (SIZE_MAX: none) */
    _Atomic size_t    external_cap;   /* a limit set on the process from outside, its card's (runtime/
                                         limits.c; SIZE_MAX: none) */
    struct pool_overflow *overflow;   /* host memory for what the device cannot serve (overflow.c);
                                         NULL: overflow off. Set at creation, never changed */
} pool_shared;

/* Why a request got no memory: the limit (the logical device's), the card's budget, the driver, no
 * growth at all, the arena is asleep (sleep.c), or a plan in force would hold more than the arena's
 * high-water mark (it gives way: arena_alloc.c). */
typedef enum grow_result { GROW_OK, GROW_LIMIT, GROW_CARD_LIMIT, GROW_DRIVER, GROW_OFF, GROW_ASLEEP, GROW_PLAN } grow_result;

/* The parts of an arena (struct pool_arena below), one per word of the glossary. */

/* The thread caches (thread_cache.c). Read without the arena lock, written at creation (and first /
 * multi once). */
typedef struct arena_tc {
    pool_tcache      *caches;        /* TC_CACHES caches */
    size_t            cap;           /* bytes one cache may hold; 0: park nothing */
    size_t            max_block;     /* largest block a cache takes */
    atomic_int        first;         /* the first cache used, -1 before; */
    atomic_int        multi;         /* 1 once a second one was used: caches park from then on, and
                                      * the pointer table's shards take their own locks (set under
                                      * the arena lock) */
} arena_tc;

/* The plan (plan_arena.c, plan_slots.c): the repeating step's planner and the plan's zone. */
typedef struct arena_plan {
    uint64_t          lo, hi;        /* the plan's zone [lo, hi): the end of the large zone, whose free
                                      * chunks are in bins and do not merge across lo (UINT64_MAX and 0:
                                      * none) */
    pool_chunk       *first;         /* the chunk that starts the plan's zone */
    int               hold;          /* growth holds to hold_mark as with hold_peak: a plan waits for
                                      * its first step, its first step runs until the settle request,
                                      * or one ended (0 while a plan is followed after that) */
    int               keep;          /* a plan is in force past its first step's settle request: its
                                      * zone's idle memory is not moved nor given back for other blocks,
                                      * and growth holds to hold_mark (GROW_PLAN past it: backing.c) */
    int               lend;          /* with keep: the program is off the plan for now (plan_arena.c):
                                      * the zone's idle memory serves blocks outside it first */
    struct pool_planner *planner;    /* the repeating step's plan (plan_arena.c); NULL: none */
    uint64_t          nap;           /* with a planner: requests left until its resting detector looks
                                      * again (plan_sees); 0: the planner sees every request */
    free_bins         bins;          /* free chunks of the plan's zone */
} arena_plan;

/* Stream order (stream_order.c): the pending and the deferred lists. */
typedef struct arena_order {
    pool_chunk       *pending;       /* PENDING chunks, newest first */
    pool_chunk       *pending_tail;  /* the oldest */
    size_t            pending_count;
    size_t            unrecorded;    /* PENDING chunks with no event yet (owned-stream frees) */
    pool_chunk       *deferred;      /* freed blocks still used on other streams (pool_uses), oldest */
    pool_chunk       *deferred_tail; /* first; the newest */
    size_t            deferred_count;
} arena_order;

/* One stream (see "solo" in stream_order.c): while every stream-ordered request of the arena has come
 * on `stream` and no plain one since the first, owned-stream frees on it are free at once. */
typedef struct arena_solo {
    int               state;         /* SOLO_NONE, SOLO_ON or SOLO_OFF */
    void             *stream;
    uint64_t          unfenced;      /* frees made free at once since the stream was last waited for */
    void             *idle_fence;    /* solo: an event the last idle tick recorded on the stream, which
                                      * the next tick waits for without the lock (NULL: none needed) */
    int               idle_fence_failed;   /* it could not be recorded: the next tick gives no extent back */
} arena_solo;

/* Sleep (sleep.c): what an arena keeps of a sleep. Whether it sleeps now is pool_arena's `asleep`,
 * which every request reads beside the lock. */
typedef struct arena_sleep {
    struct pool_sleep *state;        /* while asleep, or while a private pool that slept keeps what to map
                                      * again; NULL otherwise */
    void             *host_kept;     /* the pinned host block of the last offload, kept after its wake for the
                                      * next sleep (NULL: none), and its bytes */
    size_t            host_kept_bytes;
} arena_sleep;

struct pool_arena {
    /* read by every call without the arena lock, written at creation (and tc.first / tc.multi once):
     * kept off the cache lines the lock and the counters below write */
    _Alignas(64) vram__pool_config cfg;
    arena_tc          tc;            /* the thread caches */
    uint64_t          uid;           /* this arena among all created in the process (ids.c) */
    pool_shared      *shared;        /* what the logical device's arenas share */
    unsigned          tag;           /* the tag its blocks carry (tags.c; 0: none): a tag's arena, or a
                                      * private pool created under it (set under the pool's grow_lock) */
    /* under the arena lock */
    _Alignas(64) pool_lock lock;
    int               asleep;        /* the arena sleeps (sleep.c): its memory is off the card, its live
                                      * blocks are marked asleep, it serves no request until its wake */
    pool_region      *regions;
    pool_region      *vmm;           /* the range growth maps into, for a pool that grows by mapping */
    free_bins         bins;          /* free chunks, by size class (of the small zone: sbins) */
    free_bins         sbins;         /* free chunks of the small zone [vmm->base, small_end) */
    uint64_t          small_end;     /* growth by mapping with cfg.small_max: where the small zone
                                      * ends and the large one begins (0: no small zone) */
    arena_plan        plan;          /* the plan's zone and its planner */
    pool_chunk       *last_taken;    /* the chunk the last hand-out gave (vram__arena_take_locked) */
    arena_order       order;         /* stream order's lists */
    arena_solo        solo;          /* one stream */
    pool_chunk       *spare;         /* recycled chunk records */
    /* `current`, `used_count` and `peak` count blocks parked in thread caches as in use, and
     * num_allocs / num_frees count the pool's own hand-outs and releases (see thread_cache.c) */
    size_t            current, peak, reserved, peak_reserved;
    size_t            used_count;
    size_t            idle_low;      /* lowest reserved - current since the last idle tick */
    size_t            hold_mark;     /* highest reserved ever (hold_peak, hold_large; not reset with
                                      * the stats) */
    uint64_t          num_allocs, num_frees, num_ooms, num_driver_allocs, num_driver_frees,
                      num_driver_moves;
    uint64_t          num_flushed;   /* parked blocks given back to the pool */
    pool_stats        stats;         /* PyTorch's figures */
    int               pinned;        /* a private pool in use (arenas.c): its memory stays where it is
                                      * (no idle piece given back or moved: a CUDA graph captured its
                                      * addresses, freed blocks included) */
    uint64_t          last_growth;   /* num_allocs when the arena last mapped new memory */
    size_t            block_extent;  /* one-granule extents (plan:true, no chosen limit): the extents a
                                      * block of POOL_BLOCK_EXTENT_GRANULES or more may have to itself,
                                      * the size max_extent has without a plan: while the program loads
                                      * (backing.c) and when a wake maps it again (sleep.c); 0: none */
    int               loaded;        /* the program's load is over (backing.c) */
    arena_sleep       sleep;         /* what it keeps of a sleep */
    grow_result       failed;        /* why the last request that found no memory failed (arena_alloc.c),
                                      * for the front door's report */
    pool_shard        ptr_table[POOL_SHARDS];   /* each on its own cache line */
};

/* ids.c: the process-wide sequences */
uint64_t    vram__pool_new_uid(void);                      /* a new pool's or arena's uid (from 1) */
unsigned    vram__pool_thread_seq(vram__pool_thread *me); /* 1 + the order of this thread's first call */

/* thread_cache.c (it calls nothing of the arena's: the arrow goes from the arena to the caches) */
int         vram__tc_init(pool_arena *p);                 /* 0, or -1 without host memory */
void        vram__tc_destroy(pool_arena *p);
pool_tcache *vram__tc_mine(pool_arena *p, vram__pool_thread *me);   /* the calling thread's cache */
/* Serves `rounded` bytes from the thread's cache: 1 and *c set (already in the pointer table), or 0. */
int         vram__tc_take(pool_arena *p, pool_tcache *tc, size_t rounded, pool_chunk **c);
/* The program frees the block at addr: takes it out of the pointer table and parks it, 1; or 0
 * (nothing changed) when it is no block of this pool's table, or too large, or the cache is full:
 * the pool must take it then. */
int         vram__tc_park(pool_arena *p, pool_tcache *tc, uint64_t addr);
int         vram__tc_parking(const pool_arena *p);         /* caches may park (several threads, a cap) */
int         vram__tc_holds_any(pool_arena *p);
/* Takes every parked block out of the caches (arena lock held): they are returned linked through
 * cache_next, still USED, for the arena to release (vram__pool_flush_caches_locked). */
pool_chunk *vram__tc_flush_all_locked(pool_arena *p);
typedef struct tc_stats {
    size_t   cached;          /* bytes parked */
    uint64_t hits, parks;
} tc_stats;
void        vram__tc_stats_locked(pool_arena *p, tc_stats *out);      /* arena lock held */

/* ==== the front door (arena.c): every call the device allocator (arenas.c) makes on an arena (sleep
 * and wake below are sleep.c's, the wake's refusal oom.c's) ===================================== */

typedef struct arena_figures {      /* every arena of a logical device together */
    size_t current, reserved, largest_free;
} arena_figures;

vram_status vram__arena_create(const vram__pool_config *cfg, pool_shared *shared, pool_arena **out);
vram_status vram__arena_destroy(pool_arena *p);
/* Gives the arena a planner (the device's first arena, with growth by mapping and plan:true). */
void        vram__arena_enable_plan(pool_arena *p);

/* With `quiet` non-NULL an out-of-memory failure is not reported (no message, not counted): *quiet
 * says why, for vram__arena_oom to report once every arena was tried. */
vram_status vram__arena_alloc(pool_arena *p, vram__pool_thread *me, size_t size, int async, void *stream, void **ptr,
                        grow_result *quiet);
/* A free (req: how, on which stream; req->owned set as vram__pool_free's). */
vram_status vram__arena_free(pool_arena *p, vram__pool_thread *me, void *ptr, vram__free_req *req);
/* Hands out exactly [addr, addr + size rounded) when it lies in one free chunk (stream-ordered on
 * `stream`): a checkpoint of a private pool restored (PyTorch's CUDA-graph trees).
 * VRAM_ERR_INVALID_ARGUMENT when that range is not free. */
vram_status vram__arena_alloc_at(pool_arena *p, uint64_t addr, size_t size, void *stream);
/* The live block at ptr is also used on `stream` (vram_record_stream); *owned as vram__arena_free's. */
vram_status vram__arena_record_stream(pool_arena *p, void *ptr, void *stream, int *owned);
/* The live block at ptr shared with another process: its handle (ipc.h) into out, *length the bytes
 * it needs (VRAM_ERR_INVALID_ARGUMENT when capacity is less), *offset the block's place in the
 * span; *owned as vram__arena_free's. */
vram_status vram__arena_ipc_export(pool_arena *p, void *ptr, unsigned char *out, size_t capacity, size_t *length,
                             size_t *offset, int *owned);
void        vram__arena_lock(pool_arena *p, const void *self);   /* self: the calling thread's record, or NULL */
void        vram__arena_unlock(pool_arena *p);
void        vram__arena_info_locked(pool_arena *p, vram_memory_info *info);
void        vram__arena_reset_peak_locked(pool_arena *p);
void        vram__arena_reset_accumulated_locked(pool_arena *p);
/* Flushes the thread caches, then the arena's figures (added to what *out holds: arenas.c sums). */
void        vram__arena_allocator_stats_locked(pool_arena *p, vram_allocator_stats *out);
/* The out-of-memory error of a request that no arena could serve (`all`: every arena's figures). */
vram_status vram__arena_oom(pool_arena *p, size_t size, size_t rounded, grow_result why, const arena_figures *all);
size_t      vram__arena_live_bytes(pool_arena *p);
size_t      vram__arena_live_count(pool_arena *p, size_t *bytes);   /* flushes the thread caches first */
/* The blocks the program holds (not parked, not deferred), at most `capacity` into out; returns how many
 * there are. */
size_t      vram__arena_live_blocks(pool_arena *p, void **out, size_t capacity);
/* VRAM_OK, or the driver's refusal to give memory back (what it refused stays counted). */
vram_status vram__arena_trim(pool_arena *p, size_t keep_bytes);
/* The same with nothing kept, after waiting for the arena's frees in flight on streams (another arena's
 * request is about to fail). */
void        vram__arena_trim_settled(pool_arena *p);
void        vram__arena_idle_tick(pool_arena *p);
vram_status vram__arena_check(pool_arena *p);
/* The arena's segments and blocks appended to the arrays (the counts go on past the capacities);
 * private_pool: its index, -1 for the device's own arenas. Flushes the thread caches. */
void        vram__arena_snapshot_locked(pool_arena *p, int private_pool, vram_segment_info *segs, size_t seg_cap,
                                  size_t *nsegs, vram_block_info *blocks, size_t block_cap, size_t *nblocks);
/* The arena's reserved range [lo, hi) (VMM arenas; 0, 0 otherwise). It never moves. */
void        vram__arena_range(const pool_arena *p, uint64_t *lo, uint64_t *hi);
void        vram__arena_set_pinned(pool_arena *p, int pinned);
/* Sleep and wake, defined in sleep.c (the wake's refusal in oom.c): they settle nothing, so the front
 * door has no code of its own for them (arenas.c runs them over the arenas of a tag, each locked).
 * Why the arena cannot sleep now (VRAM_ERR_UNSUPPORTED, VRAM_ERR_CONFLICT with the message), or VRAM_OK. */
vram_status vram__arena_sleep_check_locked(pool_arena *p);
/* Puts the arena to sleep (offload: its blocks' bytes copied to pinned host memory first). On failure
 * nothing changed; an unmap or release the driver refused is returned after the arena went to sleep
 * all the same (that memory stays mapped and counted). */
vram_status vram__arena_sleep_locked(pool_arena *p, int offload);
/* Wake, in steps, so that several arenas wake all or nothing: plan (the bytes to map: *need), take
 * them from the budgets (GROW_OK or which refused), map, copy back; undo gives back what map took
 * (after a failed map or copy), done ends the sleep. Each needs the one before it. */
vram_status vram__arena_wake_plan_locked(pool_arena *p, size_t *need);
grow_result vram__arena_wake_budget_locked(pool_arena *p);
vram_status vram__arena_wake_map_locked(pool_arena *p);
vram_status vram__arena_wake_copy_locked(pool_arena *p);
void        vram__arena_wake_undo_locked(pool_arena *p, int mapped);
void        vram__arena_wake_done_locked(pool_arena *p);
/* A wake refused by the limit, the card's budget or the driver (its message for `what`, a tag or
 * "every block"); nothing counted. */
vram_status vram__arena_wake_oom(pool_arena *p, const char *what, size_t need, grow_result why);
/* The refusal of a request of `size` bytes to an arena asleep (VRAM_ERR_OUT_OF_MEMORY, not counted as
 * an out-of-memory error: nothing is full). */
vram_status vram__arena_asleep_refusal(const pool_arena *p, size_t size);
/* What the arena keeps of a sleep, dropped (its destruction, a private pool index made anew with no block). */
void        vram__arena_sleep_drop(pool_arena *p);
/* The pinned host block kept from the last wake goes back to the driver (vram_trim, the destruction);
 * VRAM_OK, or the driver's refusal (the block is forgotten all the same). */
vram_status vram__arena_host_kept_free_locked(pool_arena *p);

/* ==== the allocation path (arena_alloc.c) ========================================================= */

/* The plan's part of a request it sees (plan_sees): 1 when the plan served it (a plan slot, or the place it
 * chose, handed out here), 0 when best fit must. */
int         vram__alloc_planned_locked(pool_arena *p, size_t size, size_t rounded, void *stream, void **ptr);
/* A request served best fit, through the retry ladder; VRAM_ERR_OUT_OF_MEMORY with p->failed, the
 * cause, for the front door to report. */
vram_status vram__alloc_best_fit_locked(pool_arena *p, size_t size, size_t rounded, int async, void *stream, void **ptr);
/* Hands out `rounded` bytes of chunk c (FREE or PENDING, indexed) to a request on `stream`: maps
 * what is missing under it, puts it in the pointer table, counts it (p->last_taken = the block).
 * On failure (*why says how) nothing changed. */
vram_status vram__arena_take_locked(pool_arena *p, pool_chunk *c, size_t size, size_t rounded, void *stream,
                              void **ptr, grow_result *why);
/* Block c, out of the pointer table, freed at once (VRAM_POOL_FREE_NOW: to the free bins) or on
 * `stream` (PENDING there, with event e or none yet); a block the plan placed goes back to the plan.
 * Gives the arena lock back. */
vram_status vram__free_by_kind_unlock(pool_arena *p, pool_chunk *c, vram__free_kind how, void *stream, pool_event *e);

/* The figures of vram_memory_info: bytes of blocks asleep, bytes of host memory holding them, pinned
 * host memory kept for the next sleep. */
void        vram__sleep_info_locked(const pool_arena *p, vram_memory_info *info);
/* The free of block c (USED, asleep; out of the pointer table) of an arena asleep: no memory involved. */
void        vram__sleep_free_locked(pool_arena *p, pool_chunk *c);
/* vram_check's part: the marks agree with the arena's state and its record. NULL, or why not. */
const char *vram__sleep_check_marks_locked(pool_arena *p);

/* ==== the plan (plan_arena.c, plan_slots.c): plan_arena.h ========================================= */
/* ==== backing memory (backing.c): backing.h ======================================================= */

/* After settle (slot mode left, caches flushed): records and reaps the frees in flight, gives back
 * idle memory beyond `keep` bytes; VRAM_OK, or the driver's refusal (what it refused stays counted). */
vram_status vram__backing_trim_locked(pool_arena *p, size_t keep);
/* The idle tick's first part, without the lock: waits for the fence the last tick recorded on a solo
 * stream; whether it was (1) or not (0); -1 while a capture is underway (nothing this tick). */
int         vram__backing_idle_fence(pool_arena *p);
/* The rest, after settle: gives back the extents idle since the last tick (when `fenced`) and the
 * plain regions above the low-water mark. */
void        vram__backing_idle_release_locked(pool_arena *p, int fenced);
void        vram__vmm_recount_locked(pool_arena *p);   /* the extents' counts of bytes in use, brought up to date */

/* ==== stream order (stream_order.c): stream_order.h =============================================== */

/* c (live) is also used on `stream` (vram_record_stream). */
vram_status vram__uses_add_locked(pool_chunk *c, void *stream);

/* ==== chunks (split_merge.c): split_merge.h ======================================================= */

void        vram__pool_release_used_locked(pool_arena *p, pool_chunk *c);   /* a USED chunk back to the free bins */
/* Gives every block parked in the thread caches back to the free bins. */
void        vram__pool_flush_caches_locked(pool_arena *p);

/* ==== the readers: statistics (stats.c: stats.h), the out-of-memory report (oom.c), the check
 * (pool_check.c), the memory map (pool_snapshot.c). Each reads what the front door settled. ===== */

/* A plan's zone in slot mode as a reader sees it: the record standing for it in the region's list
 * (`zone`, NULL out of slot mode) and its live blocks by address (`live`, `n`), which the record hides. */
typedef struct pool_zone_view {
    const pool_chunk  *zone;
    pool_chunk *const *live;
    size_t             n;
} pool_zone_view;

void        vram__stats_reset_peak_locked(pool_arena *p);
void        vram__stats_reset_accumulated_locked(pool_arena *p);
/* The arena's figures added to what *out holds (arenas.c sums over arenas). `zv`: the plan's zone in
 * slot mode (its `zone` NULL otherwise), read through its live blocks (extents of one granule only). */
void        vram__stats_query_locked(pool_arena *p, const pool_zone_view *zv, vram_allocator_stats *out);
/* The out-of-memory error (counted): this arena's figures, or with `all` those of every arena of the
 * logical device; the largest block a request could get within memory held. */
vram_status vram__oom_report_locked(pool_arena *p, size_t size, size_t rounded, grow_result why, const arena_figures *all);
size_t      vram__pool_largest_free_locked(const pool_arena *p);
/* The consistency check (vram_check) of everything but the sleep's marks: VRAM_OK or VRAM_ERR_INTERNAL. */
vram_status vram__check_locked(pool_arena *p);
void        vram__snapshot_locked(pool_arena *p, int private_pool, vram_segment_info *segs, size_t seg_cap, size_t *nsegs,
                            vram_block_info *blocks, size_t block_cap, size_t *nblocks);

/* Whether addr lies in memory of one of the arena's regions (arena lock held). */
static inline int arena_owns_locked(const pool_arena *p, uint64_t addr) {
    POOL_ASSERT_LOCKED(p);
    for (const pool_region *r = p->regions; r != NULL; r = r->next) {
        if (addr >= r->base && addr - r->base < r->size) return 1;
    }
    return 0;
}

/* The bytes the arena holds beyond its live blocks: reserved - current, 0 when blocks asleep (whose
 * bytes count in current and hold no memory) make current the larger. */
static inline size_t arena_cached(const pool_arena *p) {
    return p->reserved > p->current ? p->reserved - p->current : 0;
}

/* The free bins that index chunk c: the small zone's, the plan's zone's or the rest's. */
static inline free_bins *pool_bins_of(pool_arena *p, const pool_chunk *c) {
    if (c->addr < p->small_end) return c->region == p->vmm ? &p->sbins : &p->bins;
    return __builtin_expect(c->addr >= p->plan.lo, 0) && c->region == p->vmm ? &p->plan.bins : &p->bins;
}

/* Whether addr is where one zone of the VMM region ends and the next begins (the small zone's end,
 * the plan's zone's start; the plan's zone reaches the region's end): chunks never span it and free
 * ones never merge across it. */
static inline int pool_zone_edge(const pool_arena *p, uint64_t addr) {
    return addr == p->small_end || addr == p->plan.lo;   /* (the plan's zone ends the region) */
}

/* the pointer table's shards */
static inline pool_shard *pool_shard_of(pool_arena *p, uint64_t addr) {
    return &p->ptr_table[((addr >> 8) * 0x9e3779b97f4a7c15ull) >> 58];
}

/* The helpers the files of an arena share from headers (pointer_table.h, split_merge.h, stats.h,
 * stream_order.h, backing.h): static but not `inline`, so that the
 * compiler inlines them or not by its own measure, as when they all lived in one file (declared
 * `inline`, the hand-out's registers spilled: 15 instructions more a call, bench/instructions.sh). */
#define POOL_HELPER static __attribute__((unused))

#endif /* VRAM_POOL_ARENA_H */
