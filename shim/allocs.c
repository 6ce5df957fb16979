/*
 * allocs.c: the physical allocations of cuMemCreate and everything that keeps one alive, so that
 * its bytes count from the create until the driver really frees them, in whatever order the program
 * calls the driver (the "release after map" idiom of llama.cpp's VMM pool and NVIDIA's
 * vectorAddMMAP sample: cuMemCreate, cuMemMap, cuMemRelease at once, the memory freed at the last
 * cuMemUnmap).
 *
 * The driver frees an allocation when nothing holds it any more: no handle (the create's, and each
 * one cuMemRetainAllocationHandle returned, until its cuMemRelease), no mapping (cuMemMap until the
 * cuMemUnmap of its range), no tile of a sparse CUDA array (cuMemMapArrayAsync) and no multicast
 * binding (cuMulticastBindMem / BindAddr until cuMulticastUnbind or the multicast object's
 * release). The table (table.c) keeps, for each allocation, a record of kind ALLOC (found by an id
 * this file gives, since a handle's value may be handed out again once released) with its size,
 * device and the three counts (refs, maps, pins); a HANDLE record per handle the program holds, a
 * MAP record per mapping (by address) and a PIN record per tile mapping or binding, each naming the
 * allocation's id. Tiles are held until their array is destroyed (the driver's unmap of a tile
 * names no handle, so an unmapped tile stays counted: the fail-closed side), and a multicast
 * binding until its unbind or its object's release.
 *
 * Invariants: an ALLOC record exists exactly while one of its counts is above 0, and its bytes are
 * in g.used then; a record taken out before a driver call that may free (a release, an unmap) is
 * put back when the driver refused, so that a value the driver hands out again while the call runs
 * never meets a stale record. Locks: g.mu around each change of the table, never across a driver
 * call; the bytes of a freed allocation are given back (shim_uncount) after g.mu is released.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

/* An allocation no longer held: its record goes, and its bytes into *freed (caller holds g.mu). */
static void shim_allocs_maybe_free_unsafe(shim_entry *a, int *dev, size_t *freed) {
    if (a->refs || a->maps || a->pins) return;
    *dev = a->dev;
    *freed = a->size;
    shim_remove_unsafe(a);
}

static shim_entry *shim_allocs_of_unsafe(unsigned long long id) { return shim_find_unsafe(id, SHIM_KIND_ALLOC); }

/* cuMemCreate succeeded with `size` bytes reserved on dev: records the allocation and its handle;
 * -1 when the table cannot hold them (the caller releases the handle and the reservation). */
int shim_allocs_created(unsigned long long handle, size_t size, int dev) {
    pthread_mutex_lock(&g.mu);
    unsigned long long id = ++g.next_id;
    shim_entry a = { .key = id, .size = size, .dev = dev, .kind = SHIM_KIND_ALLOC, .refs = 1 };
    shim_entry h = { .key = handle, .ref = id, .size = size, .dev = dev, .kind = SHIM_KIND_HANDLE };
    int rc = shim_insert_unsafe(&a);
    if (rc == 0 && shim_insert_unsafe(&h) != 0) {
        shim_remove_unsafe(shim_allocs_of_unsafe(id));
        rc = -1;
    }
    pthread_mutex_unlock(&g.mu);
    return rc;
}

/* Before cuMemRelease(handle): takes the handle's record (or a multicast object's) out into *saved;
 * 0 when the handle is not one vram counted. */
int shim_allocs_release_begin(unsigned long long handle, shim_entry *saved) {
    int found = 0;
    pthread_mutex_lock(&g.mu);
    shim_entry *e = shim_find_unsafe(handle, SHIM_KIND_HANDLE);
    if (!e) e = shim_find_unsafe(handle, SHIM_KIND_MCAST);
    if (e) {
        *saved = *e;
        shim_remove_unsafe(e);
        found = 1;
    }
    pthread_mutex_unlock(&g.mu);
    return found;
}

/* After cuMemRelease of a handle taken out by shim_allocs_release_begin: success drops its
 * reference (the handle stays while references are left) or, for a multicast object, its
 * bindings; a refusal puts the record back. */
