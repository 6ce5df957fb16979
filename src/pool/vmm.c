/*
 * vmm.c: physical backing of a reserved address range, extent by extent (see vmm.h).
 *
 * Invariants: gran_ext[g] is the extent mapped over granule g or -1; an extent covers the whole
 * granules [offset, offset + size) and no other extent overlaps it; `mapped` is the sum of extent
 * sizes; unless `stale`, `idle` is the sum over extents whose busy count is 0 and the counts are
 * the bytes of the pool's blocks in use over each extent. Memory counts as given back (chg->unmapped)
 * only once the driver released it: a refused unmap or release leaves the extent as it was (mapped
 * again where it was if need be), or stuck (stuck_bytes) when even that fails, so that no limit is
 * lifted by memory the driver still holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool/vmm.h"

/* The quick tests' addresses after the prefixes changed. */
static void quick_sync(pool_vmm *v) {
    v->quick_end = v->base + v->mapped_prefix;
    v->quick_zone_lo = v->base + v->zone_start;
    v->quick_zone_end = v->quick_zone_lo + v->zone_prefix;
}

static size_t granule_of(const pool_vmm *v, uint64_t addr) {
    return (size_t)((addr - v->base) >> v->gran_shift);
}

vram_status vram__pool_vmm_init(pool_vmm *v, const vram__backend *be, int dev, size_t gran, size_t va_size,
                          size_t max_extent) {
    memset(v, 0, sizeof *v);
    v->backend = be;
    v->dev = dev;
    v->gran = gran;
    v->gran_shift = __builtin_ctzll(gran);
    v->max_extent = vram__round_up(max_extent ? max_extent : gran, gran);
    v->va_size = va_size;
    v->zone_start = va_size;
    v->ext_free = -1;
    size_t n = va_size / gran;
    v->gran_ext = malloc(n * sizeof *v->gran_ext);
    if (v->gran_ext == NULL) return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a granule table");
    memset(v->gran_ext, 0xff, n * sizeof *v->gran_ext);   /* -1 everywhere */
    v->mapped_bits = calloc((n + 63) / 64, sizeof *v->mapped_bits);
    if (v->mapped_bits == NULL) {
        free(v->gran_ext);
        v->gran_ext = NULL;
        return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a granule bitmap");
    }
    vram_status s = be->va_reserve(dev, va_size, &v->base);
    quick_sync(v);
    if (s != VRAM_OK) {
        free(v->gran_ext);
        free(v->mapped_bits);
        v->gran_ext = NULL;
        v->mapped_bits = NULL;
    }
    return s;
}

static size_t next_with(const pool_vmm *v, size_t g, size_t last, int bit);

/* The zone's mapped run reaches as far as its granules are mapped. */
static void zone_extend(pool_vmm *v) {
    size_t ngran = v->va_size >> v->gran_shift;
    if (v->zone_start >= v->va_size) return;
    size_t end = next_with(v, (v->zone_start + v->zone_prefix) >> v->gran_shift, ngran - 1, 0) << v->gran_shift;
    v->zone_prefix = end - v->zone_start;
    quick_sync(v);
}

void vram__pool_vmm_set_zone(pool_vmm *v, size_t offset) {
    v->zone_start = offset;
    v->zone_prefix = 0;
    quick_sync(v);
    zone_extend(v);
}

/* The zone extent x counts in (zone_bytes): 0 when it starts in the small zone. */
static int extent_zone(const pool_vmm *v, const pool_extent *x) {
    return v->zone_start < v->va_size && x->offset < v->zone_start ? 0 : 1;
}

/* Takes extent x out of the granule table and the mapped runs (its handle and record stay). */
static void extent_untable(pool_vmm *v, const pool_extent *x) {
    v->zone_bytes[extent_zone(v, x)] -= x->size;
    v->zone_count[extent_zone(v, x)]--;
    for (size_t g = x->offset >> v->gran_shift; g < (x->offset + x->size) >> v->gran_shift; g++) {
        v->gran_ext[g] = -1;
        v->mapped_bits[g / 64] &= ~(1ull << (g % 64));
    }
    if (x->offset < v->mapped_prefix) v->mapped_prefix = x->offset;
    if (x->offset < v->zone_start + v->zone_prefix && x->offset + x->size > v->zone_start) {
        v->zone_prefix = x->offset > v->zone_start ? x->offset - v->zone_start : 0;
    }
    quick_sync(v);
}

