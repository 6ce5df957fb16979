/*
 * api_memory.c: the public functions of vram.h on a started runtime's memory: allocation and free
 * (plain, stream-ordered, PyTorch's owned-stream and release frees, record_stream), the logical
 * device of a card, private pools and captures, tags and sleep and wake, sharing with other processes
 * (IPC), statistics,
 * the memory fraction and the live limit, trim and check; and the layout of vram_memory_info for bindings (which
 * needs no runtime). Each checks its arguments, enters the runtime (its read side, one
 * thread-local record a call), finds the logical device's pool and hands over (ON_POOL, for the calls
 * on one logical device's pool).
 *
 * Invariant: a call that entered the runtime leaves it on every path (vram__rt_leave).
 * Locks: the runtime's read side only; the pool takes its own (docs/DESIGN.md, "Locks, in order").
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pool/ipc.h"
#include "runtime/runtime.h"

#define rt vram__rt

/* ---- allocation ------------------------------------------------------------------------------ */

/* The first logical device on physical card `physical_index` (runtime entered): *k, or a failure. */
static vram_status logical_on_card(int physical_index, int *k) {
    int i = 0;
    while (i < rt.nlogical && rt.logical[i].info.physical_index != physical_index) i++;
    if (i == rt.nlogical) {
        return vram__fail(VRAM_ERR_UNRECOGNIZED_DEVICE, "Unrecognized device: %d (no visible logical device on "
                          "that physical device)", physical_index);
    }
    *k = i;
    return VRAM_OK;
}

vram_status vram_logical_device_of(int physical_index, int *logical_device) {
    vram__thread *me = vram__rt_self();
    if (logical_device == NULL) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_logical_device_of: logical_device is NULL");
    }
    vram_status s = vram__rt_enter_started(me);
    if (s != VRAM_OK) return s;
    s = logical_on_card(physical_index, logical_device);
    vram__rt_leave(me);
    return s;
}

/* Enters the started runtime and finds the logical device's pool (the read lock is held on OK). */
static vram_status enter_logical(vram__thread *me, int logical_device, vram__pool **pool) {
    vram_status s = vram__rt_enter_started(me);
    if (s != VRAM_OK) return s;
    if (logical_device < 0 || logical_device >= rt.nlogical) {
        s = vram__fail(VRAM_ERR_UNRECOGNIZED_DEVICE, "Unrecognized device: %d (logical devices are 0..%d)",
                       logical_device, rt.nlogical - 1);
        vram__rt_leave(me);
        return s;
    }
    *pool = rt.logical[logical_device].pool;
    return VRAM_OK;
}

/* The body of a call on one logical device's pool: enters the runtime and finds the pool (`p`; `me` is
 * the caller's record), runs the statements given (which may set `s`, VRAM_OK until then), leaves the
 * runtime and returns s. Every call below that works on one pool is this, after its argument checks. */
#define ON_POOL(logical_device, ...)                                     \
    do {                                                                 \
        vram__thread *me = vram__rt_self();                              \
        vram__pool *p = NULL;                                            \
        vram_status s = enter_logical(me, (logical_device), &p);         \
        if (s != VRAM_OK) return s;                                      \
        __VA_ARGS__;                                                     \
        vram__rt_leave(me);                                              \
        return s;                                                        \
    } while (0)

/* Allocates from `pool` (runtime entered) and leaves the runtime. */
static vram_status alloc_in(vram__thread *me, vram__pool *pool, void **ptr, size_t size, int async, void *stream) {
    vram_status s = VRAM_OK;
    if (size == 0) *ptr = NULL;
    else s = vram__pool_alloc(pool, &me->pool, size, async, stream, ptr);
    vram__rt_leave(me);
    return s;
}