void shim_allocs_release_end(CUresult r, const shim_entry *saved) {
    if (saved->kind == SHIM_KIND_MCAST) {
        if (r == CUDA_SUCCESS) {
            shim_allocs_unpin(saved->key, -1, 0, 0);
        } else {
            pthread_mutex_lock(&g.mu);
            (void)shim_insert_unsafe(saved);   /* it was there a moment ago: room is left */
            pthread_mutex_unlock(&g.mu);
        }
        return;
    }
    int dev = -1;
    size_t freed = 0;
    pthread_mutex_lock(&g.mu);
    shim_entry *a = shim_allocs_of_unsafe(saved->ref);
    if (r != CUDA_SUCCESS) {
        (void)shim_insert_unsafe(saved);
    } else if (a) {
        if (a->refs) a->refs--;
        if (a->refs) (void)shim_insert_unsafe(saved);   /* retained handles of the same value */
        else shim_allocs_maybe_free_unsafe(a, &dev, &freed);
    }
    pthread_mutex_unlock(&g.mu);
    if (freed) shim_uncount(dev, freed);
}

/* cuMemMap of `handle` at [ptr, ptr + size) succeeded. A handle vram did not count (imported) is
 * not followed. When the table cannot hold the mapping, the allocation is pinned for the life of
 * the process instead (counted too long, never too short). */
void shim_allocs_mapped(unsigned long long ptr, size_t size, unsigned long long handle) {
    pthread_mutex_lock(&g.mu);
    shim_entry *h = shim_find_unsafe(handle, SHIM_KIND_HANDLE);
    shim_entry *a = h ? shim_allocs_of_unsafe(h->ref) : NULL;
    if (a) {
        unsigned long long id = a->key;
        int dev = a->dev;
        a->maps++;
        shim_entry m = { .key = ptr, .ref = id, .size = size, .dev = dev, .kind = SHIM_KIND_MAP };
        if (shim_insert_unsafe(&m) != 0) {
            a = shim_allocs_of_unsafe(id);
            if (a) a->refs++;   /* never dropped: the allocation stays counted */
        }
    }
    pthread_mutex_unlock(&g.mu);
}

static int shim_unmapping_push(shim_unmapping *u, const shim_entry *e) {
    if (u->n < sizeof u->local / sizeof u->local[0]) {
        u->local[u->n++] = *e;
        return 0;
    }
    if (u->maps == NULL || u->maps == u->local || (u->n & (u->n - 1)) == 0) {
        size_t cap = u->n * 2;
        shim_entry *m = malloc(cap * sizeof *m);
        if (!m) return -1;
        memcpy(m, u->maps, u->n * sizeof *m);
        if (u->maps != u->local) free(u->maps);
        u->maps = m;
    }
    u->maps[u->n++] = *e;
    return 0;
}

/* Before cuMemUnmap(ptr, size): takes the mappings of the range out (the driver unmaps whole
 * mappings, one after another from ptr). */
void shim_allocs_unmap_begin(unsigned long long ptr, size_t size, shim_unmapping *u) {
    u->maps = u->local;
    u->n = 0;
    pthread_mutex_lock(&g.mu);
    for (unsigned long long at = ptr; at - ptr < size;) {
        shim_entry *m = shim_find_unsafe(at, SHIM_KIND_MAP);
        if (!m || m->size == 0) break;
        shim_entry copy = *m;
        if (shim_unmapping_push(u, &copy) != 0) break;   /* the rest stays mapped in the table */
        shim_remove_unsafe(m);
        at += copy.size;
    }
    pthread_mutex_unlock(&g.mu);
}

/* After cuMemUnmap: success drops the mappings (freeing allocations nothing else holds), a refusal
 * puts them back. */
void shim_allocs_unmap_end(CUresult r, shim_unmapping *u) {
    for (size_t i = 0; i < u->n; i++) {
        int dev = -1;
        size_t freed = 0;
        pthread_mutex_lock(&g.mu);
        if (r != CUDA_SUCCESS) {
            (void)shim_insert_unsafe(&u->maps[i]);
        } else {
            shim_entry *a = shim_allocs_of_unsafe(u->maps[i].ref);
            if (a) {
                if (a->maps) a->maps--;
                shim_allocs_maybe_free_unsafe(a, &dev, &freed);
            }
        }
        pthread_mutex_unlock(&g.mu);
        if (freed) shim_uncount(dev, freed);
    }
    if (u->maps != u->local) free(u->maps);
    u->maps = u->local;
    u->n = 0;
}

