/*
 * arenas.c: the pool of one logical device as the runtime sees it (pool.h), over one or several
 * arenas (arena.c: each a best-fit allocator with its own lock, free bins, pointer table, thread
 * caches and, in growth, its own reserved address range).
 *
 * A pool starts with one arena and, as long as one thread allocates, is exactly that arena. Once
 * a second thread calls vram_malloc on a pool that grows by mapping (growth with virtual memory
 * management), threads spread over up to cfg.arenas arenas (at most VRAM_POOL_MAX_ARENAS) by the
 * order in which they first called on this pool (the k-th thread, from 0, uses arena k mod
 * cfg.arenas, created on its first request), so that threads that allocate at once do not meet on
 * one lock. What stays shared:
 *   - the limit: every arena draws its physical memory from the logical device's budget (`limit`,
 *     an atomic like the card's), so together they never hold more than the limit; a request that
 *     its arena cannot serve first makes the other arenas give back their idle memory, then is
 *     tried in every arena, and only then fails, with the figures of all arenas in the message;
 *   - frees go to the arena that owns the block, found by its address range without a lock;
 *   - stream-ordered requests (vram_malloc_async, PyTorch's) always use the first arena, where the
 *     same stream reuses its own frees at once.
 * Preallocated pools (the whole limit taken at start) and growth without virtual memory management
 * keep one arena. Statistics add up the arenas, all locked at once so that the figures are of one
 * moment; reserved memory's peak is exact (one total kept as arenas map and unmap), the peak in use
 * is the sum of the arenas' peaks: exact with one arena, never below the exact peak with several.
 *
 * Limits that move (the memory fraction, the live limit, a limit set from outside) are the caps of
 * the shared budget, recomputed here under grow_lock ("limits that move" below). With overflow:host a
 * request every arena refused goes to host memory (overflow.c); the pool's arena count then starts at
 * 2 so that requests and frees take the path of several arenas, where it is tried.
 *
 * Private pools (PyTorch's CUDA-graph pools and torch.cuda.MemPool): arenas of their own, numbered
 * from 0 in creation order (a private pool's index) beside the others, drawing on the same limit, that only requests made into them use. While in
 * use a private arena is pinned: nothing it holds is given back or moved, since a captured graph
 * keeps using the addresses of blocks freed during its capture. Released, it serves no request,
 * its idle memory goes back (at once, on vram_trim, idle release, and when another arena runs
 * out), and once it holds no block its index (arena and address range) serves the next private pool
 * created: indexes are never freed while the pool lives, so a free racing with a release never
 * meets a destroyed arena.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/overflow.h"
#include "pool/plan_arena.h"
#include "pool/arena.h"

#define POOL_ARENAS VRAM_POOL_MAX_ARENAS
#define POOL_PRIVATE VRAM_POOL_MAX_PRIVATE
#define POOL_TAGS VRAM_POOL_MAX_TAGS
enum { PRIVATE_UNUSED = 0, PRIVATE_IN_USE = 1, PRIVATE_RELEASED = 2 };
#define POOL_ARRIVALS 256        /* threads told apart by arrival; later ones go by their sequence */

struct vram__pool {
    vram__pool_config     cfg;
    pool_shared           shared;         /* the limit every arena draws on, the exact reserved total */
    pthread_mutex_t       grow_lock;      /* creating arenas */
    atomic_int            arenas_ok;      /* growth by mapping: more arenas may be created */
    unsigned              arrived[POOL_ARRIVALS];   /* vram__pool_thread_seq of the threads that called
                                                     * vram_malloc here, in arrival order (grow_lock) */
    int                   narrived;
    atomic_int            count;          /* arenas created */
    int                   arenas;         /* most arenas: cfg.arenas */
    uint64_t              uid;            /* this pool among all created in the process */
    _Atomic(pool_arena *) arena[POOL_ARENAS];
    /* each arena's reserved range, set before the arena is published: frees find their arena
     * here, on lines nobody writes, not in the arenas (whose lines their threads keep writing) */
    uint64_t              lo[POOL_ARENAS], hi[POOL_ARENAS];
    /* private pools: indexes in creation order (grow_lock), each arena with its range and state */
    atomic_int            nprivate;
    _Atomic(pool_arena *) priv[POOL_PRIVATE];
    atomic_int            priv_state[POOL_PRIVATE];
    uint64_t              priv_lo[POOL_PRIVATE], priv_hi[POOL_PRIVATE];
    /* tags' arenas (growth by mapping): tag k's at k - 1, created on its first request (grow_lock),
     * with its range; ntags: 1 + the highest k created, for the owner lookup */
    atomic_int            ntags;
    _Atomic(pool_arena *) tagged[POOL_TAGS];
    uint64_t              tag_lo[POOL_TAGS], tag_hi[POOL_TAGS];
};

/* Every arena, private ones and tags' included: i over [0, ALL_ARENAS), in that order (the order in
 * which lock_all takes them). */
static pool_arena *any_arena(vram__pool *p, int i) {
    return i < POOL_ARENAS ? atomic_load_explicit(&p->arena[i], memory_order_acquire)
         : i < POOL_ARENAS + POOL_PRIVATE ? atomic_load_explicit(&p->priv[i - POOL_ARENAS], memory_order_acquire)
                                          : atomic_load_explicit(&p->tagged[i - POOL_ARENAS - POOL_PRIVATE],
                                                                 memory_order_acquire);
}
#define ALL_ARENAS (POOL_ARENAS + POOL_PRIVATE + POOL_TAGS)
/* The private pool's index of arena index i, or -1 for the device's and the tags' arenas. */
static int private_index(int i) {
    return i >= POOL_ARENAS && i < POOL_ARENAS + POOL_PRIVATE ? i - POOL_ARENAS : -1;
}