static vram_status alloc_on(void **ptr, size_t size, int logical_device, int async, void *stream) {
    if (ptr == NULL) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s: ptr is NULL", async ? "vram_malloc_async" : "vram_malloc");
    }
    vram__thread *me = vram__rt_self();
    vram__pool *pool = NULL;
    vram_status s = enter_logical(me, logical_device, &pool);
    return s == VRAM_OK ? alloc_in(me, pool, ptr, size, async, stream) : s;
}

static vram_status free_on(void *ptr, vram__free_kind how, void *stream) {
    if (ptr == NULL) return VRAM_OK;
    vram__thread *me = vram__rt_self();
    if (!vram__rt_read_enter(me)) {
        return vram__fail(VRAM_ERR_INVALID_POINTER, "%s(%p): the runtime is not started, so this pointer "
                          "was not allocated by vram", vram__pool_free_name(how), ptr);
    }
    vram__free_req req = {how, stream, 0};
    for (int k = 0; k < rt.nlogical; k++) {
        if (rt.nlogical > 1 && !vram__pool_may_own(rt.logical[k].pool, ptr)) continue;   /* another's */
        vram_status s = vram__pool_free(rt.logical[k].pool, &me->pool, ptr, &req);
        if (s == VRAM_OK || req.owned) {
            vram__rt_leave(me);
            return s;
        }
    }
    vram__rt_leave(me);
    return vram__fail(VRAM_ERR_INVALID_POINTER, "%s(%p): this pointer was not allocated by vram",
                      vram__pool_free_name(how), ptr);
}

vram_status vram_malloc(void **ptr, size_t size, int logical_device) {
    return alloc_on(ptr, size, logical_device, 0, NULL);
}

vram_status vram_free(void *ptr) {
    return free_on(ptr, VRAM_POOL_FREE_NOW, NULL);
}

vram_status vram_malloc_async(void **ptr, size_t size, int logical_device, void *stream) {
    return alloc_on(ptr, size, logical_device, 1, stream);
}

vram_status vram_free_async(void *ptr, void *stream) {
    return free_on(ptr, VRAM_POOL_FREE_EVENT, stream);
}

vram_status vram__malloc_async_on_card(void **ptr, size_t size, int physical_index, void *stream) {
    vram__thread *me = vram__rt_self();
    int k = 0;
    vram_status s = vram__rt_enter_started(me);
    if (s != VRAM_OK) return s;
    if ((s = logical_on_card(physical_index, &k)) != VRAM_OK) {
        vram__rt_leave(me);
        return s;
    }
    return alloc_in(me, rt.logical[k].pool, ptr, size, 1, stream);
}

vram_status vram__free_async_owned_stream(void *ptr, void *stream) {
    return free_on(ptr, VRAM_POOL_FREE_OWNED_STREAM, stream);
}

/* Finds the block's pool as free_on does, with loops of its own: one search shared by both (the
 * pool call chosen by an argument) cost the free path 9-17 instructions a call (bench/instructions.sh). */
vram_status vram_record_stream(void *ptr, void *stream) {
    if (ptr == NULL) return VRAM_OK;                   /* nothing to wait for, as vram_free(NULL) */
    vram__thread *me = vram__rt_self();
    if (!vram__rt_read_enter(me)) {
        return vram__fail(VRAM_ERR_INVALID_POINTER, "vram_record_stream(%p): the runtime is not started, so this "
                          "pointer was not allocated by vram", ptr);
    }
    for (int k = 0; k < rt.nlogical; k++) {
        int owned = 0;
        if (rt.nlogical > 1 && !vram__pool_may_own(rt.logical[k].pool, ptr)) continue;   /* another's */
        vram_status s = vram__pool_record_stream(rt.logical[k].pool, ptr, stream, &owned);
        if (s == VRAM_OK || owned) {
            vram__rt_leave(me);
            return s;
        }
    }
    vram__rt_leave(me);
    return vram__fail(VRAM_ERR_INVALID_POINTER, "vram_record_stream(%p): this pointer was not allocated by vram", ptr);
}

