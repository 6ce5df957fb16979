/*
 * free_bins.h: the index of free chunks, segregated by size class as in TLSF (Masmano et al.,
 * "TLSF: a new dynamic memory allocator for real-time systems", 2004).
 *
 * Sizes (multiples of 256) fall into classes: 32 linear classes below 8 KiB, then 32 classes per
 * power of two, so a class spans at most 1/32 of its sizes (about 3%). Each class keeps an unsorted
 * doubly linked list; two levels of bitmaps find the next non-empty class in O(1). Insert and
 * remove are O(1). The search is best fit within a bounded scan: the request's own class is scanned
 * for the smallest chunk that fits (lowest address among equals), then the first non-empty larger
 * class gives its smallest chunk; each scan stops after FREE_BINS_SCAN chunks, so with very long
 * lists the fit is good rather than best.
 */
#ifndef VRAM_POOL_FREE_BINS_H
#define VRAM_POOL_FREE_BINS_H

#include <stdint.h>

#include "pool/chunk.h"

#define FREE_BINS_FL 64
#define FREE_BINS_SL 32

typedef struct free_bins {
    uint64_t    fl_map;                          /* bit f: some class of row f is non-empty */
    uint32_t    sl_map[FREE_BINS_FL];            /* bit s of row f: class (f, s) is non-empty */
    pool_chunk *head[FREE_BINS_FL][FREE_BINS_SL];
    size_t      count;                           /* chunks indexed */
    size_t      bytes;                           /* their total size */
} free_bins;

void        vram__free_bins_insert(free_bins *b, pool_chunk *c);
void        vram__free_bins_remove(free_bins *b, pool_chunk *c);
/* c (indexed) now spans `size` bytes: it keeps its place when its class does not change (a
 * chunk that grows over a freed neighbour, or gives its front to a block), else it moves. */
void        vram__free_bins_resize(free_bins *b, pool_chunk *c, size_t size);
pool_chunk *vram__free_bins_best_fit(const free_bins *b, size_t size);  /* NULL when none is large enough */
pool_chunk *vram__free_bins_largest(const free_bins *b);

/* Visits the chunks of every class from the largest class down; stops when `visit` returns
 * nonzero or when a class's sizes are all below `floor` (which `visit` may raise as it goes). */
typedef int (*free_bins_visit)(pool_chunk *c, void *ctx, size_t *floor);
void        vram__free_bins_descending(const free_bins *b, free_bins_visit visit, void *ctx, size_t floor);
/* Visits the chunks of the classes that may hold `size` bytes, smaller classes first; stops when
 * `visit` returns nonzero. */
void        vram__free_bins_ascending(const free_bins *b, size_t size, free_bins_visit visit, void *ctx);

/* Verifies every chunk is free and in its class, and the counts and bitmaps; 0 when sound. */
int         vram__free_bins_check(const free_bins *b, char *msg, size_t len);

#endif /* VRAM_POOL_FREE_BINS_H */