vram_status vram__pool_create(const vram__pool_config *cfg, vram__pool **out) {
    vram__pool *p = calloc(1, sizeof *p);
    if (p == NULL) return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a pool");
    p->cfg = *cfg;
    p->uid = vram__pool_new_uid();
    atomic_init(&p->shared.budget.reserved, 0);
    atomic_init(&p->shared.budget.cap, cfg->limit);
    atomic_init(&p->shared.fraction, -1.0);
    snprintf(p->shared.budget.cap_source, sizeof p->shared.budget.cap_source, "%s", cfg->limit_source);
    atomic_init(&p->shared.reserved, 0);
    atomic_init(&p->shared.span_lo, UINT64_MAX);
    atomic_init(&p->shared.span_hi, 0);
    atomic_init(&p->shared.peak_reserved, 0);
    atomic_init(&p->shared.captures, 0);
    atomic_init(&p->shared.fraction_cap, SIZE_MAX);
    atomic_init(&p->shared.live_limit, SIZE_MAX);
    atomic_init(&p->shared.external_cap, SIZE_MAX);
    pthread_mutex_init(&p->grow_lock, NULL);
    atomic_init(&p->arenas_ok, cfg->growth && cfg->caps.vmm_supported && (cfg->arenas == 0 || cfg->arenas > 1));
    /* with overflow on, 2: requests and frees take the path of several arenas (alloc_among,
     * pool_owner), where the overflow is tried; the one-arena path stays as it was */
    atomic_init(&p->count, cfg->overflow ? 2 : 1);
    p->arenas = cfg->arenas > 0 && cfg->arenas < POOL_ARENAS ? cfg->arenas : POOL_ARENAS;
    for (int i = 0; i < POOL_ARENAS; i++) atomic_init(&p->arena[i], NULL);
    atomic_init(&p->nprivate, 0);
    for (int i = 0; i < POOL_PRIVATE; i++) {
        atomic_init(&p->priv[i], NULL);
        atomic_init(&p->priv_state[i], PRIVATE_UNUSED);
    }
    atomic_init(&p->ntags, 0);
    for (int i = 0; i < POOL_TAGS; i++) atomic_init(&p->tagged[i], NULL);
    pool_arena *a = NULL;
    vram_status s = cfg->overflow ? vram__overflow_create(cfg, &p->shared, &p->shared.overflow) : VRAM_OK;
    if (s == VRAM_OK) s = vram__arena_create(cfg, &p->shared, &a);
    if (s != VRAM_OK) {
        (void)vram__overflow_destroy(p->shared.overflow);
        pthread_mutex_destroy(&p->grow_lock);
        free(p);
        return s;
    }
    vram__arena_range(a, &p->lo[0], &p->hi[0]);
    if (cfg->plan && a->vmm != NULL) vram__arena_enable_plan(a);
    atomic_store(&p->arena[0], a);
    *out = p;
    return VRAM_OK;
}

vram_status vram__pool_destroy(vram__pool *p) {
    if (p == NULL) return VRAM_OK;
    size_t blocks = 0, bytes = 0;
    for (int i = 0; i < ALL_ARENAS; i++) {
        pool_arena *a = any_arena(p, i);
        size_t b = 0;
        if (a != NULL) blocks += vram__arena_live_count(a, &b);
        bytes += b;
    }
    if (p->shared.overflow != NULL) {
        size_t b = 0;
        blocks += vram__overflow_live(p->shared.overflow, &b);
        bytes += b;
    }
    if (blocks > 0) {
        return vram__fail(VRAM_ERR_CONFLICT, "%s still has %zu live allocations (%zu bytes); free them first",
                          p->cfg.name, blocks, bytes);
    }
    vram_status refusal = VRAM_OK;           /* (no arena has a live block: only the driver refuses) */
    for (int i = 0; i < ALL_ARENAS; i++) {
        pool_arena *a = any_arena(p, i);
        vram_status s = a != NULL ? vram__arena_destroy(a) : VRAM_OK;
        if (refusal == VRAM_OK) refusal = s;
    }
    vram_status s = vram__overflow_destroy(p->shared.overflow);
    if (refusal == VRAM_OK) refusal = s;
    pthread_mutex_destroy(&p->grow_lock);
    free(p);
    return refusal;
}

/* The arena for this thread's plain requests: its place in the order in which threads first
 * called on this pool, so that the first keeps the first arena and the next ones each get one of
 * their own, whatever threads did elsewhere before (a process-wide order left gaps, and two of 8
 * threads could meet on one arena while another stayed unused). */
static int arena_index(vram__pool *p, vram__pool_thread *me) {
    unsigned seq = vram__pool_thread_seq(me);
    pthread_mutex_lock(&p->grow_lock);
    int k = 0;
    while (k < p->narrived && p->arrived[k] != seq) k++;
    if (k == p->narrived) {
        if (k < POOL_ARRIVALS) p->arrived[p->narrived++] = seq;
        else k = (int)(seq % POOL_ARENAS);   /* past POOL_ARRIVALS threads: by their sequence */
    }
    pthread_mutex_unlock(&p->grow_lock);
    return k % p->arenas;
}

/* Arena k, created on first use; NULL when it cannot be (then no more are tried). */
static pool_arena *arena_at(vram__pool *p, int k) {
    pool_arena *a = atomic_load_explicit(&p->arena[k], memory_order_acquire);
    if (a != NULL || !atomic_load(&p->arenas_ok)) return a;
    pthread_mutex_lock(&p->grow_lock);
    a = atomic_load(&p->arena[k]);
    if (a == NULL && atomic_load(&p->arenas_ok)) {
        if (vram__arena_create(&p->cfg, &p->shared, &a) == VRAM_OK) {
            vram__arena_range(a, &p->lo[k], &p->hi[k]);
            atomic_store_explicit(&p->arena[k], a, memory_order_release);
            atomic_fetch_add(&p->count, 1);
        } else {
            a = NULL;                          /* e.g. no address space left: one arena serves all */
            atomic_store(&p->arenas_ok, 0);
        }
    }
    pthread_mutex_unlock(&p->grow_lock);
    return a;
}

/* This thread's arena for vram_malloc: found once per thread and pool (a thread keeps its arena;
 * the first thread keeps the first arena even after others arrive). */
