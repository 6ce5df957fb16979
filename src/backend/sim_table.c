/*
 * sim_table.c: the simulated backend's open-addressing hash table from non-zero 64-bit keys
 * (addresses, handles, events) to records. No lock of its own: callers hold vram__sim_lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/sim_internal.h"

/* ---- hash table ----------------------------------------------------------------------------- */

static uint64_t sim_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    return k ^ (k >> 33);
}

/* The bucket holding `key`, or the empty bucket where it would go (cap > 0, never full). */
static size_t sim_tab_bucket(const sim_table *t, uint64_t key) {
    size_t mask = t->cap - 1, i = (size_t)sim_hash(key) & mask;
    while (t->buckets[i].key != 0 && t->buckets[i].key != key) i = (i + 1) & mask;
    return i;
}

void *vram__sim_tab_get(const sim_table *t, uint64_t key) {
    if (t->cap == 0 || key == 0) return NULL;
    return t->buckets[sim_tab_bucket(t, key)].val;
}

/* Makes room for one more entry, so that vram__sim_tab_put after the side effects cannot fail. */
int vram__sim_tab_reserve(sim_table *t) {
    if ((t->count + 1) * 4 <= t->cap * 3) return 0;
    size_t cap = t->cap ? t->cap * 2 : 64, old_cap = t->cap;
    sim_bucket *old = t->buckets, *buckets = calloc(cap, sizeof *buckets);
    if (buckets == NULL) return -1;
    t->buckets = buckets;
    t->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key != 0) t->buckets[sim_tab_bucket(t, old[i].key)] = old[i];
    free(old);
    return 0;
}

void vram__sim_tab_put(sim_table *t, uint64_t key, void *val) {
    size_t i = sim_tab_bucket(t, key);
    t->buckets[i].key = key;
    t->buckets[i].val = val;
    t->count++;
}

/* Linear probing deletion by backward shift: no tombstones. */
void vram__sim_tab_del(sim_table *t, uint64_t key) {
    size_t mask = t->cap - 1, i = sim_tab_bucket(t, key), j = i;
    if (t->buckets[i].key == 0) return;
    for (;;) {
        j = (j + 1) & mask;
        if (t->buckets[j].key == 0) break;
        size_t home = (size_t)sim_hash(t->buckets[j].key) & mask;
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays) continue;
        t->buckets[i] = t->buckets[j];
        i = j;
    }
    t->buckets[i].key = 0;
    t->buckets[i].val = NULL;
    t->count--;
}

void vram__sim_tab_clear(sim_table *t, void (*drop)(uint64_t key, void *val)) {
    for (size_t i = 0; i < t->cap; i++)
        if (t->buckets[i].key != 0) drop(t->buckets[i].key, t->buckets[i].val);
    free(t->buckets);
    memset(t, 0, sizeof *t);
}
