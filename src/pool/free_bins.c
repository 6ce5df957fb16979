/*
 * free_bins.c: segregated free lists with two-level bitmaps (see free_bins.h). Chunks are linked
 * through their `left` (previous) and `right` (next) fields while they are indexed.
 */
#include <stdio.h>

#include "pool/free_bins.h"

#define FREE_BINS_SCAN 32

typedef struct bin_index {
    int fl, sl;
} bin_index;

static int msb64(uint64_t x) {
    return 63 - __builtin_clzll(x);
}

/* The class of a size (in units of 256 bytes): linear below 32 units, then 32 per power of two. */
static bin_index class_of(size_t size) {
    uint64_t u = size >> 8;
    if (u < FREE_BINS_SL) return (bin_index){0, (int)u};
    int m = msb64(u);
    return (bin_index){m - 4, (int)((u >> (m - 5)) & (FREE_BINS_SL - 1))};
}

/* The smallest size of a class (in bytes). */
static size_t class_floor(bin_index i) {
    if (i.fl == 0) return (size_t)i.sl << 8;
    int m = i.fl + 4;
    return (((size_t)FREE_BINS_SL | (size_t)i.sl) << (m - 5)) << 8;
}

/* c onto the head of class i's list (counts and sizes are the callers'). */
static inline void bins_link(free_bins *b, pool_chunk *c, bin_index i) {
    c->bin_fl = (uint8_t)i.fl;
    c->bin_sl = (uint8_t)i.sl;
    pool_chunk **head = &b->head[i.fl][i.sl];
    c->left = NULL;
    c->right = *head;
    if (*head != NULL) (*head)->left = c;
    *head = c;
    b->sl_map[i.fl] |= 1u << i.sl;
    b->fl_map |= 1ull << i.fl;
}

/* c off the list of the class it was indexed under. */
static inline void bins_unlink(free_bins *b, pool_chunk *c) {
    bin_index i = {c->bin_fl, c->bin_sl};
    if (c->left != NULL) c->left->right = c->right; else b->head[i.fl][i.sl] = c->right;
    if (c->right != NULL) c->right->left = c->left;
    if (b->head[i.fl][i.sl] == NULL) {
        b->sl_map[i.fl] &= ~(1u << i.sl);
        if (b->sl_map[i.fl] == 0) b->fl_map &= ~(1ull << i.fl);
    }
    c->left = c->right = NULL;
}

void vram__free_bins_insert(free_bins *b, pool_chunk *c) {
    bins_link(b, c, class_of(c->size));
    b->count++;
    b->bytes += c->size;
}

void vram__free_bins_remove(free_bins *b, pool_chunk *c) {
    bins_unlink(b, c);
    b->count--;
    b->bytes -= c->size;
}

void vram__free_bins_resize(free_bins *b, pool_chunk *c, size_t size) {
    bin_index i = class_of(size);
    b->bytes = b->bytes - c->size + size;
    c->size = size;
    if (i.fl == c->bin_fl && i.sl == c->bin_sl) return;
    bins_unlink(b, c);
    bins_link(b, c, i);
}

/* The smallest chunk of a list that holds `size` (lowest address among equals), within the scan. */
static pool_chunk *list_best(pool_chunk *c, size_t size) {
    pool_chunk *best = NULL;
    for (int n = 0; c != NULL && n < FREE_BINS_SCAN; c = c->right, n++) {
        if (c->size >= size && (best == NULL || c->size < best->size ||
                                (c->size == best->size && c->addr < best->addr))) {
            best = c;
        }
    }
    return best;
}

/* The first non-empty class at or after (fl, sl), or fl = -1. */
static bin_index next_class(const free_bins *b, bin_index i) {
    uint32_t row = i.sl < FREE_BINS_SL ? b->sl_map[i.fl] & (~0u << i.sl) : 0;
    if (row != 0) return (bin_index){i.fl, __builtin_ctz(row)};
    uint64_t rows = i.fl + 1 < FREE_BINS_FL ? b->fl_map & (~0ull << (i.fl + 1)) : 0;
    if (rows == 0) return (bin_index){-1, 0};
    int fl = __builtin_ctzll(rows);
    return (bin_index){fl, __builtin_ctz(b->sl_map[fl])};
}