static pool_arena *thread_arena(vram__pool *p, vram__pool_thread *me) {
    vram__pool_thread_arena *mine = &me->arenas[p->uid % VRAM_POOL_THREAD_POOLS];
    if (mine->uid == p->uid) return mine->arena;
    pool_arena *a = atomic_load_explicit(&p->arena[0], memory_order_relaxed);
    if (atomic_load_explicit(&p->arenas_ok, memory_order_relaxed)) {
        int k = arena_index(p, me);
        pool_arena *own = k > 0 ? arena_at(p, k) : NULL;
        if (own != NULL) a = own;              /* NULL: arenas could not be created, the first serves */
    }
    mine->uid = p->uid;
    mine->arena = a;
    return a;
}

static vram_status alloc_among(vram__pool *p, pool_arena *a, vram__pool_thread *me, size_t size, int async,
                               void *stream, void **ptr, int others);
static size_t device_live_bytes(vram__pool *p);

/* Whether the pool gives tags arenas of their own: growth by mapping (elsewhere a tag is ignored, and
 * vram_sleep says why the pool cannot sleep). */
static int pool_tags_arenas(const vram__pool *p) {
    return p->cfg.growth && p->cfg.caps.vmm_supported;
}

/* Tag `tag`'s arena, created on its first request: *a, or NULL when the pool gives tags none. */
static vram_status tag_arena(vram__pool *p, unsigned tag, pool_arena **a) {
    *a = atomic_load_explicit(&p->tagged[tag - 1], memory_order_acquire);
    if (*a != NULL || !pool_tags_arenas(p)) return VRAM_OK;
    vram_status s = VRAM_OK;
    pthread_mutex_lock(&p->grow_lock);
    *a = atomic_load(&p->tagged[tag - 1]);
    if (*a == NULL) {
        vram__pool_config cfg = p->cfg;      /* the device's options, but no thread caches nor plan */
        cfg.thread_cache = 0;
        cfg.plan = 0;
        s = vram__arena_create(&cfg, &p->shared, a);
        if (s == VRAM_OK) {
            (*a)->tag = tag;
            vram__arena_range(*a, &p->tag_lo[tag - 1], &p->tag_hi[tag - 1]);
            atomic_store_explicit(&p->tagged[tag - 1], *a, memory_order_release);
            if (atomic_load(&p->ntags) < (int)tag) atomic_store(&p->ntags, (int)tag);
            atomic_fetch_add(&p->count, 1);           /* frees now search beyond the first arena */
        } else {
            s = vram__fail_wrap(s, "an address range of its own for the tag '%s' on %s", vram__tag_name(tag),
                                p->cfg.name);
            *a = NULL;
        }
    }
    pthread_mutex_unlock(&p->grow_lock);
    return s;
}

/* A request of a thread with a tag: into the tag's arena (others are not tried: its blocks live in its
 * range alone), or the device's arenas as any where the pool gives tags none. */
static VRAM_NOINLINE vram_status alloc_tagged(vram__pool *p, vram__pool_thread *me, size_t size, int async,
                                              void *stream, void **ptr) {
    pool_arena *a = NULL;
    vram_status s = size <= p->cfg.limit ? tag_arena(p, me->tag, &a) : VRAM_OK;
    if (s != VRAM_OK) return s;
    if (a != NULL) return alloc_among(p, a, me, size, async, stream, ptr, 0);
    a = async || size > p->cfg.limit ? atomic_load_explicit(&p->arena[0], memory_order_relaxed) : thread_arena(p, me);
    if (atomic_load_explicit(&p->count, memory_order_relaxed) == 1 || size > p->cfg.limit)
        return vram__arena_alloc(a, me, size, async, stream, ptr, NULL);
    return alloc_among(p, a, me, size, async, stream, ptr, !async);
}

vram_status vram__pool_alloc(vram__pool *p, vram__pool_thread *me, size_t size, int async, void *stream,
                             void **ptr) {
    if (__builtin_expect(me->tag != 0, 0)) return alloc_tagged(p, me, size, async, stream, ptr);
    pool_arena *a = async || size > p->cfg.limit ? atomic_load_explicit(&p->arena[0], memory_order_relaxed)
                                                 : thread_arena(p, me);
    if (atomic_load_explicit(&p->count, memory_order_relaxed) == 1 || (size > p->cfg.limit && !p->cfg.overflow))
        return vram__arena_alloc(a, me, size, async, stream, ptr, NULL);   /* one arena: as it always was */
    return alloc_among(p, a, me, size, async, stream, ptr, !async);
}

/* A request of arena a when the pool has several: when a cannot serve it, the others give back
 * their idle memory and a tries again, then (`others`) every arena is tried; the out-of-memory
 * error then has the figures of all arenas. */
static vram_status alloc_among(vram__pool *p, pool_arena *a, vram__pool_thread *me, size_t size, int async,
                               void *stream, void **ptr, int others) {
    grow_result why = GROW_OK;
    vram_status s = vram__arena_alloc(a, me, size, async, stream, ptr, &why);
    if (s != VRAM_ERR_OUT_OF_MEMORY) return s;
    if (why == GROW_ASLEEP) return vram__arena_asleep_refusal(a, size);   /* (no other arena serves its requests) */
    /* The limit is shared: the other arenas give back their idle memory, once their stream-ordered
     * frees in flight have completed (a private pool in use gives nothing), then each is tried. */
    for (int i = 0; i < ALL_ARENAS && size <= p->cfg.limit; i++) {
        pool_arena *b = any_arena(p, i);
        if (b != NULL && b != a) vram__arena_trim_settled(b);
    }
    if (size <= p->cfg.limit) s = vram__arena_alloc(a, me, size, async, stream, ptr, &why);
    for (int i = 0; i < POOL_ARENAS && s == VRAM_ERR_OUT_OF_MEMORY && others && size <= p->cfg.limit; i++) {
        pool_arena *b = atomic_load(&p->arena[i]);
        grow_result other_why = GROW_OK;
        if (b != NULL && b != a) s = vram__arena_alloc(b, me, size, 0, NULL, ptr, &other_why);
    }
    if (s != VRAM_ERR_OUT_OF_MEMORY) return s;
    /* host memory, for the device's own requests (a private pool's stay on the card: its graph's) */
    char host_why[512] = "";
    int device_arena = 0;
    for (int i = 0; i < POOL_ARENAS; i++) device_arena |= atomic_load(&p->arena[i]) == a;
    if (p->shared.overflow != NULL && device_arena) {
        s = vram__overflow_alloc(p->shared.overflow, size, async ? stream : NULL, ptr);
        if (s == VRAM_OK) return s;
        snprintf(host_why, sizeof host_why, "%s", vram_last_error());
    }
    vram_memory_info info;                             /* every arena's figures, of one moment */
    vram__pool_info(p, me, &info);
    arena_figures all = {info.current - info.asleep_bytes, info.reserved, info.largest_free_block};   /* (on the card) */
    s = vram__arena_oom(a, size, vram__round_up(size, VRAM_POOL_UNIT), why, &all);
    if (host_why[0] == '\0') return s;
    char device_why[1536];                             /* (vram__fail writes where vram_last_error reads) */
    snprintf(device_why, sizeof device_why, "%s", vram_last_error());
    return vram__fail(s, "%s; %s", device_why, host_why);
}

