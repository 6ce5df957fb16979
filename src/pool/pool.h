/*
 * pool.h: the allocator of one logical device (arenas.c over one or several arenas, each a
 * best-fit, coalescing allocator: arena.c); all bookkeeping on the host.
 *
 * The pool takes device memory from the backend either all at creation (a fixed region of the
 * whole limit, as TensorFlow's BFC without growth) or on demand (growth): then an address range
 * of twice the limit is reserved, blocks are placed in it best-fit, and physical memory is mapped
 * under them as they are handed out and given back when idle (see backing.c and vmm.c). Without
 * virtual memory management on the device, growth takes extra plain regions.
 *
 * The pool knows the backend only; the runtime gives it a limit, the card's shared budget and a
 * description of where the limit came from (for out-of-memory messages). The limit may be lowered
 * and raised back while the pool runs, never above it (a fraction, a live limit, a limit set from
 * outside); with overflow on, what the device cannot serve goes to host memory mapped for it.
 */
#ifndef VRAM_POOL_H
#define VRAM_POOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* The memory a physical card may give all its logical devices together; shared by their pools. */
typedef struct vram__card_budget {
    _Atomic size_t reserved;   /* bytes held by all pools of the card */
    _Atomic size_t cap;        /* SIZE_MAX when the card has no limit of its own (a logical device's
                                  may be lowered while the pool runs: vram__pool_set_fraction) */
    char           cap_source[VRAM_SOURCE_LEN];
    _Atomic size_t external;   /* a limit set on the process from outside it (the runtime's
                                  vram__limit_post), SIZE_MAX: none; cap is then at most this */
    struct ledger_member *member;   /* the process in the ledger with ledger slots of its own (runtime/limits.c),
                                       or NULL: every take from the card passes its gate, every give is
                                       published (common/ledger_member.h); set before the pools exist */
    int            member_card;     /* the card's index there */
    _Atomic size_t overflow;        /* with a member: the host bytes of the card's pools' overflow */
} vram__card_budget;

typedef struct vram__pool_config {
    const vram__backend *backend;
    int                  dev;            /* backend ordinal */
    int                  growth;         /* 1: take memory on demand; 0: the whole limit at creation */
                                         /* growth maps into one reserved range when caps.vmm_supported */
    size_t               limit;          /* hard cap on this pool's reserved bytes */
    char                 limit_source[VRAM_SOURCE_LEN]; /* "VRAM_MEMORY_LIMIT=6GiB", "logical device configuration", ... */
    vram__device_caps    caps;
    vram__card_budget   *budget;         /* may be NULL */
    size_t               max_extent;     /* growth: largest physical extent mapped at once; larger ones
                                            cost fewer driver calls, smaller ones go back more finely.
                                            0: limit / 256, between one granule and 256 MiB;
                                            limit / 128, at most 1 GiB, from 64 GiB (arena.h);
                                            one granule when limit_chosen or plan (with plan and
                                            no chosen limit, the default size still for the
                                            large blocks of a load: backing.c) */
    int                  limit_chosen;   /* the limit was set for this pool (an environment variable,
                                            vram_set_memory_limit, a fraction, a logical device's size),
                                            not the default of the whole card: a program is expected to
                                            run close to it, so growth maps granule by granule, and every
                                            idle granule can be moved under a block or given back */
    int                  hold_peak;      /* growth: give idle extents back rather than raise the peak */
    int                  plan;           /* growth by mapping: the first arena finds the repeating step
                                            and places it from its plan (plan_arena.h); 0: off */
    size_t               hold_large;     /* growth: the same for blocks of at least this size only
                                            (0: none) */
    size_t               map_ahead;      /* growth: most bytes mapped beyond a block when growing */
    size_t               small_max;      /* growth by mapping: requests of at most this size go to an
                                            address range of their own (0: none) */
    int                  arenas;         /* growth by mapping: most arenas threads spread over
                                            (1..VRAM_POOL_MAX_ARENAS; 0: the most) */
    size_t               thread_cache;   /* bytes of freed blocks one thread cache may park (0: none;
                                            VRAM_POOL_TCACHE_AUTO: limit / 256, at most 64 MiB) */
    char                 name[64];       /* "/device:GPU:0", for messages */
    int                  overflow;       /* 1: a request the device cannot serve gets host memory mapped
                                            for the device (overflow.c); 0: it fails */
    size_t               overflow_max;   /* the most bytes of host memory the overflow holds at once */
} vram__pool_config;