/* The driver refused to give memory back: the first refusal of the call is what it reports. */
static void refused(pool_vmm_change *chg, vram_status s) {
    if (chg->refused == VRAM_OK) chg->refused = s;
}

/* Drops extent e's record, whose handle is mapped nowhere; `released`: the driver released its
 * memory (given back), else the handle is stuck (kept aside, its bytes still counted). */
static void extent_forget(pool_vmm *v, int32_t e, int released, pool_vmm_change *chg) {
    pool_extent *x = &v->ext[e];
    if (x->fd >= 0) close(x->fd);
    x->fd = -1;
    v->mapped -= x->size;
    if (x->busy == 0) v->idle -= x->size;   /* (what a stale count says; the next recount redoes it) */
    if (released) {
        chg->unmapped += x->size;
        chg->releases++;
    } else {
        uint64_t *more = realloc(v->stuck, (v->nstuck + 1) * sizeof *more);
        if (more != NULL) {                 /* (without host memory the handle is lost; its bytes still count) */
            v->stuck = more;
            v->stuck[v->nstuck++] = x->handle;
        }
        v->stuck_bytes += x->size;
    }
    x->size = 0;
    x->next_free = v->ext_free;
    v->ext_free = e;
}

/* Releases extent e, whose handle is mapped nowhere (untabled), and its record. */
static void extent_release(pool_vmm *v, int32_t e, pool_vmm_change *chg) {
    vram_status s = v->backend->phys_release(v->dev, v->ext[e].handle);
    if (s != VRAM_OK) refused(chg, s);
    extent_forget(v, e, s == VRAM_OK, chg);
}

/* Gives idle extent e back to the driver: unmap, then release. A refused unmap leaves it as it was;
 * a refused release maps the handle back where it was (still idle, still counted), or when even
 * that fails leaves it stuck. Returns the refusal (the driver's message), or VRAM_OK. */
static vram_status extent_unmap(pool_vmm *v, int32_t e, pool_vmm_change *chg) {
    pool_extent *x = &v->ext[e];
    vram_status s = v->backend->unmap(v->dev, v->base + x->offset, x->size);
    if (s == VRAM_OK) {
        s = v->backend->phys_release(v->dev, x->handle);
        if (s == VRAM_OK) {
            extent_untable(v, x);
            extent_forget(v, e, 1, chg);
            return VRAM_OK;
        }
        char why[1024];
        snprintf(why, sizeof why, "%s", vram_last_error());
        if (v->backend->map(v->dev, v->base + x->offset, x->size, x->handle) != VRAM_OK) {
            extent_untable(v, x);
            extent_forget(v, e, 0, chg);
        }
        vram__fail(s, "%s", why);
    }
    refused(chg, s);
    return s;
}

vram_status vram__pool_vmm_destroy(pool_vmm *v, pool_vmm_change *chg) {
    *chg = (pool_vmm_change){0};
    if (v->gran_ext == NULL) return VRAM_OK;
    for (int32_t e = 0; e < v->ext_count; e++) {   /* whatever the driver refuses: the range goes */
        pool_extent *x = &v->ext[e];
        if (x->size == 0) continue;
        vram_status s = v->backend->unmap(v->dev, v->base + x->offset, x->size);
        if (s != VRAM_OK) refused(chg, s);
        extent_untable(v, x);
        extent_release(v, e, chg);
    }
    for (size_t i = 0; i < v->nstuck; i++) {
        vram_status s = v->backend->phys_release(v->dev, v->stuck[i]);
        if (s != VRAM_OK) refused(chg, s);
    }
    vram_status s = v->backend->va_free(v->dev, v->base, v->va_size);
    if (s != VRAM_OK) refused(chg, s);
    free(v->gran_ext);
    free(v->mapped_bits);
    free(v->touched_bits);
    free(v->ext);
    free(v->stuck);
    memset(v, 0, sizeof *v);
    return chg->refused;
}

/* The bits of granules [g, last] that lie in g's word of a bitmap; *n says how many they are. */
static uint64_t word_mask(size_t g, size_t last, size_t *n) {
    size_t bit = g % 64;
    *n = last - g + 1 < 64 - bit ? last - g + 1 : 64 - bit;
    return (*n == 64 ? ~0ull : ((1ull << *n) - 1)) << bit;
}