int vram__pool_may_own(vram__pool *p, const void *ptr) {
    uint64_t addr = (uint64_t)(uintptr_t)ptr;
    return addr >= atomic_load_explicit(&p->shared.span_lo, memory_order_relaxed) &&
           addr < atomic_load_explicit(&p->shared.span_hi, memory_order_relaxed);
}

/* The arena whose memory holds addr, each asked under its lock (a block of a plain region); NULL
 * when none. Out of line: only frees in plain regions of a pool of several arenas come here. */
static VRAM_NOINLINE pool_arena *owner_by_memory(vram__pool *p, uint64_t addr) {
    for (int i = 0; i < ALL_ARENAS; i++) {
        pool_arena *a = any_arena(p, i);
        if (a == NULL) continue;
        vram__arena_lock(a, NULL);
        int owns = arena_owns_locked(a, addr);
        vram__arena_unlock(a);
        if (owns) return a;
    }
    return NULL;
}

/* The one owner lookup of a pointer, for frees, record_stream and IPC: the arena or private pool
 * whose reserved range holds addr (growth by mapping), else the one whose memory holds it
 * (owner_by_memory); NULL when none does. The free path calls it only when the pool has several
 * arenas. */
static inline __attribute__((always_inline)) pool_arena *pool_owner(vram__pool *p, uint64_t addr) {
    for (int i = 0; i < POOL_ARENAS; i++) {
        pool_arena *a = atomic_load_explicit(&p->arena[i], memory_order_acquire);
        if (a != NULL && addr >= p->lo[i] && addr < p->hi[i]) return a;
    }
    int np = atomic_load_explicit(&p->nprivate, memory_order_acquire);
    for (int i = 0; i < np; i++) {
        pool_arena *a = atomic_load_explicit(&p->priv[i], memory_order_acquire);
        if (a != NULL && addr >= p->priv_lo[i] && addr < p->priv_hi[i]) return a;
    }
    int nt = atomic_load_explicit(&p->ntags, memory_order_acquire);
    for (int i = 0; i < nt; i++) {
        pool_arena *a = atomic_load_explicit(&p->tagged[i], memory_order_acquire);
        if (a != NULL && addr >= p->tag_lo[i] && addr < p->tag_hi[i]) return a;
    }
    return owner_by_memory(p, addr);
}

/* A pointer in no arena's memory: *owned 0 (the caller, which asks every pool, says so). */
static vram_status not_owned(const char *call, void *ptr, int *owned) {
    *owned = 0;
    return vram__fail(VRAM_ERR_INVALID_POINTER, "%s(%p): not in the memory of this logical device", call, ptr);
}

/* A free of an address no arena holds: a block in host memory (overflow), or none of the pool's. */
static VRAM_NOINLINE vram_status free_elsewhere(vram__pool *p, void *ptr, vram__free_req *req) {
    if (p->shared.overflow != NULL) {
        vram_status s = vram__overflow_free(p->shared.overflow, ptr, req);
        if (s == VRAM_OK || req->owned) return s;
    }
    return not_owned(vram__pool_free_name(req->how), ptr, &req->owned);
}

vram_status vram__pool_free(vram__pool *p, vram__pool_thread *me, void *ptr, vram__free_req *req) {
    if (atomic_load_explicit(&p->count, memory_order_relaxed) == 1)
        return vram__arena_free(atomic_load_explicit(&p->arena[0], memory_order_relaxed), me, ptr, req);
    pool_arena *a = pool_owner(p, (uint64_t)(uintptr_t)ptr);
    return a != NULL ? vram__arena_free(a, me, ptr, req) : free_elsewhere(p, ptr, req);
}

vram_status vram__pool_record_stream(vram__pool *p, void *ptr, void *stream, int *owned) {
    pool_arena *a = pool_owner(p, (uint64_t)(uintptr_t)ptr);
    if (a == NULL && p->shared.overflow != NULL) {
        vram_status s = vram__overflow_record_stream(p->shared.overflow, ptr, stream, owned);
        if (s == VRAM_OK || *owned) return s;
    }
    return a != NULL ? vram__arena_record_stream(a, ptr, stream, owned) : not_owned("vram_record_stream", ptr, owned);
}

vram_status vram__pool_ipc_export(vram__pool *p, void *ptr, unsigned char *out, size_t capacity, size_t *length,
                                  size_t *offset, int *owned) {
    pool_arena *a = pool_owner(p, (uint64_t)(uintptr_t)ptr);
    if (a == NULL && p->shared.overflow != NULL && vram__overflow_owns(p->shared.overflow, ptr)) {
        *owned = 1;
        return vram__fail(VRAM_ERR_UNSUPPORTED, "vram_ipc_export(%p): the block lives in host memory (overflow:host), "
                          "which is not shared with other processes", ptr);
    }
    return a != NULL ? vram__arena_ipc_export(a, ptr, out, capacity, length, offset, owned)
                     : not_owned("vram_ipc_export", ptr, owned);
}

/* Every arena locked (in order, with the set of arenas frozen), so that the figures add up to one
 * moment; none of the pool's paths holds two arena locks otherwise. */
