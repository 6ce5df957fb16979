/*
 * vmm.h: a reserved virtual address range whose physical backing follows its use.
 *
 * The pool places blocks in address space; this module makes sure the granules (the device's
 * physical granularity, 2 MiB on an H200) under every block in use are mapped, and can give back
 * physical memory under address ranges where no block is in use. Physical memory is held in
 * extents: one cuMemCreate + cuMemMap each, as large as the unmapped run that needed it (a mapped
 * extent cannot be split, so it is given back only when no byte of it is in use).
 *
 * Which extents are in use is counted lazily: handing out or freeing a block only marks the counts
 * stale (and, once idle release has started, notes the granules a freed block covered), and the
 * pool recounts from its blocks (vram__pool_vmm_busy_begin/add/end) before anything that needs them:
 * giving back idle extents, the idle tick, the consistency check. Warm calls never walk extents.
 *
 * Costs: checking a range is a few bitmap words; mapping is a driver call per unmapped run; a
 * recount is O(blocks + extents). Every function runs under the owning arena's lock.
 */
#ifndef VRAM_POOL_VMM_H
#define VRAM_POOL_VMM_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "pool/ipc.h"

typedef struct pool_extent {
    uint64_t handle;
    size_t   offset, size;   /* within the range */
    size_t   busy;           /* bytes of blocks in use that overlap it, as of the last recount */
    int32_t  fd;             /* exported to other processes: the descriptor kept for them; else -1 */
    int32_t  next_free;      /* an entry on pool_vmm's free list: the next one, or -1 */
} pool_extent;

/* What one call that maps, moves or gives back memory changed, returned to its caller (backing.c
 * books it: reserved bytes, the budget, the driver counters): bytes of extents created and given
 * back, and the driver calls made. */
typedef struct pool_vmm_change {
    size_t   mapped, unmapped;
    uint64_t creates, releases, moves;   /* driver calls */
    vram_status refused;                 /* the first unmap or release the driver refused, or VRAM_OK
                                          * (its message is this thread's last error) */
} pool_vmm_change;
/* Adds what one call changed (from) to what several changed together (to). */
static inline void pool_vmm_change_add(pool_vmm_change *to, const pool_vmm_change *from) {
    to->mapped += from->mapped;
    to->unmapped += from->unmapped;
    to->creates += from->creates;
    to->releases += from->releases;
    to->moves += from->moves;
    if (to->refused == VRAM_OK) to->refused = from->refused;
}

typedef struct pool_vmm {
    const vram__backend *backend;
    int                  dev;
    size_t               gran;
    unsigned             gran_shift;     /* gran == 1 << gran_shift */
    size_t               max_extent;     /* largest extent mapped at once, a multiple of gran */
    uint64_t             base;
    size_t               va_size;
    int32_t             *gran_ext;       /* per granule: the extent mapped there, or -1 */
    uint64_t            *mapped_bits;    /* per granule: 1 when mapped (to skip unmapped runs fast) */
    size_t               mapped_prefix;  /* [base, base + mapped_prefix) is all mapped (a quick test) */
    size_t               zone_start;     /* the same from a second place (the pool's large zone):       */
    size_t               zone_prefix;    /* [base + zone_start, + zone_prefix) is all mapped; va_size: none */
    uint64_t             quick_end;      /* the same as addresses, for pool_vmm_unmapped: base + mapped_prefix, */
    uint64_t             quick_zone_lo;  /* base + zone_start and */
    uint64_t             quick_zone_end; /* base + zone_start + zone_prefix */
    pool_extent         *ext;
    int32_t              ext_count, cap, ext_free;   /* ext[0, ext_count) used or free; free ones listed
                                                      * from ext_free (-1: none) through next_free */
    size_t               mapped;         /* bytes of all extents */
    size_t               idle;           /* bytes of extents with busy == 0, as of the last recount */
    int                  stale;          /* blocks changed since the last recount: busy and idle are old */
    uint64_t            *touched_bits;   /* per granule: a block over it was freed, or it was mapped, in
                                          * this idle period (NULL until the first idle tick) */
    /* the extents by zone (statistics): [0] those starting in the small zone [0, zone_start) when
     * one is set (vram__pool_vmm_set_zone), [1] the rest; bytes and how many */
    size_t               zone_bytes[2], zone_count[2];
    /* handles the driver refused to release and that could not be mapped back either: unmapped, no
     * longer extents, but the driver still holds their memory, so it stays counted (stuck_bytes, in
     * what the pool reserves) until vram__pool_vmm_destroy releases them */
    uint64_t            *stuck;
    size_t               nstuck, stuck_bytes;
    /* [keep_lo, keep_hi) (offsets; keep_hi 0: none): idle extents there are neither moved nor given
     * back by vram__pool_vmm_move_idle and vram__pool_vmm_unmap_idle (the zone of a plan in force,
     * set by the caller around the growth of one block) */
    size_t               keep_lo, keep_hi;
} pool_vmm;