/* Whether every granule in [g, last] is mapped, a word of the bitmap at a time. */
static int all_mapped(const pool_vmm *v, size_t g, size_t last) {
    for (size_t n; g <= last; g += n) {
        uint64_t want = word_mask(g, last, &n);
        if ((v->mapped_bits[g / 64] & want) != want) return 0;
    }
    return 1;
}

/* Sets the bits of granules [g, last] in a bitmap. */
static void bits_set(uint64_t *bits, size_t g, size_t last) {
    for (size_t n; g <= last; g += n) bits[g / 64] |= word_mask(g, last, &n);
}

/* Whether any bit of granules [g, last] is set. */
static int bits_any(const uint64_t *bits, size_t g, size_t last) {
    for (size_t n; g <= last; g += n) {
        if (bits[g / 64] & word_mask(g, last, &n)) return 1;
    }
    return 0;
}

size_t vram__pool_vmm_unmapped_slow(const pool_vmm *v, uint64_t addr, size_t size) {
    if (all_mapped(v, granule_of(v, addr), granule_of(v, addr + size - 1))) return 0;
    size_t missing = 0;
    for (size_t g = granule_of(v, addr), last = granule_of(v, addr + size - 1); g <= last;) {
        int32_t e = v->gran_ext[g];
        if (e >= 0) {
            g = (v->ext[e].offset + v->ext[e].size) >> v->gran_shift;
        } else {
            missing += v->gran;
            g++;
        }
    }
    return missing;
}

/* The first granule in [g, last] whose mapped bit is `bit` (1: mapped), or last + 1; a word of the
 * bitmap at a time. */
static size_t next_with(const pool_vmm *v, size_t g, size_t last, int bit) {
    while (g <= last) {
        uint64_t word = v->mapped_bits[g / 64];
        word = (bit ? word : ~word) >> (g % 64);
        if (word != 0) {
            g += (size_t)__builtin_ctzll(word);
            return g <= last ? g : last + 1;
        }
        g = (g / 64 + 1) * 64;
    }
    return last + 1;
}

size_t vram__pool_vmm_mapped_run(const pool_vmm *v, uint64_t addr, size_t size, uint64_t *at) {
    uint64_t end = addr + size, best_at = addr;
    size_t best = 0;
    for (size_t g = granule_of(v, addr), last = granule_of(v, end - 1); g <= last;) {
        g = next_with(v, g, last, 1);                /* a mapped stretch [g, h) */
        if (g > last) break;
        size_t h = next_with(v, g, last, 0);
        uint64_t rs = v->base + g * v->gran, re = v->base + h * v->gran;
        if (rs < addr) rs = addr;
        if (re > end) re = end;
        if (re - rs > best) {
            best = (size_t)(re - rs);
            best_at = rs;
        }
        g = h;
    }
    if (at != NULL) *at = best_at;
    return best;
}

static int32_t extent_entry(pool_vmm *v) {
    if (v->ext_free >= 0) {
        int32_t e = v->ext_free;
        v->ext_free = v->ext[e].next_free;
        return e;
    }
    if (v->ext_count == v->cap) {
        int32_t cap = v->cap ? v->cap * 2 : 64;
        pool_extent *grown = realloc(v->ext, (size_t)cap * sizeof *grown);
        if (grown == NULL) return -1;
        v->ext = grown;
        v->cap = cap;
    }
    return v->ext_count++;
}

/* Puts extent e (its size set) over the unmapped granules from g on in the table and the mapped
 * runs; its memory counts as touched in this idle period. */
static void extent_table(pool_vmm *v, int32_t e, size_t g) {
    pool_extent *x = &v->ext[e];
    size_t n = x->size >> v->gran_shift;
    x->offset = g * v->gran;
    v->stale = 1;
    v->zone_bytes[extent_zone(v, x)] += x->size;
    v->zone_count[extent_zone(v, x)]++;
    for (size_t k = g; k < g + n; k++) {
        v->gran_ext[k] = e;
        v->mapped_bits[k / 64] |= 1ull << (k % 64);
        if (v->touched_bits != NULL) v->touched_bits[k / 64] |= 1ull << (k % 64);
    }
    if (x->offset <= v->mapped_prefix) {      /* the mapped prefix may reach further now */
        size_t ngran = v->va_size >> v->gran_shift;
        v->mapped_prefix = next_with(v, v->mapped_prefix >> v->gran_shift, ngran - 1, 0) << v->gran_shift;
    }
    if (x->offset <= v->zone_start + v->zone_prefix && x->offset + x->size > v->zone_start) zone_extend(v);
    quick_sync(v);
}

