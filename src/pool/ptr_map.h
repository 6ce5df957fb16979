/*
 * ptr_map.h: live blocks by address, so that a free finds its chunk in O(1). Open addressing with
 * linear probing and backward-shift deletion (no tombstones); load kept at or below one half.
 * Address 0 marks an empty bucket (the driver never hands out 0).
 */
#ifndef VRAM_POOL_PTR_MAP_H
#define VRAM_POOL_PTR_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "pool/chunk.h"

typedef struct ptr_map_bucket {
    uint64_t    addr;
    pool_chunk *chunk;
} ptr_map_bucket;

typedef struct ptr_map {
    ptr_map_bucket *buckets;
    size_t          mask;    /* capacity - 1; capacity is a power of two */
    size_t          count;
} ptr_map;

void        vram__ptr_map_destroy(ptr_map *m);
/* 0, or -1 (the map unchanged) without host memory for a larger table. */
int         vram__ptr_map_insert(ptr_map *m, uint64_t addr, pool_chunk *c);
pool_chunk *vram__ptr_map_get(const ptr_map *m, uint64_t addr);
pool_chunk *vram__ptr_map_take(ptr_map *m, uint64_t addr);                 /* removes; NULL if absent */
/* The chunk at addr (NULL if absent), removed unless it has uses on other streams (c->uses): such a
 * block stays until its free has recorded their events, so that a failed free leaves it in place. */
pool_chunk *vram__ptr_map_take_unused(ptr_map *m, uint64_t addr);

#endif /* VRAM_POOL_PTR_MAP_H */
