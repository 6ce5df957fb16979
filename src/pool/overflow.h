/*
 * overflow.h: a logical device's overflow to host memory (overflow.c; the allocator option
 * overflow:host): blocks of host memory mapped into the device's address space for requests that
 * the device's limit or the card could not serve, up to a cap (overflow_max_mb). arenas.c calls
 * it: a request goes here only after every arena refused it, a free or a use on a stream only when
 * no arena owns the address. It knows the backend only (nothing of the arenas).
 */
#ifndef VRAM_POOL_OVERFLOW_H
#define VRAM_POOL_OVERFLOW_H

#include "pool/arena.h"

typedef struct pool_overflow pool_overflow;

/* For a pool with cfg->overflow; `shared`: its span widens to take the blocks in (vram__pool_may_own)
 * and its capture count is read (no event is recorded or waited for during a capture). */
vram_status vram__overflow_create(const vram__pool_config *cfg, pool_shared *shared, pool_overflow **out);
/* Gives back what frees left waiting (a capture) and the record; the caller checked no block lives. */
vram_status vram__overflow_destroy(pool_overflow *o);
/* Blocks the program holds in host memory, and their bytes. */
size_t      vram__overflow_live(pool_overflow *o, size_t *bytes);
/* Serves `size` bytes (a request on `stream`, NULL for a plain one) from host memory: VRAM_OK, or
 * VRAM_ERR_OUT_OF_MEMORY with the reason in the message (the cap, or the host's refusal with the
 * driver's error name), nothing taken. */
vram_status vram__overflow_alloc(pool_overflow *o, size_t size, void *stream, void **ptr);
/* A free (req as arenas.c gets it): VRAM_ERR_INVALID_POINTER and req->owned 0 when ptr is none of
 * its blocks. A stream-ordered free, or a block used on other streams, waits for those streams
 * before its host memory goes back (no other request may have it before the GPU is done); during a
 * capture it goes back after it. A driver that refuses leaves the block live, its bytes counted. */
vram_status vram__overflow_free(pool_overflow *o, void *ptr, vram__free_req *req);
/* The block at ptr is also used on `stream`; *owned 0 when it is none of its blocks. */
vram_status vram__overflow_record_stream(pool_overflow *o, void *ptr, void *stream, int *owned);
int         vram__overflow_owns(pool_overflow *o, const void *ptr);
/* Its figures into info's overflow_* fields. */
void        vram__overflow_info(pool_overflow *o, vram_memory_info *info);
/* vram_get_allocator_stats' overflow_bytes and overflow_blocks; their resets (peaks: the peaks to the
 * current values, as vram_reset_memory_stats; else allocated and freed to 0, as
 * vram_reset_accumulated_stats). */
void        vram__overflow_stats(pool_overflow *o, vram_allocator_stats *stats);
void        vram__overflow_reset_stats(pool_overflow *o, int peaks);
/* Its counts agree with its blocks and stay under the cap. */
vram_status vram__overflow_check(pool_overflow *o);

#endif /* VRAM_POOL_OVERFLOW_H */
