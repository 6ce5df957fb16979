/*
 * table.c: the table of live memory the shim counted: records found by key and kind (shim.h's
 * SHIM_KIND_*: a device pointer, an array, a VMM handle, an allocation, a mapping, a pin, ...) with
 * their sizes and devices, for frees to know what they give back.
 *
 * Why a table of its own: the library's maps live inside its layers (the pool's, the sim's), which
 * the shim does not link; what the shim needs is one small map under one mutex, looked up at every
 * free. Open addressing with linear probing and backward-shift deletion (no tombstones), keys mixed
 * by a multiplicative hash: a lookup is one or two cache lines, an entry 64 bytes.
 *
 * Invariants: cap is 0 or a power of two, count * 2 <= cap (it doubles before passing half full);
 * an entry of kind 0 is empty. Every function here is called with g.mu held.
 */
#include <stdlib.h>

#include "shim.h"

static size_t shim_hash(unsigned long long key, int kind) {
    unsigned long long h = (key ^ (unsigned long long)kind) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29));
}

shim_entry *shim_find_unsafe(unsigned long long key, int kind) {
    if (!g.cap) return NULL;
    for (size_t i = shim_hash(key, kind) & (g.cap - 1);; i = (i + 1) & (g.cap - 1)) {
        shim_entry *e = &g.table[i];
        if (!e->kind) return NULL;
        if (e->key == key && e->kind == kind) return e;
    }
}

static void shim_place_unsafe(shim_entry *t, size_t cap, const shim_entry *e) {
    size_t i = shim_hash(e->key, e->kind) & (cap - 1);
    while (t[i].kind) i = (i + 1) & (cap - 1);
    t[i] = *e;
}

/* Inserts (or replaces) an entry; -1 when the table cannot grow. */
int shim_insert_unsafe(const shim_entry *e) {
    shim_entry *old = shim_find_unsafe(e->key, e->kind);
    if (old) { *old = *e; return 0; }
    if ((g.count + 1) * 2 > g.cap) {
        size_t cap = g.cap ? g.cap * 2 : 1024;
        shim_entry *t = calloc(cap, sizeof *t);
        if (!t) return -1;
        for (size_t i = 0; i < g.cap; i++)
            if (g.table[i].kind) shim_place_unsafe(t, cap, &g.table[i]);
        free(g.table);
        g.table = t;
        g.cap = cap;
    }
    shim_place_unsafe(g.table, g.cap, e);
    g.count++;
    return 0;
}

/* Removes the entry at e, shifting later entries of its probe run back (no tombstones). */
void shim_remove_unsafe(shim_entry *e) {
    size_t mask = g.cap - 1, hole = (size_t)(e - g.table);
    g.table[hole].kind = 0;
    g.count--;
    for (size_t i = (hole + 1) & mask; g.table[i].kind; i = (i + 1) & mask) {
        size_t home = shim_hash(g.table[i].key, g.table[i].kind) & mask;
        /* The entry at i may move to the hole when its home is not cyclically in (hole, i]. */
        int stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays) continue;
        g.table[hole] = g.table[i];
        g.table[i].kind = 0;
        hole = i;
    }
}

shim_entry *shim_scan_unsafe(int kind, int (*match)(const shim_entry *e, const void *arg), const void *arg) {
    for (size_t i = 0; i < g.cap; i++)
        if (g.table[i].kind == kind && match(&g.table[i], arg)) return &g.table[i];
    return NULL;
}