/* Every arena's lock, as thread `me` (NULL: one of the pool's own threads), so that a thread
 * querying its own arena keeps the lock's bias (lock.h). */
static void lock_all(vram__pool *p, const vram__pool_thread *me) {
    pthread_mutex_lock(&p->grow_lock);
    for (int i = 0; i < ALL_ARENAS; i++) {
        pool_arena *a = any_arena(p, i);
        if (a != NULL) vram__arena_lock(a, me);
    }
}

static void unlock_all(vram__pool *p) {
    for (int i = ALL_ARENAS - 1; i >= 0; i--) {
        pool_arena *a = any_arena(p, i);
        if (a != NULL) vram__arena_unlock(a);
    }
    pthread_mutex_unlock(&p->grow_lock);
}

void vram__pool_info(vram__pool *p, const vram__pool_thread *me, vram_memory_info *info) {
    *info = (vram_memory_info){0};
    lock_all(p, me);
    for (int i = 0; i < ALL_ARENAS; i++) {
        pool_arena *a = any_arena(p, i);
        if (a == NULL) continue;
        vram_memory_info one;
        vram__arena_info_locked(a, &one);
        info->current += one.current;
        info->peak += one.peak;
        info->reserved += one.reserved;
        info->limit = one.limit;
        if (one.largest_free_block > info->largest_free_block) info->largest_free_block = one.largest_free_block;
        info->num_allocs += one.num_allocs;
        info->num_frees += one.num_frees;
        info->num_ooms += one.num_ooms;
        info->num_driver_allocs += one.num_driver_allocs;
        info->num_driver_frees += one.num_driver_frees;
        info->num_driver_moves += one.num_driver_moves;
        info->plan_bytes += one.plan_bytes;
        info->plan_steps += one.plan_steps;
        info->plan_ends += one.plan_ends;
        info->plan_given_back += one.plan_given_back;
        info->plan_slot_steps += one.plan_slot_steps;
        info->plan_refused += one.plan_refused;
        info->asleep_bytes += one.asleep_bytes;
        info->asleep_host_bytes += one.asleep_host_bytes;
        info->host_kept_bytes += one.host_kept_bytes;
    }
    info->peak_reserved = atomic_load(&p->shared.peak_reserved);   /* exact: one total, not a sum */
    unlock_all(p);
    vram__pool_limit_now(p, &info->live_limit, &info->over_limit);
    if (p->shared.overflow != NULL) vram__overflow_info(p->shared.overflow, info);
}

void vram__pool_reset_peak(vram__pool *p, const vram__pool_thread *me) {
    lock_all(p, me);
    for (int i = 0; i < ALL_ARENAS; i++) {
        pool_arena *a = any_arena(p, i);
        if (a != NULL) vram__arena_reset_peak_locked(a);
    }
    atomic_store(&p->shared.peak_reserved, atomic_load(&p->shared.reserved));
    unlock_all(p);
    if (p->shared.overflow != NULL) vram__overflow_reset_stats(p->shared.overflow, 1);
}

/* ---- limits that move ----------------------------------------------------------------------- *
 *
 * The logical device's budget cap is the least of its limit (cfg.limit, fixed at start), the memory
 * fraction's bytes and the live limit: each call that moves one stores it and recomputes the cap
 * under grow_lock (so that two such calls at once leave the least of what they set); a limit set
 * from outside the process (runtime/limits.c) is one more, and caps the card's budget too. Requests read
 * the cap when they take memory from the card (arena_headroom), so a lower cap refuses from the next
 * request on; what the pool holds above it stays until it is idle: it goes back at once
 * (vram__pool_fit), and live blocks bring it down as they are freed. Nothing raises the cap above
 * cfg.limit. The card's budget (runtime.c) has its own cap, lowered by a limit set from outside the
 * process (runtime/limits.c), which vram__pool_fit honours too. */

static void cap_update(vram__pool *p) {
    pthread_mutex_lock(&p->grow_lock);
    size_t cap = p->cfg.limit, f = atomic_load(&p->shared.fraction_cap), l = atomic_load(&p->shared.live_limit);
    size_t e = atomic_load(&p->shared.external_cap);
    if (f < cap) cap = f;
    if (l < cap) cap = l;
    if (e < cap) cap = e;
    atomic_store(&p->shared.budget.cap, cap);
    pthread_mutex_unlock(&p->grow_lock);
}

void vram__pool_fit(vram__pool *p) {
    if (!p->cfg.growth) return;          /* a preallocation keeps its region: blocks are checked against the cap */
    size_t cap = atomic_load(&p->shared.budget.cap), live = device_live_bytes(p);
    size_t keep = cap > live ? cap - live : 0;
    vram__card_budget *card = p->cfg.budget;
    if (card != NULL) {                  /* the card's room for this pool: its cap less what the others hold */
        size_t ccap = atomic_load(&card->cap), held = atomic_load(&card->reserved);
        size_t mine = atomic_load(&p->shared.budget.reserved), others = held > mine ? held - mine : 0;
        size_t room = ccap > others ? ccap - others : 0, ckeep = room > live ? room - live : 0;
        if (ckeep < keep) keep = ckeep;
    }
    (void)vram__pool_trim(p, keep);      /* idle memory beyond goes back */
}

void vram__pool_set_fraction(vram__pool *p, size_t cap, double fraction) {
    atomic_store(&p->shared.fraction, fraction);
    atomic_store(&p->shared.fraction_cap, cap);
    cap_update(p);
    vram__pool_fit(p);
}

void vram__pool_set_live_limit(vram__pool *p, size_t bytes) {
    atomic_store(&p->shared.live_limit, bytes);
    cap_update(p);
    vram__pool_fit(p);
}

size_t vram__pool_live_limit(vram__pool *p) {
    return atomic_load(&p->shared.live_limit);
}

void vram__pool_set_external_limit(vram__pool *p, size_t bytes) {
    atomic_store(&p->shared.external_cap, bytes);
    cap_update(p);
    vram__pool_fit(p);
}