#define VRAM_POOL_TCACHE_AUTO SIZE_MAX
#define VRAM_POOL_MAX_ARENAS 8
#define VRAM_POOL_MAX_PRIVATE 64

typedef struct vram__pool vram__pool;

/* What the pool remembers of a thread: its arrival order, its arena in the last pools it used and
 * its thread cache. The caller keeps it in its own thread-local record, zeroed at first, and passes
 * it to every call, so that a call looks its thread up once (through libvram.so every thread-local
 * lookup is a __tls_get_addr call). */
#define VRAM_POOL_THREAD_POOLS 4
typedef struct vram__pool_thread_arena {
    uint64_t           uid;                         /* a pool (its uid) ... */
    struct pool_arena *arena;                       /* ... and the thread's arena there */
} vram__pool_thread_arena;
typedef struct vram__pool_thread {
    unsigned                 seq;                   /* 1 + the order of the thread's first call; 0: none yet */
    unsigned                 tag;                   /* vram_set_tag's: the tag its requests carry (tags.c; 0:
                                                       none). Written by the thread itself only */
    vram__pool_thread_arena  arenas[VRAM_POOL_THREAD_POOLS];   /* the last pools, by uid */
    const struct pool_arena *tc_pool;               /* the last arena whose cache the thread took */
    uint64_t                 tc_uid;
    struct pool_tcache      *tc;
} vram__pool_thread;

/* Tags (tags.c): the names the program gives its allocations (vram_set_tag), numbered from 1 in the
 * order they were first set, process-wide, kept until the process ends (their names are read without a
 * lock). A tag is 1 to VRAM_POOL_TAG_MAX bytes of printable ASCII. */
#define VRAM_POOL_MAX_TAGS 32
#define VRAM_POOL_TAG_MAX 63
/* The number of `name` (interned now if new): VRAM_ERR_INVALID_ARGUMENT for a malformed name,
 * VRAM_ERR_CONFLICT when VRAM_POOL_MAX_TAGS tags exist already; `call` names the caller in messages. */
vram_status vram__tag_intern(const char *call, const char *name, unsigned *id);
/* VRAM_ERR_INVALID_ARGUMENT (saying why, `call` naming the caller) for a malformed name; else VRAM_OK. */
vram_status vram__tag_check(const char *call, const char *name);
/* The number of `name`, or 0 when it was never interned (or is malformed). */
unsigned    vram__tag_find(const char *name);
/* The name of tag `id` (from 1), NULL for 0 or a number that is none. */
const char *vram__tag_name(unsigned id);

/* Creates a pool; without growth takes the whole limit from the driver now. */
vram_status vram__pool_create(const vram__pool_config *cfg, vram__pool **out);
/* Returns every byte to the driver. VRAM_ERR_CONFLICT (and nothing freed) while blocks are live;
 * the pool is gone after any other return, and a driver's refusal to free memory (lost to the pool,
 * still held by the driver) is returned with its message. */
vram_status vram__pool_destroy(vram__pool *pool);

/* How a free is ordered (vram__pool_free): */
typedef enum vram__free_kind {
    VRAM_POOL_FREE_NOW = 0,            /* vram_free: free for everyone at once */
    VRAM_POOL_FREE_EVENT = 1,          /* vram_free_async: ordered on `stream` by an event recorded at the free */
    VRAM_POOL_FREE_OWNED_STREAM = 2,   /* on a stream the caller keeps alive for as long as the pool lives
                                        * (PyTorch's streams): no event per free; the pool records one per
                                        * stream for a batch of them */
    VRAM_POOL_FREE_ALLOC_STREAM = 3,   /* the same on the stream the block was allocated on (stream-ordered
                                        * requests; NULL, the legacy default stream, for a plain one); the
                                        * `stream` argument is ignored */
} vram__free_kind;