vram_status vram__pool_vmm_init(pool_vmm *v, const vram__backend *be, int dev, size_t gran, size_t va_size,
                          size_t max_extent);
/* Unmaps and releases everything, frees the range; *chg: what that gave back. Returns the first
 * refusal of the driver (whatever it refused is lost to the pool, still held by the driver). */
vram_status vram__pool_vmm_destroy(pool_vmm *v, pool_vmm_change *chg);

/* Starts the second quick test at `offset` (a multiple of the granularity) of the range: blocks
 * there are tested against the mapped run that begins at it, as the others against the prefix.
 * Called before anything is mapped: the extents count in a zone (zone_bytes) as they are mapped. */
void        vram__pool_vmm_set_zone(pool_vmm *v, size_t offset);
/* Bytes that acquiring [addr, addr+size) would map (whole granules). */
size_t      vram__pool_vmm_unmapped_slow(const pool_vmm *v, uint64_t addr, size_t size);
static inline size_t pool_vmm_unmapped(const pool_vmm *v, uint64_t addr, size_t size) {
    uint64_t end = addr + size;
    if (end <= v->quick_end || (addr >= v->quick_zone_lo && end <= v->quick_zone_end)) return 0;
    return vram__pool_vmm_unmapped_slow(v, addr, size);
}
/* Maps what is unmapped under [addr, addr+size) in extents of at most `largest` bytes (0: max_extent;
 * a multiple of the granularity); the last run mapped may go on over up to `ahead` more unmapped bytes
 * after the block (fewer driver calls as the pool grows). On failure the extents mapped on the way
 * stay (idle). The caller marks the block in use. */
vram_status vram__pool_vmm_acquire(pool_vmm *v, uint64_t addr, size_t size, size_t ahead, size_t largest,
                                   pool_vmm_change *chg);
/* A block over [addr, addr+size) (every granule of it mapped) was handed out, or was freed: the
 * counts are stale from now on. */
static inline void pool_vmm_mark(pool_vmm *v) {
    v->stale = 1;
}
void        vram__pool_vmm_release(pool_vmm *v, uint64_t addr, size_t size);
/* Recounting: begin zeroes every extent's count, add counts one block in use, end sums the idle
 * bytes and clears `stale`. */
void        vram__pool_vmm_busy_begin(pool_vmm *v);
void        vram__pool_vmm_busy_add(pool_vmm *v, uint64_t addr, size_t size);
void        vram__pool_vmm_busy_end(pool_vmm *v);
/* Gives back every idle extent (counts fresh) that lies outside [lo, hi) (offsets in the range);
 * returns the bytes given back. */
size_t      vram__pool_vmm_unmap_idle_outside(pool_vmm *v, size_t lo, size_t hi, pool_vmm_change *chg);
/* The longest mapped run inside [addr, addr+size); its start in *at when `at` is not NULL. */
size_t      vram__pool_vmm_mapped_run(const pool_vmm *v, uint64_t addr, size_t size, uint64_t *at);
/* The first mapped run [*start, *start + return) that ends after `from` (an address of the range),
 * clipped to begin at `from`; 0 when no granule at or after it is mapped. */
