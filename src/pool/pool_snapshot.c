/*
 * pool_snapshot.c: the memory map of an arena for PyTorch's memory snapshots (vram_get_segments):
 * segments, the pieces of device memory held (a mapped run of growth's reserved range, or a plain
 * region), and the chunks over them in address order, cut at the segments' edges.
 *
 * A reader (arena.h): the front door settles the arena first (slot mode left: the zone's blocks as
 * chunks; the thread caches flushed: parked blocks are free for the program). Under the arena lock
 * (arenas.c takes every arena's at once); reads the chunks, the pointer-table state a chunk carries
 * and the VMM region's granule bitmap, changes nothing.
 */
#include "pool/arena.h"

typedef struct snap_out {
    vram_segment_info *segs;
    size_t             seg_cap, nsegs;
    vram_block_info   *blocks;
    size_t             block_cap, nblocks;
} snap_out;

static void snap_block(snap_out *o, const pool_chunk *c, uint64_t lo, uint64_t hi) {
    if (o->nblocks < o->block_cap) {
        int deferred = c->state == CHUNK_USED && c->uses != NULL && c->uses->nevents > 0;
        int allocated = c->state == CHUNK_USED && !c->cached && !deferred;
        o->blocks[o->nblocks] = (vram_block_info){
            .address = lo,
            .size = (size_t)(hi - lo),
            .requested = allocated ? c->req : 0,
            .allocated = allocated,
            .active = allocated || deferred,
            .stream = allocated ? c->stream : NULL,
        };
    }
    o->nblocks++;
}

/* A segment [lo, hi) with the chunks over it, from *c on (left at the first chunk that reaches past). */
static void snap_segment(snap_out *o, const pool_arena *p, int private_pool, int expandable, uint64_t lo,
                         uint64_t hi, const pool_chunk **c) {
    if (o->nsegs < o->seg_cap) {
        o->segs[o->nsegs] = (vram_segment_info){
            .address = lo,
            .size = (size_t)(hi - lo),
            .private_pool = private_pool,
            .small = expandable && lo < p->small_end,
            .expandable = expandable,
            .first_block = o->nblocks,
        };
    }
    size_t first = o->nblocks;
    while (*c != NULL && (*c)->addr + (*c)->size <= lo) *c = (*c)->next;
    for (; *c != NULL && (*c)->addr < hi; *c = (*c)->next) {
        uint64_t a = (*c)->addr > lo ? (*c)->addr : lo, end = (*c)->addr + (*c)->size;
        snap_block(o, *c, a, end < hi ? end : hi);
        if (end > hi) break;                      /* it goes on in the next segment */
    }
    if (o->nsegs < o->seg_cap) o->segs[o->nsegs].nblocks = o->nblocks - first;
    o->nsegs++;
}

void vram__snapshot_locked(pool_arena *p, int private_pool, vram_segment_info *segs, size_t seg_cap, size_t *nsegs,
                     vram_block_info *blocks, size_t block_cap, size_t *nblocks) {
    POOL_ASSERT_LOCKED(p);
    snap_out o = {segs, seg_cap, *nsegs, blocks, block_cap, *nblocks};
    for (const pool_region *r = p->regions; r != NULL; r = r->next) {
        const pool_chunk *c = r->first;
        if (r->kind == REGION_PLAIN) {
            snap_segment(&o, p, private_pool, 0, r->base, r->base + r->size, &c);
            continue;
        }
        uint64_t at = r->base, start = 0;
        for (size_t len; (len = vram__pool_vmm_run_after(&r->vmm, at, &start)) > 0; at = start + len) {
            snap_segment(&o, p, private_pool, 1, start, start + len, &c);
        }
    }
    *nsegs = o.nsegs;
    *nblocks = o.nblocks;
}