/* me: the calling thread's own record (never another thread's: nothing guards it). stream: NULL
 * for vram_malloc, the caller's stream when async. See stream_order.c for the stream rules. */
vram_status vram__pool_alloc(vram__pool *pool, vram__pool_thread *me, size_t size, int async, void *stream,
                             void **ptr);
/* A free as the pool is asked it (vram__pool_free, vram__arena_free): how it is ordered and on which
 * stream; and, set by the pool, whether ptr lies inside memory the pool holds (live or not), so
 * that a caller looking for the owner of a pointer needs one call per pool (the pool's answer is
 * final when owned is set). */
typedef struct vram__free_req {
    vram__free_kind how;
    void           *stream;
    int             owned;    /* out */
} vram__free_req;

/* VRAM_ERR_INVALID_POINTER when ptr is not a live block of this pool (nothing changes); req->owned
 * as above. */
vram_status vram__pool_free(vram__pool *pool, vram__pool_thread *me, void *ptr, vram__free_req *req);
/* 0 when ptr lies outside every address the pool ever held (a quick test, no lock): with several
 * logical devices, a free asks only the pools that may own its block. */
int         vram__pool_may_own(vram__pool *pool, const void *ptr);
/* The live block at ptr is also used on `stream`: its free waits for that stream (stream_order.c, "blocks
 * used on other streams"). VRAM_ERR_INVALID_POINTER when it is no live block of this pool; *owned as
 * vram__free_req's owned. */
vram_status vram__pool_record_stream(vram__pool *pool, void *ptr, void *stream, int *owned);
/* The live block at ptr shared with another process (vram_ipc_export); *owned as vram__free_req's. */
vram_status vram__pool_ipc_export(vram__pool *pool, void *ptr, unsigned char *out, size_t capacity, size_t *length,
                                  size_t *offset, int *owned);
/* The public call behind a free of that kind, for messages. */
static inline const char *vram__pool_free_name(vram__free_kind how) {
    return how == VRAM_POOL_FREE_NOW ? "vram_free" : how == VRAM_POOL_FREE_EVENT ? "vram_free_async"
         : how == VRAM_POOL_FREE_OWNED_STREAM ? "vram_plugin_free" : "vram_plugin_release";
}

/* Private pools (arenas.c): arenas of their own on the same limit, for requests made into them only
 * (PyTorch's CUDA-graph pools). Each call says why it refused; `id` is the private pool's index. */
/* The pool carries `tag` (its creator's: vram_set_tag; 0 none): it sleeps and wakes with the tag. */
vram_status vram__pool_private_create(vram__pool *pool, unsigned tag, int *id);
vram_status vram__pool_private_alloc(vram__pool *pool, vram__pool_thread *me, int id, size_t size, void *stream,
                                     void **ptr);
vram_status vram__pool_private_release(vram__pool *pool, int id);
vram_status vram__pool_capture(vram__pool *pool, int begin);   /* vram_capture_begin/_end */
vram_status vram__pool_private_blocks(vram__pool *pool, int id, void **out, size_t capacity, size_t *count);
vram_status vram__pool_private_alloc_at(vram__pool *pool, int id, void *ptr, size_t size, void *stream);
/* Every arena's segments and blocks (vram_get_segments). */
void        vram__pool_segments(vram__pool *pool, vram_segment_info *segs, size_t seg_cap, size_t *nsegs,
                                vram_block_info *blocks, size_t block_cap, size_t *nblocks);

/* me: the calling thread's record (the arena lock's bias stays its own: pool/lock.h) */
void        vram__pool_info(vram__pool *pool, const vram__pool_thread *me, vram_memory_info *info);
void        vram__pool_reset_peak(vram__pool *pool, const vram__pool_thread *me);
/* From now on the pool holds at most min(its limit, cap) bytes: PyTorch's memory fraction, `fraction`
 * of the card (for messages and vram__pool_fraction). Idle memory beyond goes back now. */