void vram__pool_limit_now(vram__pool *p, size_t *limit, size_t *over) {
    size_t cap = atomic_load(&p->shared.budget.cap), held = atomic_load(&p->shared.budget.reserved);
    vram__card_budget *card = p->cfg.budget;
    if (!p->cfg.growth) {                 /* a preallocation holds its limit: its blocks are what count */
        held = device_live_bytes(p);
    } else if (card != NULL) {
        size_t ccap = atomic_load(&card->cap), all = atomic_load(&card->reserved);
        size_t others = all > held ? all - held : 0, room = ccap > others ? ccap - others : 0;
        if (room < cap) cap = room;
    }
    *limit = cap;
    *over = held > cap ? held - cap : 0;
}

double vram__pool_fraction(vram__pool *p) {
    double f = atomic_load(&p->shared.fraction);
    return f >= 0 ? f : 1.0;
}

void vram__pool_allocator_stats(vram__pool *p, const vram__pool_thread *me, vram_allocator_stats *stats) {
    *stats = (vram_allocator_stats){0};
    lock_all(p, me);
    for (int i = 0; i < ALL_ARENAS; i++) {
        pool_arena *a = any_arena(p, i);
        if (a != NULL) vram__arena_allocator_stats_locked(a, stats);
    }
    unlock_all(p);
    if (p->shared.overflow != NULL) vram__overflow_stats(p->shared.overflow, stats);   /* (its lock: no arena's held) */
}

void vram__pool_reset_accumulated(vram__pool *p) {
    lock_all(p, NULL);
    for (int i = 0; i < ALL_ARENAS; i++) {
        pool_arena *a = any_arena(p, i);
        if (a != NULL) vram__arena_reset_accumulated_locked(a);
    }
    unlock_all(p);
    if (p->shared.overflow != NULL) vram__overflow_reset_stats(p->shared.overflow, 0);
}

/* The bytes of the blocks the program holds in device memory. */
static size_t device_live_bytes(vram__pool *p) {
    size_t n = 0;
    for (int i = 0; i < ALL_ARENAS; i++) {
        pool_arena *a = any_arena(p, i);
        if (a != NULL) n += vram__arena_live_bytes(a);
    }
    return n;
}

size_t vram__pool_live_bytes(vram__pool *p) {
    size_t host = 0;
    if (p->shared.overflow != NULL) (void)vram__overflow_live(p->shared.overflow, &host);
    return device_live_bytes(p) + host;
}

/* The other arenas give back all they can (private pools in use nothing), the first keeps at most
 * keep_bytes. */
vram_status vram__pool_trim(vram__pool *p, size_t keep_bytes) {
    vram_status refusal = VRAM_OK;
    for (int i = ALL_ARENAS - 1; i >= 0; i--) {
        pool_arena *a = any_arena(p, i);
        vram_status s = a != NULL ? vram__arena_trim(a, i == 0 ? keep_bytes : 0) : VRAM_OK;
        if (refusal == VRAM_OK) refusal = s;
        if (a != NULL) {                              /* (sleep.c: the pinned host block of a sleep) */
            vram__arena_lock(a, NULL);
            s = vram__arena_host_kept_free_locked(a);
            vram__arena_unlock(a);
        }
        if (refusal == VRAM_OK) refusal = s;
    }
    return refusal;
}

/* ---- private pools ---------------------------------------------------------------------------- */

vram_status vram__pool_private_create(vram__pool *p, unsigned tag, int *id) {
    pthread_mutex_lock(&p->grow_lock);
    int n = atomic_load(&p->nprivate), k = 0;
    for (; k < n; k++) {                               /* a released index with no block left */
        size_t bytes = 0;
        if (atomic_load(&p->priv_state[k]) == PRIVATE_RELEASED && vram__arena_live_count(p->priv[k], &bytes) == 0) break;
    }
    vram_status s = VRAM_OK;
    if (k == n && n == POOL_PRIVATE) {
        s = vram__fail(VRAM_ERR_OUT_OF_MEMORY, "%s: %d private pools are in use or still hold blocks (the most "
                       "there can be)", p->cfg.name, POOL_PRIVATE);
    } else if (k == n) {
        vram__pool_config cfg = p->cfg;                /* growth on demand whatever the device's mode */
        cfg.growth = 1;
        cfg.hold_peak = 0;
        cfg.hold_large = 0;
        cfg.small_max = 0;
        cfg.thread_cache = 0;
        pool_arena *a = NULL;
        s = vram__arena_create(&cfg, &p->shared, &a);
        if (s == VRAM_OK) {
            vram__arena_range(a, &p->priv_lo[k], &p->priv_hi[k]);
            atomic_store(&p->priv[k], a);
            atomic_store(&p->nprivate, n + 1);
            atomic_fetch_add(&p->count, 1);            /* frees now search beyond the first arena */
        }
    }
    if (s == VRAM_OK) {
        pool_arena *a = p->priv[k];
        vram__arena_lock(a, NULL);
        vram__arena_sleep_drop(a);                           /* (an index made anew: it slept with no block left) */
        a->tag = pool_tags_arenas(p) ? tag : 0;        /* its blocks carry its creator's tag */
        vram__arena_unlock(a);
        vram__arena_set_pinned(a, 1);
        atomic_store(&p->priv_state[k], PRIVATE_IN_USE);
        *id = k;
    }
    pthread_mutex_unlock(&p->grow_lock);
    return s;
}

/* Private pool `id` in use, or NULL with the error set. */
static pool_arena *private_in_use(vram__pool *p, int id, const char *fn) {
    if (id < 0 || id >= atomic_load(&p->nprivate) || atomic_load(&p->priv_state[id]) != PRIVATE_IN_USE) {
        (void)vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s: %d is no private pool in use on %s", fn, id, p->cfg.name);
        return NULL;
    }
    return atomic_load(&p->priv[id]);
}

vram_status vram__pool_private_alloc(vram__pool *p, vram__pool_thread *me, int id, size_t size, void *stream,
                                     void **ptr) {
    pool_arena *a = private_in_use(p, id, "vram_private_malloc_async");
    return a != NULL ? alloc_among(p, a, me, size, 1, stream, ptr, 0) : VRAM_ERR_INVALID_ARGUMENT;
}