/* Maps one extent over the unmapped granules [g, g + n). */
static vram_status extent_map(pool_vmm *v, size_t g, size_t n, pool_vmm_change *chg) {
    int32_t e = extent_entry(v);
    if (e < 0) return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for an extent record");
    pool_extent *x = &v->ext[e];
    size_t size = n * v->gran;
    x->fd = -1;
    vram_status s = v->backend->phys_create(v->dev, size, &x->handle);
    if (s == VRAM_OK) {
        s = v->backend->map(v->dev, v->base + g * v->gran, size, x->handle);
        if (s != VRAM_OK) v->backend->phys_release(v->dev, x->handle);
    }
    if (s != VRAM_OK) {
        x->size = 0;
        x->next_free = v->ext_free;
        v->ext_free = e;
        return s;
    }
    x->size = size;
    x->busy = 0;
    extent_table(v, e, g);
    v->mapped += size;
    v->idle += size;
    chg->mapped += size;
    chg->creates++;
    return VRAM_OK;
}

/* Moves the handle of idle extent e (mapped elsewhere) to the unmapped granules from g on: an unmap
 * and a map, no physical memory released or created. When the map fails the handle is released
 * (its memory is given back: `mapped` drops). */
static vram_status extent_move(pool_vmm *v, int32_t e, size_t g, pool_vmm_change *chg) {
    pool_extent *x = &v->ext[e];
    vram_status s = v->backend->unmap(v->dev, v->base + x->offset, x->size);
    if (s != VRAM_OK) return s;
    extent_untable(v, x);
    s = v->backend->map(v->dev, v->base + g * v->gran, x->size, x->handle);
    if (s != VRAM_OK) {
        extent_release(v, e, chg);
        return s;
    }
    extent_table(v, e, g);
    chg->moves++;
    return VRAM_OK;
}

/* The idle extents a move may take, largest first, each taken once: the largest of at most n
 * granules (a binary search, then the next one not taken, with path halving), or the smallest of at
 * most n (from the end). Built once a call: O(E), then O(log E) a move (a scan of every
 * extent for every move was quadratic with thousands of one-granule extents). */
typedef struct idle_set {
    int32_t *ext;     /* extent indexes by size, descending */
    int32_t *next;    /* next[i]: an index >= i not taken yet (or count) */
    int32_t  count, tail;
} idle_set;

/* Whether extent x is idle and may be moved or given back: not in [keep_lo, keep_hi). */
static int extent_spare(const pool_vmm *v, const pool_extent *x) {
    return x->size != 0 && x->busy == 0 && (x->offset >= v->keep_hi || x->offset + x->size <= v->keep_lo);
}

static int idle_set_build(const pool_vmm *v, idle_set *set) {
    set->ext = malloc((size_t)(v->ext_count + 1) * sizeof *set->ext);
    set->next = malloc((size_t)(v->ext_count + 1) * sizeof *set->next);
    if (set->ext == NULL || set->next == NULL) {
        free(set->ext);
        free(set->next);
        return -1;
    }
    /* a counting sort by granules, descending: sizes are at most max_extent (a few hundred granules) */
    size_t most = 0;
    for (int32_t e = 0; e < v->ext_count; e++) {
        size_t n = v->ext[e].size >> v->gran_shift;
        if (extent_spare(v, &v->ext[e]) && n > most) most = n;
    }
    int32_t *start = calloc(most + 2, sizeof *start);
    if (start == NULL) {
        free(set->ext);
        free(set->next);
        return -1;
    }
    for (int32_t e = 0; e < v->ext_count; e++) {
        if (extent_spare(v, &v->ext[e])) start[most - (v->ext[e].size >> v->gran_shift) + 1]++;
    }
    for (size_t k = 1; k <= most + 1; k++) start[k] += start[k - 1];
    set->count = start[most + 1];
    for (int32_t e = 0; e < v->ext_count; e++) {
        if (extent_spare(v, &v->ext[e])) set->ext[start[most - (v->ext[e].size >> v->gran_shift)]++] = e;
    }
    free(start);
    for (int32_t i = 0; i <= set->count; i++) set->next[i] = i;
    set->tail = set->count - 1;
    return 0;
}