void        vram__pool_set_fraction(vram__pool *pool, size_t cap, double fraction);
double      vram__pool_fraction(vram__pool *pool);   /* 1 until set */
/* The program's own limit while it runs (vram_set_live_limit): from now on the pool holds at most
 * min(its limit, the fraction's, bytes) (bytes at most cfg.limit: the caller checks), and the idle
 * memory beyond goes back now; SIZE_MAX lifts it. Live blocks stay: until they are freed the pool
 * holds more than its limit, and requests for more device memory fail (or overflow). */
void        vram__pool_set_live_limit(vram__pool *pool, size_t bytes);
size_t      vram__pool_live_limit(vram__pool *pool);   /* SIZE_MAX until set */
/* The same for a limit set on the process from outside (its card's: runtime/limits.c), SIZE_MAX
 * none; the card's budget is capped too, so that the card's logical devices stay under it together. */
void        vram__pool_set_external_limit(vram__pool *pool, size_t bytes);
/* The limit in force now (the least of the pool's limit, the fraction's, the live limit and what
 * its card's budget leaves it), and the bytes the pool holds above it (0 when under). */
void        vram__pool_limit_now(vram__pool *pool, size_t *limit, size_t *over);
/* Gives idle memory back until the pool holds no more than its own cap and its card's budget allow
 * (the card's external limit lowered: runtime/limits.c); live blocks stay. */
void        vram__pool_fit(vram__pool *pool);
/* PyTorch's figures of every arena (vram_get_allocator_stats) and their accumulated counts' reset. */
void        vram__pool_allocator_stats(vram__pool *pool, const vram__pool_thread *me, vram_allocator_stats *stats);
void        vram__pool_reset_accumulated(vram__pool *pool);
size_t      vram__pool_live_bytes(vram__pool *pool);   /* of the blocks the program holds, in host memory too */
/* Gives cached memory back to the driver until at most keep_bytes are reserved beyond live blocks
 * (as far as whole extents and regions allow). Memory whose free the driver refuses stays reserved
 * (it still holds it) and the refusal is returned with the driver's message; else VRAM_OK. */
vram_status vram__pool_trim(vram__pool *pool, size_t keep_bytes);
/* Idle release, called once a period: gives back the mapped extents that no block used since
 * before the previous tick, and plain regions up to the lowest reserved - current seen since the
 * previous tick; then starts a new period. */
void        vram__pool_idle_tick(vram__pool *pool);
vram_status vram__pool_check(vram__pool *pool);

/* Sleep and wake (sleep.c for one arena, arenas.c over them): the arenas of tag `tag` (the tag's own,
 * and the private pools created under it; 0: every arena) give their physical memory back once the
 * streams their blocks were used on have finished, their blocks' bytes first copied to pinned host
 * memory when `offload`; their addresses stay reserved. Every arena involved is checked before any
 * sleeps (VRAM_ERR_UNSUPPORTED for a pool that cannot keep its addresses without its memory, with the
 * reason; VRAM_ERR_CONFLICT for a capture underway or memory shared with another process;
 * VRAM_ERR_INVALID_ARGUMENT for a tag no block of the pool ever carried). An arena asleep stays so. A
 * failure that leaves an arena awake (a copy, pinned host memory, a stream wait) wakes those the call
 * had put to sleep: all or nothing. */
vram_status vram__pool_sleep(vram__pool *pool, unsigned tag, int offload);
/* Maps physical memory again under the blocks of the arenas of `tag` (0: every arena) asleep, at
 * their addresses, and copies their bytes back: all or nothing, within the limit, the card's budget
 * and what the driver gives, else VRAM_ERR_OUT_OF_MEMORY (or the driver's failure) and every arena
 * stays asleep as it was. */
vram_status vram__pool_wake(vram__pool *pool, unsigned tag);

#endif /* VRAM_POOL_H */