vram_status vram__free_on_alloc_stream(void *ptr) {
    return free_on(ptr, VRAM_POOL_FREE_ALLOC_STREAM, NULL);
}

/* ---- private pools --------------------------------------------------------------------------- */

vram_status vram_private_pool_create(int logical_device, int *pool) {
    if (pool == NULL) return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_private_pool_create: pool is NULL");
    ON_POOL(logical_device, s = vram__pool_private_create(p, me->pool.tag, pool));
}

vram_status vram_private_malloc_async(void **ptr, size_t size, int logical_device, int pool, void *stream) {
    if (ptr == NULL) return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_private_malloc_async: ptr is NULL");
    ON_POOL(logical_device, *ptr = NULL; if (size > 0) s = vram__pool_private_alloc(p, &me->pool, pool, size, stream, ptr));
}

vram_status vram_private_pool_release(int logical_device, int pool) {
    ON_POOL(logical_device, s = vram__pool_private_release(p, pool));
}

static vram_status capture_call(int logical_device, int begin) {
    ON_POOL(logical_device, s = vram__pool_capture(p, begin));
}

vram_status vram_capture_begin(int logical_device) {
    return capture_call(logical_device, 1);
}

vram_status vram_capture_end(int logical_device) {
    return capture_call(logical_device, 0);
}

vram_status vram_private_pool_blocks(int logical_device, int pool, void **out, size_t capacity, size_t *count) {
    if (count == NULL || (out == NULL && capacity > 0)) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_private_pool_blocks: count must not be NULL, and out "
                          "may be NULL only when capacity is 0");
    }
    ON_POOL(logical_device, s = vram__pool_private_blocks(p, pool, out, capacity, count));
}

vram_status vram_private_malloc_at(void *ptr, size_t size, int logical_device, int pool, void *stream) {
    ON_POOL(logical_device, s = vram__pool_private_alloc_at(p, pool, ptr, size, stream));
}

/* ---- tags, sleep and wake ------------------------------------------------------------------------- */

vram_status vram_set_tag(const char *tag) {
    vram__thread *me = vram__rt_self();
    unsigned id = 0;
    if (tag != NULL) {
        vram_status s = vram__tag_intern("vram_set_tag", tag, &id);
        if (s != VRAM_OK) return s;
    }
    me->pool.tag = id;                                 /* (the thread's own record: no lock) */
    return VRAM_OK;
}

vram_status vram_get_tag(const char **tag) {
    if (tag == NULL) return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_get_tag: tag is NULL");
    *tag = vram__tag_name(vram__rt_self()->pool.tag);
    return VRAM_OK;
}

/* The number of tag `tag` for vram_sleep and vram_wake (`call`): 0 for NULL; a tag never set is
 * VRAM_ERR_INVALID_ARGUMENT, as a malformed one. */
static vram_status tag_asked(const char *call, const char *tag, unsigned *id) {
    *id = 0;
    if (tag == NULL) return VRAM_OK;
    unsigned found = vram__tag_find(tag);
    if (found != 0) {
        *id = found;
        return VRAM_OK;
    }
    vram_status s = vram__tag_check(call, tag);          /* (says what is malformed; nothing interned) */
    if (s != VRAM_OK) return s;
    return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s: no allocation was ever made under the tag '%s' (vram_set_tag)",
                      call, tag);
}

vram_status vram_sleep(int logical_device, const char *tag, vram_sleep_mode mode) {
    if (mode != VRAM_SLEEP_OFFLOAD && mode != VRAM_SLEEP_DISCARD) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_sleep: mode %d is neither VRAM_SLEEP_OFFLOAD (0) nor "
                          "VRAM_SLEEP_DISCARD (1)", (int)mode);
    }
    unsigned id = 0;
    vram_status asked = tag_asked("vram_sleep", tag, &id);
    if (asked != VRAM_OK) return asked;
    ON_POOL(logical_device, s = vram__pool_sleep(p, id, mode == VRAM_SLEEP_OFFLOAD));
}