pool_chunk *vram__free_bins_best_fit(const free_bins *b, size_t size) {
    bin_index i = class_of(size);
    pool_chunk *c = list_best(b->head[i.fl][i.sl], size);
    if (c != NULL) return c;
    i.sl++;
    if (i.sl == FREE_BINS_SL) {
        i.fl++;
        i.sl = 0;
        if (i.fl == FREE_BINS_FL) return NULL;
    }
    i = next_class(b, i);
    return i.fl < 0 ? NULL : list_best(b->head[i.fl][i.sl], size);
}

pool_chunk *vram__free_bins_largest(const free_bins *b) {
    if (b->fl_map == 0) return NULL;
    int fl = msb64(b->fl_map);
    int sl = 31 - __builtin_clz(b->sl_map[fl]);
    pool_chunk *best = NULL;
    for (pool_chunk *c = b->head[fl][sl]; c != NULL; c = c->right) {
        if (best == NULL || c->size > best->size) best = c;
    }
    return best;
}

void vram__free_bins_descending(const free_bins *b, free_bins_visit visit, void *ctx, size_t floor) {
    for (int fl = FREE_BINS_FL - 1; fl >= 0; fl--) {
        if (!(b->fl_map & (1ull << fl))) continue;
        for (int sl = FREE_BINS_SL - 1; sl >= 0; sl--) {
            if (!(b->sl_map[fl] & (1u << sl))) continue;
            bin_index i = {fl, sl};
            /* the class's largest size (its end, one past it, is 2^64 for the top class) */
            size_t last = class_floor(i) + ((fl == 0 ? (size_t)1 : (size_t)1 << (fl - 1)) << 8) - 1;
            if (last < floor) return;              /* every chunk from here down is smaller */
            for (pool_chunk *c = b->head[fl][sl]; c != NULL; c = c->right) {
                if (visit(c, ctx, &floor)) return;
            }
        }
    }
}

void vram__free_bins_ascending(const free_bins *b, size_t size, free_bins_visit visit, void *ctx) {
    size_t floor = 0;
    for (bin_index i = class_of(size); i.fl >= 0;) {
        for (pool_chunk *c = b->head[i.fl][i.sl]; c != NULL; c = c->right) {
            if (c->size >= size && visit(c, ctx, &floor)) return;
        }
        if (++i.sl == FREE_BINS_SL) {
            i.sl = 0;
            if (++i.fl == FREE_BINS_FL) return;
        }
        i = next_class(b, i);
    }
}

int vram__free_bins_check(const free_bins *b, char *msg, size_t len) {
    size_t count = 0, bytes = 0;
    for (int fl = 0; fl < FREE_BINS_FL; fl++) {
        for (int sl = 0; sl < FREE_BINS_SL; sl++) {
            int nonempty = b->head[fl][sl] != NULL;
            if (nonempty != !!(b->sl_map[fl] & (1u << sl)) || (b->sl_map[fl] != 0) != !!(b->fl_map & (1ull << fl))) {
                snprintf(msg, len, "free bins: the bitmaps disagree with class (%d, %d)", fl, sl);
                return -1;
            }
            for (const pool_chunk *c = b->head[fl][sl], *prev = NULL; c != NULL; prev = c, c = c->right) {
                bin_index i = class_of(c->size);
                if (c->state != CHUNK_FREE || i.fl != fl || i.sl != sl || c->bin_fl != fl || c->bin_sl != sl ||
                    c->left != prev) {
                    snprintf(msg, len, "free bins: a chunk of %zu bytes is not free, misfiled or mislinked", c->size);
                    return -1;
                }
                count++;
                bytes += c->size;
            }
        }
    }
    if (count != b->count || bytes != b->bytes) {
        snprintf(msg, len, "free bins: %zu chunks, %zu bytes indexed; %zu, %zu recorded", count, bytes,
                 b->count, b->bytes);
        return -1;
    }
    return 0;
}