static int32_t idle_set_find(idle_set *set, int32_t i) {
    while (set->next[i] != i) {
        set->next[i] = set->next[set->next[i]];
        i = set->next[i];
    }
    return i;
}

/* Takes an idle extent of at most n granules: the largest (`largest` 1) or the smallest; -1 if none. */
static int32_t idle_set_take(const pool_vmm *v, idle_set *set, size_t n, int largest) {
    size_t most = n << v->gran_shift;
    int32_t i;
    if (largest) {
        int32_t lo = 0, hi = set->count;           /* the first index whose size is <= most */
        while (lo < hi) {
            int32_t mid = lo + (hi - lo) / 2;
            if (v->ext[set->ext[mid]].size > most) lo = mid + 1;
            else hi = mid;
        }
        i = idle_set_find(set, lo);
    } else {
        while (set->tail >= 0 && set->next[set->tail] != set->tail) set->tail--;   /* taken ones */
        i = set->tail >= 0 && v->ext[set->ext[set->tail]].size <= most ? set->tail : set->count;
    }
    if (i >= set->count) return -1;
    set->next[i] = i + 1;
    return set->ext[i];
}

void vram__pool_vmm_move_idle(pool_vmm *v, uint64_t addr, size_t size, pool_vmm_change *chg) {
    *chg = (pool_vmm_change){0};
    idle_set set;
    if (v->idle == 0 || idle_set_build(v, &set) != 0) return;   /* (no host memory: nothing moves) */
    size_t first = granule_of(v, addr), last = granule_of(v, addr + size - 1), ngran = v->va_size >> v->gran_shift;
    for (size_t g = next_with(v, first, last, 0); g <= last && v->idle > 0; g = next_with(v, g, last, 0)) {
        size_t end = next_with(v, g, last, 1);             /* the unmapped run [g, end) of the block */
        /* an extent may reach past the block's last granule over unmapped ones (idle there, as
         * before the move) */
        const size_t beyond = end == last + 1 && last + 1 < ngran ? next_with(v, last + 1, ngran - 1, 1) - (last + 1) : 0;
        while (g < end) {
            int32_t e = idle_set_take(v, &set, end - g, 1);
            if (e < 0) e = idle_set_take(v, &set, end - g + beyond, 0);
            if (e < 0) goto done;
            size_t n = v->ext[e].size >> v->gran_shift;
            if (extent_move(v, e, g, chg) != VRAM_OK) {
                v->stale = 1;
                goto done;
            }
            v->ext[e].busy = v->ext[e].size;   /* under the block now (the next recount says exactly) */
            v->idle -= v->ext[e].size;
            g = g + n < end ? g + n : end;     /* one reaching past the block ends it */
        }
    }
done:
    free(set.ext);
    free(set.next);
}

void vram__pool_vmm_release(pool_vmm *v, uint64_t addr, size_t size) {
    v->stale = 1;
    if (v->touched_bits != NULL) bits_set(v->touched_bits, granule_of(v, addr), granule_of(v, addr + size - 1));
}

void vram__pool_vmm_busy_begin(pool_vmm *v) {
    for (int32_t e = 0; e < v->ext_count; e++) v->ext[e].busy = 0;
}

void vram__pool_vmm_busy_add(pool_vmm *v, uint64_t addr, size_t size) {
    uint64_t end = addr + size;
    for (size_t g = granule_of(v, addr), last = granule_of(v, end - 1); g <= last;) {
        if (v->gran_ext[g] < 0) {           /* a block on unmapped memory: the check reports it */
            g++;
            continue;
        }
        pool_extent *x = &v->ext[v->gran_ext[g]];
        uint64_t xs = v->base + x->offset, xe = xs + x->size;
        x->busy += (size_t)((end < xe ? end : xe) - (addr > xs ? addr : xs));
        g = (x->offset + x->size) >> v->gran_shift;
    }
}

void vram__pool_vmm_busy_end(pool_vmm *v) {
    v->idle = 0;
    for (int32_t e = 0; e < v->ext_count; e++) {
        if (v->ext[e].size != 0 && v->ext[e].busy == 0) v->idle += v->ext[e].size;
    }
    v->stale = 0;
}