vram_status vram_wake(int logical_device, const char *tag) {
    unsigned id = 0;
    vram_status asked = tag_asked("vram_wake", tag, &id);
    if (asked != VRAM_OK) return asked;
    ON_POOL(logical_device, s = vram__pool_wake(p, id));
}

/* ---- sharing with other processes -------------------------------------------------------------- */

vram_status vram_ipc_export(void *ptr, void *handle, size_t capacity, size_t *length, size_t *offset) {
    if (ptr == NULL || length == NULL || offset == NULL || (handle == NULL && capacity > 0)) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_ipc_export: ptr, length and offset must not be NULL, "
                          "and handle may be NULL only when capacity is 0");
    }
    vram__thread *me = vram__rt_self();
    if (!vram__rt_read_enter(me)) {
        return vram__fail(VRAM_ERR_INVALID_POINTER, "vram_ipc_export(%p): the runtime is not started, so this "
                          "pointer was not allocated by vram", ptr);
    }
    vram_status s = VRAM_ERR_INVALID_POINTER;
    int owned = 0;
    for (int k = 0; k < rt.nlogical && !owned; k++) {
        if (!vram__pool_may_own(rt.logical[k].pool, ptr)) continue;
        s = vram__pool_ipc_export(rt.logical[k].pool, ptr, handle, capacity, length, offset, &owned);
        if (s == VRAM_OK) owned = 1;
    }
    vram__rt_leave(me);
    if (!owned && s == VRAM_ERR_INVALID_POINTER) {
        s = vram__fail(s, "vram_ipc_export(%p): this pointer was not allocated by vram", ptr);
    }
    return s;
}

vram_status vram_ipc_open(int physical_device, const void *handle, size_t length, void **ptr) {
    vram__thread *me = vram__rt_self();
    vram_status s = vram__rt_enter_started(me);
    if (s != VRAM_OK) return s;
    if (physical_device < 0 || physical_device >= rt.ndev) {
        s = vram__fail(VRAM_ERR_UNRECOGNIZED_DEVICE, "Unrecognized device: %d (physical devices are 0..%d)",
                       physical_device, rt.ndev - 1);
    } else {
        s = vram__ipc_open(rt.backend, physical_device, handle, length, ptr);
    }
    vram__rt_leave(me);
    return s;
}

vram_status vram_ipc_close(void *ptr) {
    vram__thread *me = vram__rt_self();
    vram_status s = vram__rt_enter_started(me);
    if (s != VRAM_OK) return s;
    s = vram__ipc_close(rt.backend, ptr);
    vram__rt_leave(me);
    return s;
}

/* ---- statistics ------------------------------------------------------------------------------ */

vram_status vram_get_segments(int logical_device, vram_segment_info *segments, size_t segment_capacity,
                              size_t *nsegments, vram_block_info *blocks, size_t block_capacity, size_t *nblocks) {
    if (nsegments == NULL || nblocks == NULL || (segments == NULL && segment_capacity > 0) ||
        (blocks == NULL && block_capacity > 0)) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_get_segments: the counts must not be NULL, and an "
                          "array may be NULL only when its capacity is 0");
    }
    ON_POOL(logical_device, vram__pool_segments(p, segments, segment_capacity, nsegments, blocks, block_capacity, nblocks));
}

vram_status vram_get_memory_info(int logical_device, vram_memory_info *info) {
    if (info == NULL) return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_get_memory_info: info is NULL");
    ON_POOL(logical_device, vram__pool_info(p, &me->pool, info));
}

