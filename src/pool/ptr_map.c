/*
 * ptr_map.c: open-addressing table from block address to chunk (see ptr_map.h).
 */
#include <stdlib.h>

#include "pool/ptr_map.h"

static size_t home_of(const ptr_map *m, uint64_t addr) {
    uint64_t h = (addr >> 8) * 0x9e3779b97f4a7c15ull;   /* blocks are 256-byte aligned */
    return (size_t)(h >> 32) & m->mask;
}

void vram__ptr_map_destroy(ptr_map *m) {
    free(m->buckets);
    m->buckets = NULL;
    m->mask = 0;
    m->count = 0;
}

static void place(ptr_map *m, uint64_t addr, pool_chunk *c) {
    size_t i = home_of(m, addr);
    while (m->buckets[i].addr != 0) i = (i + 1) & m->mask;
    m->buckets[i].addr = addr;
    m->buckets[i].chunk = c;
}

/* 0 on success, -1 when memory for a larger table could not be had (the map is unchanged). */
static int ptr_map_reserve_one(ptr_map *m) {
    size_t capacity = m->buckets ? m->mask + 1 : 0;
    if ((m->count + 1) * 2 <= capacity) return 0;
    size_t grown = capacity ? capacity * 2 : 64;
    ptr_map bigger = {calloc(grown, sizeof(ptr_map_bucket)), grown - 1, m->count};
    if (bigger.buckets == NULL) return -1;
    for (size_t i = 0; i < capacity; i++) {
        if (m->buckets[i].addr != 0) place(&bigger, m->buckets[i].addr, m->buckets[i].chunk);
    }
    free(m->buckets);
    *m = bigger;
    return 0;
}

static void ptr_map_put(ptr_map *m, uint64_t addr, pool_chunk *c) {
    place(m, addr, c);
    m->count++;
}

int vram__ptr_map_insert(ptr_map *m, uint64_t addr, pool_chunk *c) {
    if (ptr_map_reserve_one(m) != 0) return -1;
    ptr_map_put(m, addr, c);
    return 0;
}

static size_t find_bucket(const ptr_map *m, uint64_t addr) {
    if (m->buckets == NULL) return SIZE_MAX;
    for (size_t i = home_of(m, addr);; i = (i + 1) & m->mask) {
        if (m->buckets[i].addr == addr) return i;
        if (m->buckets[i].addr == 0) return SIZE_MAX;
    }
}

pool_chunk *vram__ptr_map_get(const ptr_map *m, uint64_t addr) {
    size_t i = find_bucket(m, addr);
    return i == SIZE_MAX ? NULL : m->buckets[i].chunk;
}

/* Empties bucket i, pulling later members of its probe run into the hole (backward shift). */
static void remove_at(ptr_map *m, size_t i) {
    for (size_t j = (i + 1) & m->mask; m->buckets[j].addr != 0; j = (j + 1) & m->mask) {
        size_t home = home_of(m, m->buckets[j].addr);
        int movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            m->buckets[i] = m->buckets[j];
            i = j;
        }
    }
    m->buckets[i].addr = 0;
    m->buckets[i].chunk = NULL;
    m->count--;
}

/* The chunk at addr (NULL if absent), removed, or only when it has no uses when `unused` (a constant
 * of each caller below, so that each keeps no test of it). */
static inline __attribute__((always_inline)) pool_chunk *take(ptr_map *m, uint64_t addr, int unused) {
    size_t i = find_bucket(m, addr);
    if (i == SIZE_MAX) return NULL;
    pool_chunk *c = m->buckets[i].chunk;
    if (!unused || c->uses == NULL) remove_at(m, i);
    return c;
}

pool_chunk *vram__ptr_map_take(ptr_map *m, uint64_t addr) { return take(m, addr, 0); }
pool_chunk *vram__ptr_map_take_unused(ptr_map *m, uint64_t addr) { return take(m, addr, 1); }