size_t vram__pool_vmm_run_after(const pool_vmm *v, uint64_t from, uint64_t *start) {
    size_t ngran = v->va_size >> v->gran_shift;
    if (from < v->base || from >= v->base + v->va_size) return 0;
    size_t g = next_with(v, granule_of(v, from), ngran - 1, 1);
    if (g >= ngran) return 0;
    size_t end = next_with(v, g, ngran - 1, 0);
    uint64_t lo = v->base + ((uint64_t)g << v->gran_shift);
    *start = lo > from ? lo : from;
    return (size_t)(v->base + ((uint64_t)end << v->gran_shift) - *start);
}

vram_status vram__pool_vmm_export(pool_vmm *v, uint64_t addr, size_t size, ipc_piece *out, size_t capacity, size_t *n,
                            uint64_t *span_lo, size_t *span) {
    size_t g = granule_of(v, addr), last = granule_of(v, addr + size - 1), k = 0, need = 0;
    uint64_t lo = 0, hi = 0;
    for (size_t at = g; at <= last;) {   /* the pieces not yet exported: a descriptor each, kept */
        int32_t e = v->gran_ext[at];
        if (e < 0) break;
        need += v->ext[e].fd < 0;
        at = (v->ext[e].offset + v->ext[e].size) >> v->gran_shift;
    }
    vram_status room = vram__ipc_fd_room(need);
    if (room != VRAM_OK) return room;
    while (g <= last) {
        int32_t e = v->gran_ext[g];
        if (e < 0) return vram__fail(VRAM_ERR_INTERNAL, "vram_ipc_export: a block over unmapped memory");
        pool_extent *x = &v->ext[e];
        if (x->fd < 0) {
            int fd = -1;
            vram_status s = v->backend->phys_export(v->dev, x->handle, &fd);
            if (s != VRAM_OK) return s;
            x->fd = fd;
        }
        if (k == 0) lo = v->base + x->offset;
        hi = v->base + x->offset + x->size;
        if (k < capacity) out[k] = (ipc_piece){.fd = x->fd, .offset = v->base + x->offset - lo, .size = x->size};
        k++;
        g = (x->offset + x->size) >> v->gran_shift;
    }
    *n = k;
    *span_lo = lo;
    *span = (size_t)(hi - lo);
    return VRAM_OK;
}

void vram__pool_vmm_zone_idle(const pool_vmm *v, size_t idle[2]) {
    idle[0] = idle[1] = 0;
    for (int32_t e = 0; e < v->ext_count; e++) {
        const pool_extent *x = &v->ext[e];
        if (x->size != 0 && x->busy == 0) idle[extent_zone(v, x)] += x->size;
    }
}

vram_status vram__pool_vmm_acquire(pool_vmm *v, uint64_t addr, size_t size, size_t ahead, size_t largest,
                                   pool_vmm_change *chg) {
    *chg = (pool_vmm_change){0};
    size_t max_run = (largest ? largest : v->max_extent) >> v->gran_shift;
    size_t first = granule_of(v, addr), last = granule_of(v, addr + size - 1);
    size_t end = last + (ahead >> v->gran_shift), ngran = v->va_size >> v->gran_shift;
    if (end >= ngran) end = ngran - 1;
    for (size_t g = all_mapped(v, first, last) ? last + 1 : first; g <= last;) {
        if (v->gran_ext[g] >= 0) {
            g = (v->ext[v->gran_ext[g]].offset + v->ext[v->gran_ext[g]].size) >> v->gran_shift;
            continue;
        }
        size_t run = 1;
        while (g + run <= last && v->gran_ext[g + run] < 0 && run < max_run) run++;
        /* the run that ends the block may take up to `ahead` more unmapped granules after it */
        while (g + run > last && g + run <= end && v->gran_ext[g + run] < 0 && run < max_run) run++;
        vram_status s = extent_map(v, g, run, chg);
        if (s != VRAM_OK) return s;
        g += run;
    }
    return VRAM_OK;
}

size_t vram__pool_vmm_unmap_idle(pool_vmm *v, size_t want, pool_vmm_change *chg) {
    size_t released = 0;
    *chg = (pool_vmm_change){0};
    while (released < want && v->idle > 0) {
        int32_t best = -1;
        for (int32_t e = 0; e < v->ext_count; e++) {
            const pool_extent *x = &v->ext[e];
            if (extent_spare(v, x) && (best < 0 || x->size > v->ext[best].size)) best = e;
        }
        if (best < 0) break;
        size_t size = v->ext[best].size;
        if (extent_unmap(v, best, chg) != VRAM_OK) break;   /* the driver refuses: no more this time */
        released += size;
    }
    return released;
}