int vram_memory_info_field(int i, const char **name, const char **type, size_t *offset, size_t *size) {
    static const struct { const char *name, *type; size_t offset, size; } fields[] = {
#define VRAM_FIELD_ROW_(t, n) { #n, #t, offsetof(vram_memory_info, n), sizeof(t) },
        VRAM_MEMORY_INFO_FIELDS(VRAM_FIELD_ROW_)
#undef VRAM_FIELD_ROW_
    };
    if (i < 0 || (size_t)i >= sizeof fields / sizeof fields[0]) return 0;
    if (name != NULL) *name = fields[i].name;
    if (type != NULL) *type = fields[i].type;
    if (offset != NULL) *offset = fields[i].offset;
    if (size != NULL) *size = fields[i].size;
    return 1;
}

vram_status vram_reset_memory_stats(int logical_device) {
    ON_POOL(logical_device, vram__pool_reset_peak(p, &me->pool));
}

vram_status vram_get_allocator_stats(int logical_device, vram_allocator_stats *stats) {
    if (stats == NULL) return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_get_allocator_stats: stats is NULL");
    ON_POOL(logical_device, vram__pool_allocator_stats(p, &me->pool, stats));
}

vram_status vram_reset_accumulated_stats(int logical_device) {
    ON_POOL(logical_device, vram__pool_reset_accumulated(p));
}

vram_status vram_set_memory_fraction(int logical_device, double fraction) {
    if (!(fraction >= 0.0 && fraction <= 1.0)) {      /* (NaN too) */
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_set_memory_fraction: invalid fraction value: %g. "
                          "Allowed range: 0~1", fraction);
    }
    ON_POOL(logical_device,
            size_t total = rt.devices[rt.logical[logical_device].info.physical_index].total_bytes;
            vram__pool_set_fraction(p, (size_t)(fraction * (double)total), fraction);
            vram__limits_watch());                     /* over it: idle memory goes back at the next calls */
}

vram_status vram_get_memory_fraction(int logical_device, double *fraction) {
    if (fraction == NULL) return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_get_memory_fraction: fraction is NULL");
    ON_POOL(logical_device, *fraction = vram__pool_fraction(p));
}

/* vram_set_live_limit's work on the pool (runtime entered). */
static vram_status set_live_limit(vram__pool *p, int logical_device, size_t bytes) {
    size_t configured = rt.logical[logical_device].info.memory_limit_bytes;
    if (bytes > configured) {
        return vram__fail(VRAM_ERR_CONFLICT, "vram_set_live_limit(%d, %zu): more than the %zu bytes the "
                          "configuration allowed %s (a live limit may be lowered and raised back up to that, not "
                          "beyond)", logical_device, bytes, configured, rt.logical[logical_device].info.name);
    }
    vram__pool_set_live_limit(p, bytes);
    vram__limits_watch();                              /* over it: idle memory goes back at the next calls */
    return VRAM_OK;
}

vram_status vram_set_live_limit(int logical_device, size_t bytes) {
    ON_POOL(logical_device, s = set_live_limit(p, logical_device, bytes));
}

vram_status vram_get_live_limit(int logical_device, size_t *bytes, size_t *configured) {
    if (bytes == NULL) return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_get_live_limit: bytes is NULL");
    ON_POOL(logical_device,
            size_t limit = rt.logical[logical_device].info.memory_limit_bytes, live = vram__pool_live_limit(p);
            *bytes = live < limit ? live : limit;
            if (configured != NULL) *configured = limit);
}

vram_status vram_trim(int logical_device, size_t keep_bytes) {
    ON_POOL(logical_device, s = vram__pool_trim(p, keep_bytes));
}

vram_status vram_check(int logical_device) {
    vram__thread *me = vram__rt_self();
    if (!vram__rt_read_enter(me)) return VRAM_OK;
    vram_status s = VRAM_OK;
    if (logical_device >= rt.nlogical) {
        s = vram__fail(VRAM_ERR_UNRECOGNIZED_DEVICE, "Unrecognized device: %d", logical_device);
    }
    for (int k = 0; k < rt.nlogical && s == VRAM_OK; k++) {
        if (logical_device < 0 || k == logical_device) s = vram__pool_check(rt.logical[k].pool);
    }
    vram__rt_leave(me);
    return s;
}