vram_status vram__pool_private_release(vram__pool *p, int id) {
    pthread_mutex_lock(&p->grow_lock);
    pool_arena *a = private_in_use(p, id, "vram_private_pool_release");
    if (a != NULL) {
        atomic_store(&p->priv_state[id], PRIVATE_RELEASED);
        vram__arena_set_pinned(a, 0);
        vram__arena_trim(a, 0);                              /* its idle memory goes back now */
    }
    pthread_mutex_unlock(&p->grow_lock);
    return a != NULL ? VRAM_OK : VRAM_ERR_INVALID_ARGUMENT;
}

vram_status vram__pool_capture(vram__pool *p, int begin) {
    if (begin) {
        atomic_fetch_add(&p->shared.captures, 1);
        return VRAM_OK;
    }
    int n = atomic_load(&p->shared.captures);
    while (n > 0 && !atomic_compare_exchange_weak(&p->shared.captures, &n, n - 1)) {
    }
    if (n > 0) return VRAM_OK;
    return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_capture_end: no capture is underway on %s", p->cfg.name);
}

vram_status vram__pool_private_alloc_at(vram__pool *p, int id, void *ptr, size_t size, void *stream) {
    pool_arena *a = private_in_use(p, id, "vram_private_malloc_at");
    return a != NULL ? vram__arena_alloc_at(a, (uint64_t)(uintptr_t)ptr, size, stream) : VRAM_ERR_INVALID_ARGUMENT;
}

void vram__pool_segments(vram__pool *p, vram_segment_info *segs, size_t seg_cap, size_t *nsegs,
                         vram_block_info *blocks, size_t block_cap, size_t *nblocks) {
    *nsegs = *nblocks = 0;
    lock_all(p, NULL);
    for (int i = 0; i < ALL_ARENAS; i++) {
        pool_arena *a = any_arena(p, i);
        int priv = private_index(i);
        if (a != NULL && (priv < 0 || atomic_load(&p->priv_state[priv]) != PRIVATE_UNUSED))
            vram__arena_snapshot_locked(a, priv, segs, seg_cap, nsegs, blocks, block_cap, nblocks);
    }
    unlock_all(p);
}

vram_status vram__pool_private_blocks(vram__pool *p, int id, void **out, size_t capacity, size_t *count) {
    pool_arena *a = private_in_use(p, id, "vram_private_pool_blocks");
    if (a == NULL) return VRAM_ERR_INVALID_ARGUMENT;
    *count = vram__arena_live_blocks(a, out, capacity);
    return VRAM_OK;
}

void vram__pool_idle_tick(vram__pool *p) {
    for (int i = 0; i < ALL_ARENAS; i++) {
        pool_arena *a = any_arena(p, i);
        if (a != NULL) vram__arena_idle_tick(a);
    }
}

vram_status vram__pool_check(vram__pool *p) {
    for (int i = 0; i < ALL_ARENAS; i++) {
        pool_arena *a = any_arena(p, i);
        vram_status s = a != NULL ? vram__arena_check(a) : VRAM_OK;
        if (s != VRAM_OK) return s;
    }
    if (atomic_load(&p->shared.budget.reserved) > p->cfg.limit ||
        atomic_load(&p->shared.reserved) > atomic_load(&p->shared.budget.reserved)) {
        return vram__fail(VRAM_ERR_INTERNAL, "vram_check(%s): its arenas hold more than its limit", p->cfg.name);
    }
    return p->shared.overflow != NULL ? vram__overflow_check(p->shared.overflow) : VRAM_OK;
}

/* ---- sleep and wake ---------------------------------------------------------------------------- */

/* The arenas of `tag` (0: every arena) that sleep and wake with it, locked in index order: the tag's
 * arena, the private pools created under it (in use, or released and still holding blocks). grow_lock
 * held (no arena is created meanwhile). Returns how many. */
static int lock_tag_arenas(vram__pool *p, unsigned tag, pool_arena **out) {
    int n = 0;
    for (int i = 0; i < ALL_ARENAS; i++) {
        pool_arena *a = any_arena(p, i);
        int priv = private_index(i);
        size_t bytes = 0;
        if (a == NULL || (tag != 0 && a->tag != tag)) continue;
        if (priv >= 0 && (atomic_load(&p->priv_state[priv]) == PRIVATE_UNUSED ||
                          (atomic_load(&p->priv_state[priv]) == PRIVATE_RELEASED && vram__arena_live_count(a, &bytes) == 0)))
            continue;
        vram__arena_lock(a, NULL);
        out[n++] = a;
    }
    return n;
}

static void unlock_arenas(pool_arena **a, int n) {
    for (int i = n - 1; i >= 0; i--) vram__arena_unlock(a[i]);
}

/* What `tag` names in messages: "the tag 'kv'", or "every block" for 0. */
static void tag_words(unsigned tag, char *out, size_t len) {
    if (tag != 0) snprintf(out, len, "the tag '%s'", vram__tag_name(tag));
    else snprintf(out, len, "%s", "every block");
}

/* Why the pool cannot sleep at all (preallocation, growth without mapping: its first arena says), or
 * VRAM_OK. No lock held. */
static vram_status sleep_unsupported(vram__pool *p, const char *call) {
    if (pool_tags_arenas(p)) return VRAM_OK;
    pool_arena *a = atomic_load(&p->arena[0]);
    vram__arena_lock(a, NULL);
    vram_status s = vram__arena_sleep_check_locked(a);
    vram__arena_unlock(a);
    return s != VRAM_OK ? vram__fail_wrap(s, "%s", call) : VRAM_OK;
}

/* A tag that names no arena of the pool (n 0): VRAM_ERR_INVALID_ARGUMENT; else VRAM_OK. */
static vram_status sleep_targets(vram__pool *p, unsigned tag, int n, const char *call) {
    if (n == 0 && tag != 0) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s: no block of %s was ever allocated under the tag '%s' "
                          "(vram_set_tag)", call, p->cfg.name, vram__tag_name(tag));
    }
    return VRAM_OK;
}