size_t      vram__pool_vmm_run_after(const pool_vmm *v, uint64_t from, uint64_t *start);
/* The extents under [addr, addr + size) (all mapped) as pieces of a handle for another process, each
 * exported once (its descriptor kept in the extent until it is released): at most `capacity` into
 * out, *n how many there are, *span_lo and *span the range they cover. */
vram_status vram__pool_vmm_export(pool_vmm *v, uint64_t addr, size_t size, ipc_piece *out, size_t capacity, size_t *n,
                            uint64_t *span_lo, size_t *span);
/* The idle bytes of each zone (as zone_bytes); needs fresh counts. */
void        vram__pool_vmm_zone_idle(const pool_vmm *v, size_t idle[2]);
/* Moves idle extents under the unmapped granules of [addr, addr+size) instead of creating physical
 * memory there: each an unmap and a map of its handle (on the H200 about 70-150 us, against
 * 300-1,100 us to release an extent of 512 MiB-2 GiB and create another: bench/vmm_costs.c). The
 * largest that fits a run first; the run that ends the block may take an extent reaching over the
 * unmapped granules after it (each a move in *chg). Needs fresh counts. Extents in [keep_lo, keep_hi)
 * stay (as in vram__pool_vmm_unmap_idle). */
void        vram__pool_vmm_move_idle(pool_vmm *v, uint64_t addr, size_t size, pool_vmm_change *chg);
/* Gives back idle extents, largest first, until at least `want` bytes went back or none is left;
 * returns the bytes given back. Needs fresh counts (as do the two below). */
size_t      vram__pool_vmm_unmap_idle(pool_vmm *v, size_t want, pool_vmm_change *chg);
/* Gives back the idle extents that have been idle since before the current period began (no block
 * over them freed and not mapped during it), then starts the next period (see the pool's idle
 * release). The first call only starts noting freed granules: nothing is known idle before it. */
void        vram__pool_vmm_unmap_stale(pool_vmm *v, pool_vmm_change *chg);
/* ---- sleep and wake (sleep.c): every extent given back at once, granules mapped again by a bitmap */

/* The offset in the range of an extent exported to other processes (its descriptor kept), or -1. */
int64_t     vram__pool_vmm_exported(const pool_vmm *v);
/* Gives back every extent, in use or not (their blocks' bytes are elsewhere or not needed); what the
 * driver refuses stays mapped and counted (chg->refused). */
void        vram__pool_vmm_unmap_all(pool_vmm *v, pool_vmm_change *chg);
/* The granule bitmap's words: (granules + 63) / 64. */
size_t      vram__pool_vmm_bit_words(const pool_vmm *v);
/* Sets in bits[] the granules under [addr, addr + size). */
void        vram__pool_vmm_bits_add(const pool_vmm *v, uint64_t *bits, uint64_t addr, size_t size);
/* Of the granules set in want[], keeps those unmapped (want &= ~mapped) and returns their bytes. */
size_t      vram__pool_vmm_bits_unmapped(const pool_vmm *v, uint64_t *want);
/* The mapped granules as a bitmap (a copy; NULL without host memory). */
uint64_t   *vram__pool_vmm_bits_mapped(const pool_vmm *v);
/* Maps every granule set in bits[] (all unmapped), in runs of at most max_extent; on failure what it
 * mapped stays (vram__pool_vmm_unmap_bits gives it back). */
vram_status vram__pool_vmm_map_bits(pool_vmm *v, const uint64_t *bits, pool_vmm_change *chg);
/* Gives back every extent that lies in the granules set in bits[] (what vram__pool_vmm_map_bits mapped). */
void        vram__pool_vmm_unmap_bits(pool_vmm *v, const uint64_t *bits, pool_vmm_change *chg);
/* The bytes of [addr, addr + size) that lie in mapped granules. */
size_t      vram__pool_vmm_mapped_bytes(const pool_vmm *v, uint64_t addr, size_t size);

/* Verifies the granule table against the extents and their counts; 0 when sound, else writes why
 * into msg. */
int         vram__pool_vmm_check(const pool_vmm *v, char *msg, size_t len);

#endif /* VRAM_POOL_VMM_H */