static int shim_map_contains(const shim_entry *e, const void *arg) {
    unsigned long long addr = *(const unsigned long long *)arg;
    return addr >= e->key && addr - e->key < e->size;
}

/* The allocation mapped at addr (caller holds g.mu), or NULL. */
static shim_entry *shim_allocs_at_unsafe(unsigned long long addr) {
    shim_entry *m = shim_scan_unsafe(SHIM_KIND_MAP, shim_map_contains, &addr);
    return m ? shim_allocs_of_unsafe(m->ref) : NULL;
}

/* cuMemRetainAllocationHandle returned `handle` for the allocation mapped at addr: one more
 * reference, released by its own cuMemRelease. */
void shim_allocs_retained(unsigned long long handle, unsigned long long addr) {
    pthread_mutex_lock(&g.mu);
    shim_entry *a = shim_allocs_at_unsafe(addr);
    if (a) {
        a->refs++;
        if (!shim_find_unsafe(handle, SHIM_KIND_HANDLE)) {
            shim_entry h = { .key = handle, .ref = a->key, .size = a->size, .dev = a->dev, .kind = SHIM_KIND_HANDLE };
            if (shim_insert_unsafe(&h) != 0) { /* the reference stays: counted until the process ends */ }
        }
    }
    pthread_mutex_unlock(&g.mu);
}

/* cuMulticastCreate returned `mc`: its bindings are dropped at its release. */
void shim_allocs_multicast(unsigned long long mc) {
    shim_entry e = { .key = mc, .kind = SHIM_KIND_MCAST, .dev = -1 };
    pthread_mutex_lock(&g.mu);
    (void)shim_insert_unsafe(&e);   /* when it cannot be kept its bindings stay counted */
    pthread_mutex_unlock(&g.mu);
}

void shim_allocs_pin(unsigned long long owner, unsigned long long handle, unsigned long long addr,
                     unsigned long long at, size_t size) {
    pthread_mutex_lock(&g.mu);
    shim_entry *a = NULL;
    if (handle) {
        shim_entry *h = shim_find_unsafe(handle, SHIM_KIND_HANDLE);
        a = h ? shim_allocs_of_unsafe(h->ref) : NULL;
    } else {
        a = shim_allocs_at_unsafe(addr);
    }
    if (a) {
        unsigned long long id = a->key;
        int dev = a->dev;
        a->pins++;
        shim_entry p = { .key = ++g.next_id, .ref = id, .owner = owner, .at = at, .size = size, .dev = dev,
                         .kind = SHIM_KIND_PIN };
        if (shim_insert_unsafe(&p) == 0) g.npins++;   /* else the pin is never dropped: counted too long */
    }
    pthread_mutex_unlock(&g.mu);
}

typedef struct shim_pin_match {
    unsigned long long owner, at;
    size_t size;
    int dev;
} shim_pin_match;

static int shim_pin_matches(const shim_entry *e, const void *arg) {
    const shim_pin_match *m = arg;
    if (e->owner != m->owner) return 0;
    if (m->size == 0) return 1;
    return (m->dev < 0 || e->dev == m->dev) && e->at >= m->at && e->at - m->at < m->size;
}

void shim_allocs_unpin(unsigned long long owner, int dev, unsigned long long at, size_t size) {
    shim_pin_match m = { owner, at, size, dev };
    for (;;) {
        int freed_dev = -1;
        size_t freed = 0;
        pthread_mutex_lock(&g.mu);
        shim_entry *p = g.npins ? shim_scan_unsafe(SHIM_KIND_PIN, shim_pin_matches, &m) : NULL;
        if (p) {
            unsigned long long id = p->ref;
            shim_remove_unsafe(p);
            g.npins--;
            shim_entry *a = shim_allocs_of_unsafe(id);
            if (a) {
                if (a->pins) a->pins--;
                shim_allocs_maybe_free_unsafe(a, &freed_dev, &freed);
            }
        }
        pthread_mutex_unlock(&g.mu);
        if (freed) shim_uncount(freed_dev, freed);
        if (!p) return;
    }
}