size_t vram__pool_vmm_unmap_idle_outside(pool_vmm *v, size_t lo, size_t hi, pool_vmm_change *chg) {
    size_t released = 0;
    *chg = (pool_vmm_change){0};
    for (int32_t e = 0; e < v->ext_count && v->idle > 0; e++) {
        const pool_extent *x = &v->ext[e];
        if (x->size == 0 || x->busy != 0 || (x->offset < hi && x->offset + x->size > lo)) continue;
        size_t size = x->size;
        if (extent_unmap(v, e, chg) == VRAM_OK) released += size;
    }
    return released;
}

void vram__pool_vmm_unmap_stale(pool_vmm *v, pool_vmm_change *chg) {
    *chg = (pool_vmm_change){0};
    size_t words = (v->va_size / v->gran + 63) / 64;
    if (v->touched_bits == NULL) {         /* the first period starts: nothing noted before it */
        v->touched_bits = calloc(words, sizeof *v->touched_bits);
        return;                            /* (without host memory, the next tick tries again) */
    }
    for (int32_t e = 0; e < v->ext_count && v->idle > 0; e++) {
        const pool_extent *x = &v->ext[e];
        if (x->size == 0 || x->busy != 0) continue;
        if (!bits_any(v->touched_bits, x->offset >> v->gran_shift, ((x->offset + x->size) >> v->gran_shift) - 1))
            extent_unmap(v, e, chg);
    }
    memset(v->touched_bits, 0, words * sizeof *v->touched_bits);
}

/* ---- sleep and wake ------------------------------------------------------------------------- */

int64_t vram__pool_vmm_exported(const pool_vmm *v) {
    for (int32_t e = 0; e < v->ext_count; e++) {
        if (v->ext[e].size != 0 && v->ext[e].fd >= 0) return (int64_t)v->ext[e].offset;
    }
    return -1;
}

void vram__pool_vmm_unmap_all(pool_vmm *v, pool_vmm_change *chg) {
    *chg = (pool_vmm_change){0};
    for (int32_t e = 0; e < v->ext_count; e++) {
        if (v->ext[e].size != 0) (void)extent_unmap(v, e, chg);   /* (a refusal leaves it as it was) */
    }
    v->stale = 1;
}

size_t vram__pool_vmm_bit_words(const pool_vmm *v) {
    return ((v->va_size >> v->gran_shift) + 63) / 64;
}

void vram__pool_vmm_bits_add(const pool_vmm *v, uint64_t *bits, uint64_t addr, size_t size) {
    bits_set(bits, granule_of(v, addr), granule_of(v, addr + size - 1));
}

size_t vram__pool_vmm_bits_unmapped(const pool_vmm *v, uint64_t *want) {
    size_t n = 0;
    for (size_t w = 0, words = vram__pool_vmm_bit_words(v); w < words; w++) {
        want[w] &= ~v->mapped_bits[w];
        n += (size_t)__builtin_popcountll(want[w]);
    }
    return n << v->gran_shift;
}

uint64_t *vram__pool_vmm_bits_mapped(const pool_vmm *v) {
    size_t words = vram__pool_vmm_bit_words(v);
    uint64_t *bits = malloc(words * sizeof *bits);
    if (bits != NULL) memcpy(bits, v->mapped_bits, words * sizeof *bits);
    return bits;
}

/* The first granule in [g, last] whose bit in `bits` is `bit`, or last + 1. */
static size_t next_bit(const uint64_t *bits, size_t g, size_t last, int bit) {
    while (g <= last) {
        uint64_t word = bits[g / 64];
        word = (bit ? word : ~word) >> (g % 64);
        if (word != 0) {
            g += (size_t)__builtin_ctzll(word);
            return g <= last ? g : last + 1;
        }
        g = (g / 64 + 1) * 64;
    }
    return last + 1;
}

vram_status vram__pool_vmm_map_bits(pool_vmm *v, const uint64_t *bits, pool_vmm_change *chg) {
    *chg = (pool_vmm_change){0};
    size_t last = (v->va_size >> v->gran_shift) - 1, max_run = v->max_extent >> v->gran_shift;
    for (size_t g = next_bit(bits, 0, last, 1); g <= last; g = next_bit(bits, g, last, 1)) {
        size_t end = next_bit(bits, g, last, 0);
        while (g < end) {
            size_t run = end - g < max_run ? end - g : max_run;
            if (!all_mapped(v, g, g)) {           /* (the caller asks for unmapped granules only) */
                vram_status s = extent_map(v, g, run, chg);
                if (s != VRAM_OK) return s;
            }
            g += run;
        }
    }
    return VRAM_OK;
}