/* The idle memory of the pool's arenas that are not among a[0 .. n) (locked by the caller) goes back,
 * once their frees in flight have completed: room under the limit for a wake, as a request that does
 * not fit gets it (alloc_among). grow_lock held: no other path holds two arena locks meanwhile. */
static void trim_others(vram__pool *p, pool_arena **a, int n) {
    for (int i = 0; i < ALL_ARENAS; i++) {
        pool_arena *b = any_arena(p, i);
        int mine = 0;
        for (int k = 0; k < n && !mine; k++) mine = a[k] == b;
        if (b != NULL && !mine) vram__arena_trim_settled(b);
    }
}

/* Wakes a[0 .. n) (asleep), all or nothing, among all[0 .. nall) (locked: the tag's arenas); `what` and
 * `call` name the tag and the call in messages. */
static vram_status wake_locked(vram__pool *p, pool_arena **all, int nall, pool_arena **a, int n, const char *what,
                               const char *call) {
    vram_status s = VRAM_OK;
    size_t need = 0;
    int planned = 0, taken = 0, mapped = 0;          /* how many arenas went through each step */
    grow_result why = GROW_OK;
    for (; planned < n && s == VRAM_OK; planned++) {
        size_t one = 0;
        s = vram__arena_wake_plan_locked(a[planned], &one);
        need += one;
    }
    for (int again = 1; taken < n && s == VRAM_OK; taken++) {   /* the budgets, all at once */
        why = vram__arena_wake_budget_locked(a[taken]);
        if (why != GROW_OK && again) {               /* the other arenas' idle memory first, once */
            again = 0;
            trim_others(p, all, nall);
            why = vram__arena_wake_budget_locked(a[taken]);
        }
        if (why != GROW_OK) s = vram__arena_wake_oom(a[taken], what, need, why);
    }
    while (mapped < n && s == VRAM_OK) {             /* (one the driver refused counts: what it mapped goes back) */
        pool_arena *b = a[mapped++];
        s = vram__arena_wake_map_locked(b);
        if (s == VRAM_ERR_OUT_OF_MEMORY) s = vram__arena_wake_oom(b, what, need, GROW_DRIVER);
        else if (s != VRAM_OK) s = vram__fail_wrap(s, "%s", call);
    }
    for (int i = 0; i < n && s == VRAM_OK; i++) {
        s = vram__arena_wake_copy_locked(a[i]);
        if (s != VRAM_OK) s = vram__fail_wrap(s, "%s", call);
    }
    for (int i = 0; i < n; i++) {
        if (s == VRAM_OK) vram__arena_wake_done_locked(a[i]);
        else if (i < planned) vram__arena_wake_undo_locked(a[i], i < mapped);
    }
    return s;
}

vram_status vram__pool_sleep(vram__pool *p, unsigned tag, int offload) {
    pool_arena *a[ALL_ARENAS], *slept[ALL_ARENAS];
    char call[192], what[96];
    tag_words(tag, what, sizeof what);
    snprintf(call, sizeof call, "vram_sleep(%s, %s)", p->cfg.name, what);
    vram_status s = sleep_unsupported(p, call);
    if (s != VRAM_OK) return s;
    pthread_mutex_lock(&p->grow_lock);
    int n = lock_tag_arenas(p, tag, a);
    s = sleep_targets(p, tag, n, call);
    for (int i = 0; i < n && s == VRAM_OK; i++) {   /* every one checked before any sleeps */
        s = vram__arena_sleep_check_locked(a[i]);
        if (s != VRAM_OK) s = vram__fail_wrap(s, "%s", call);
    }
    /* A failure that left an arena awake (a copy, pinned host memory, a stream that cannot be waited
     * for) wakes those this call put to sleep before it: all or nothing. An arena that went to sleep
     * though the driver kept some of its memory (a refused unmap) counts as asleep: the others go on,
     * and the refusal is returned at the end. */
    int nslept = 0;
    vram_status kept = VRAM_OK;
    char why[1024] = "";
    for (int i = 0; i < n && s == VRAM_OK; i++) {
        int before = a[i]->asleep;
        vram_status one = vram__arena_sleep_locked(a[i], offload);
        if (!before && a[i]->asleep) slept[nslept++] = a[i];
        if (one != VRAM_OK && a[i]->asleep) {
            if (kept == VRAM_OK) kept = vram__fail_wrap(one, "%s", call);
            if (why[0] == '\0') snprintf(why, sizeof why, "%s", vram_last_error());
        } else if (one != VRAM_OK) {
            s = vram__fail_wrap(one, "%s", call);
        }
    }
    if (s != VRAM_OK && nslept > 0) {
        snprintf(why, sizeof why, "%s", vram_last_error());
        vram_status back = wake_locked(p, a, n, slept, nslept, what, call);
        if (back == VRAM_OK) s = vram__fail(s, "%s", why);
        else s = vram__fail(s, "%s; the memory that had gone to sleep before could not wake again (%s): vram_wake "
                            "brings it back", why, vram_last_error());
    } else if (s == VRAM_OK && kept != VRAM_OK) {
        s = vram__fail(kept, "%s", why);
    }
    unlock_arenas(a, n);
    pthread_mutex_unlock(&p->grow_lock);
    return s;
}

vram_status vram__pool_wake(vram__pool *p, unsigned tag) {
    pool_arena *all[ALL_ARENAS], *a[ALL_ARENAS];
    char call[192], what[96];
    tag_words(tag, what, sizeof what);
    snprintf(call, sizeof call, "vram_wake(%s, %s)", p->cfg.name, what);
    pthread_mutex_lock(&p->grow_lock);
    int nall = lock_tag_arenas(p, tag, all), n = 0;
    vram_status s = nall == 0 && tag != 0 ? sleep_targets(p, tag, 0, call) : VRAM_OK;
    for (int i = 0; i < nall; i++) {
        if (all[i]->asleep) a[n++] = all[i];
    }
    if (s == VRAM_OK) s = wake_locked(p, all, nall, a, n, what, call);
    unlock_arenas(all, nall);
    pthread_mutex_unlock(&p->grow_lock);
    return s;
}