void vram__pool_vmm_unmap_bits(pool_vmm *v, const uint64_t *bits, pool_vmm_change *chg) {
    *chg = (pool_vmm_change){0};
    for (int32_t e = 0; e < v->ext_count; e++) {
        const pool_extent *x = &v->ext[e];
        if (x->size == 0) continue;
        size_t g = x->offset >> v->gran_shift, last = g + (x->size >> v->gran_shift) - 1;
        if (next_bit(bits, g, last, 0) > last) (void)extent_unmap(v, e, chg);   /* wholly in bits[] */
    }
    v->stale = 1;
}

size_t vram__pool_vmm_mapped_bytes(const pool_vmm *v, uint64_t addr, size_t size) {
    uint64_t end = addr + size;
    size_t n = 0;
    for (size_t g = granule_of(v, addr), last = granule_of(v, end - 1); g <= last; g++) {
        if (!(v->mapped_bits[g / 64] & (1ull << (g % 64)))) continue;
        uint64_t gs = v->base + ((uint64_t)g << v->gran_shift), ge = gs + v->gran;
        n += (size_t)((end < ge ? end : ge) - (addr > gs ? addr : gs));
    }
    return n;
}

int vram__pool_vmm_check(const pool_vmm *v, char *msg, size_t len) {
    size_t mapped = 0, idle = 0, zone_bytes[2] = {0, 0}, zone_count[2] = {0, 0};
    for (int32_t e = 0; e < v->ext_count; e++) {
        const pool_extent *x = &v->ext[e];
        if (x->size == 0) continue;
        mapped += x->size;
        zone_bytes[extent_zone(v, x)] += x->size;
        zone_count[extent_zone(v, x)]++;
        if (x->busy == 0) idle += x->size;
        if (x->busy > x->size || x->offset % v->gran != 0 || x->offset + x->size > v->va_size) {
            snprintf(msg, len, "extent %d is out of its range or busier than its size", (int)e);
            return -1;
        }
        for (size_t g = x->offset >> v->gran_shift; g < (x->offset + x->size) >> v->gran_shift; g++) {
            if (v->gran_ext[g] != e) {
                snprintf(msg, len, "granule %zu does not point to extent %d over it", g, (int)e);
                return -1;
            }
        }
    }
    if (mapped != v->mapped || idle != v->idle) {
        snprintf(msg, len, "mapped/idle bytes %zu/%zu differ from the extents' %zu/%zu", v->mapped, v->idle,
                 mapped, idle);
        return -1;
    }
    for (int z = 0; z < 2; z++) {
        if (zone_bytes[z] != v->zone_bytes[z] || zone_count[z] != v->zone_count[z]) {
            snprintf(msg, len, "zone %d counts %zu bytes in %zu extents, its extents are %zu bytes in %zu", z,
                     v->zone_bytes[z], v->zone_count[z], zone_bytes[z], zone_count[z]);
            return -1;
        }
    }
    size_t ngran = v->va_size >> v->gran_shift;        /* the quick tests say nothing false */
    size_t prefix_end = v->mapped_prefix >> v->gran_shift, zone = v->zone_start >> v->gran_shift;
    size_t zone_end = (v->zone_start + v->zone_prefix) >> v->gran_shift;
    int lies = prefix_end > ngran || (prefix_end > 0 && next_with(v, 0, prefix_end - 1, 0) < prefix_end);
    if (v->zone_start < v->va_size) {
        lies = lies || zone_end > ngran || (zone_end > zone && next_with(v, zone, zone_end - 1, 0) < zone_end);
    }
    if (lies) {
        snprintf(msg, len, "a mapped prefix (%zu or %zu + %zu bytes) covers an unmapped granule", v->mapped_prefix,
                 v->zone_start, v->zone_prefix);
        return -1;
    }
    if (v->quick_end != v->base + v->mapped_prefix || v->quick_zone_lo != v->base + v->zone_start ||
        v->quick_zone_end != v->quick_zone_lo + v->zone_prefix) {
        snprintf(msg, len, "the quick tests' addresses differ from the mapped prefixes");
        return -1;
    }
    return 0;
}
