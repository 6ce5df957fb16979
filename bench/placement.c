/*
 * bench/placement.c: how much memory placement alone costs on a trace, with no driver in the way.
 *
 *   placement TRACE [--no-offline] [--check]
 *
 * Replays the trace's allocations (rounded to 256 bytes, as vram does) into one address space that
 * grows at its top, and prints one JSON line per rule with the top reached over the peak of live bytes
 * (each block rounded, as placed: peak_live_rounded_bytes) and the trace's path (as tools/json.c writes
 * strings: valid UTF-8 whatever its bytes):
 *
 *   best-fit    online: the smallest free hole below the top that fits, the lowest address among
 *               equals, else the top (vram's rule: with one address range and nothing mapped beyond
 *               blocks, VRAM_ALLOC_CONF=small_pool_kb:0,map_ahead_mb:0,extent_mb:2, `vram replay
 *               --policy growth` lands within 0.6% of this model on the nine traces);
 *   first-fit   online: the lowest free hole that fits;
 *   lifetimes   online, but told when every block will be freed (no allocator is): the hole whose
 *               neighbour dies nearest in time to the block (weighed by the share of the hole left
 *               unused), the block next to that neighbour, so that the two free up together: what
 *               one rule fed perfect lifetime predictions wins, block by block, without planning;
 *   offline     knowing every block's lifetime beforehand: blocks taken largest first, each at the
 *               lowest address where no block living at the same time lies (the "greedy by size"
 *               planners of inference runtimes). An upper bound for the best placement possible;
 *               O(blocks^2): 6 s for gpt2_generate's 90,000 blocks and 37 s for train_gpt2_generate's
 *               173,000 on a 2-core development machine; --no-offline skips it,
 *               --check verifies that its blocks alive at once do not overlap (O(blocks^2) again),
 *               and that every online placement gives each block its size between its neighbours.
 *
 * With growth vram maps physical memory under the address space as blocks need it and keeps it, so
 * its peak reserved is this top, up to granules: the gap between the online rules and `offline` is
 * what an allocator that does not know lifetimes loses to fragmentation, and can only win back by
 * remapping memory (driver calls) after the fact.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "trace.h"

#define UNIT 256u

typedef struct span {          /* online: the address space as a list of spans, in address order */
    uint64_t     off, size;
    int          used;
    size_t       dies;         /* used: the event that frees its block */
    struct span *prev, *next;
} span;

enum rule { BEST_FIT, FIRST_FIT, LIFETIMES };

typedef struct block {
    uint64_t size, off;
    size_t   born, dies;       /* event indexes: alive over [born, dies) */
} block;

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (p == NULL) {
        fprintf(stderr, "placement: out of host memory\n");
        exit(1);
    }
    return p;
}

#define MAX_REQUEST ((uint64_t)1 << 60)     /* larger requests are refused at load */

static uint64_t rounded(uint64_t bytes) {
    return bytes == 0 ? UNIT : (bytes + UNIT - 1) / UNIT * UNIT;
}

static size_t gap(size_t a, size_t b) {
    return a > b ? a - b : b - a;
}

/* LIFETIMES: how far apart in time hole s's used neighbours die from a block dying at `dies` (the
 * nearer one), weighed by the share of the hole the block leaves unused; lower is better. */
static double lifetime_score(const span *s, uint64_t size, size_t dies) {
    int left = s->prev != NULL && s->prev->used, right = s->next != NULL && s->next->used;
    size_t dl = left ? gap(s->prev->dies, dies) : 0, dr = right ? gap(s->next->dies, dies) : 0;
    size_t d = left && right ? (dl < dr ? dl : dr) : left ? dl : dr;
    return (double)d * (1.0 + (double)(s->size - size) / (double)s->size);
}

/* Online placement by `rule`; `dies` (LIFETIMES): the event that frees each allocation event's block.
 * Returns the top reached. */
static uint64_t online(const trace *t, enum rule rule, const size_t *dies, int check) {
    span **at = xcalloc(t->num_allocs, sizeof *at);
    span *head = xcalloc(1, sizeof *head);
    head->size = UINT64_MAX / 2;                     /* the free space above the top */
    uint64_t top = 0;
    for (size_t i = 0; i < t->num_events; i++) {
        const trace_event *e = &t->events[i];
        uint64_t size = rounded(e->bytes);
        if (e->kind == TRACE_ALLOC) {
            span *best = NULL;
            double best_score = 0;
            for (span *s = head; s != NULL; s = s->next) {
                if (s->used || s->size < size) continue;
                if (s->next == NULL) {               /* the top: only when no hole fits */
                    if (best == NULL) best = s;
                    break;
                }
                if (rule == LIFETIMES) {
                    double score = lifetime_score(s, size, dies[i]);
                    if (best == NULL || score < best_score) best = s, best_score = score;
                    continue;
                }
                if (best == NULL || (rule == BEST_FIT && s->size < best->size)) best = s;
                if (rule == FIRST_FIT || s->size == size) break;
            }
            /* the block at the hole's start; LIFETIMES: at its end when the block after the hole
             * dies nearer in time than the one before it */
            int at_end = rule == LIFETIMES && best->next != NULL && best->prev != NULL && best->prev->used &&
                         best->next->used && gap(best->next->dies, dies[i]) < gap(best->prev->dies, dies[i]);
            span *u = best;
            if (best->size > size && !at_end) {
                u = xcalloc(1, sizeof *u);
                u->off = best->off;
                u->size = size;
                u->prev = best->prev;
                u->next = best;
                if (best->prev) best->prev->next = u; else head = u;
                best->prev = u;
                best->off += size;
                best->size -= size;
            } else if (best->size > size) {
                u = xcalloc(1, sizeof *u);
                u->off = best->off + best->size - size;
                u->size = size;
                u->prev = best;
                u->next = best->next;
                best->next->prev = u;
                best->next = u;
                best->size -= size;
            }
            u->used = 1;
            u->dies = dies != NULL ? dies[i] : 0;
            at[e->alloc] = u;
            if (check && (u->size != size || (u->prev && u->prev->off + u->prev->size != u->off) ||
                          (u->next && u->off + u->size != u->next->off))) {
                fprintf(stderr, "placement: event %zu: a block of %llu bytes placed as %llu at %llu, not between its "
                        "neighbours\n", i, (unsigned long long)size, (unsigned long long)u->size,
                        (unsigned long long)u->off);
                exit(1);
            }
            if (u->off + u->size > top) top = u->off + u->size;
        } else {
            span *u = at[e->alloc];
            at[e->alloc] = NULL;
            u->used = 0;
            span *n = u->next, *p = u->prev;
            if (n != NULL && !n->used) {             /* merge with free neighbours */
                u->size += n->size;
                u->next = n->next;
                if (n->next) n->next->prev = u;
                free(n);
            }
            if (p != NULL && !p->used) {
                p->size += u->size;
                p->next = u->next;
                if (u->next) u->next->prev = p;
                free(u);
            }
        }
    }
    for (span *s = head; s != NULL;) {
        span *n = s->next;
        free(s);
        s = n;
    }
    free(at);
    return top;
}

static int larger_first(const void *a, const void *b) {
    const block *x = *(block *const *)a, *y = *(block *const *)b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return (x->born > y->born) - (x->born < y->born);
}

/* Whether two blocks alive at the same time overlap (offline); exits 1 when they do. */
static void check_offline(const block *blocks, size_t n) {
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            const block *a = &blocks[i], *b = &blocks[j];
            int together = a->born < b->dies && b->born < a->dies;
            if (together && a->off < b->off + b->size && b->off < a->off + a->size) {
                fprintf(stderr, "placement: offline placed blocks %zu and %zu over each other\n", i, j);
                exit(1);
            }
        }
    }
}

/* Offline greedy by size; returns the top reached. */
static uint64_t offline(const trace *t, int check) {
    block *blocks = xcalloc(t->num_allocs, sizeof *blocks);
    size_t *open = xcalloc(t->num_allocs, sizeof *open);   /* allocation number -> its block + 1 while live */
    size_t n = 0;
    for (size_t i = 0; i < t->num_events; i++) {
        const trace_event *e = &t->events[i];
        if (e->kind == TRACE_ALLOC) {
            blocks[n] = (block){rounded(e->bytes), 0, i, t->num_events};
            open[e->alloc] = ++n;
        } else {
            blocks[open[e->alloc] - 1].dies = i;
            open[e->alloc] = 0;
        }
    }
    block **order = xcalloc(n, sizeof *order), **placed = xcalloc(n, sizeof *placed);
    for (size_t i = 0; i < n; i++) order[i] = &blocks[i];
    qsort(order, n, sizeof *order, larger_first);
    size_t nplaced = 0;                              /* placed: in address order */
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++) {
        block *b = order[i];
        uint64_t off = 0;
        size_t k = 0;
        for (; k < nplaced; k++) {                   /* the lowest gap among blocks alive with b */
            const block *o = placed[k];
            if (o->born >= b->dies || b->born >= o->dies) continue;
            if (o->off >= off + b->size) break;
            if (o->off + o->size > off) off = o->off + o->size;
        }
        b->off = off;
        size_t lo = 0, hi = nplaced;                 /* where b goes in address order */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (placed[mid]->off < off) lo = mid + 1; else hi = mid;
        }
        k = lo;
        memmove(&placed[k + 1], &placed[k], (nplaced - k) * sizeof *placed);
        placed[k] = b;
        nplaced++;
        if (off + b->size > top) top = off + b->size;
    }
    if (check) check_offline(blocks, n);
    free(placed);
    free(order);
    free(open);
    free(blocks);
    return top;
}

/* For every allocation event, the event that frees its block (num_events: never freed). */
static size_t *death_times(const trace *t) {
    size_t *dies = xcalloc(t->num_events, sizeof *dies), *born = xcalloc(t->num_allocs, sizeof *born);
    for (size_t i = 0; i < t->num_events; i++) {
        const trace_event *e = &t->events[i];
        if (e->kind == TRACE_ALLOC) {
            dies[i] = t->num_events;
            born[e->alloc] = i;
        } else {
            dies[born[e->alloc]] = i;
        }
    }
    free(born);
    return dies;
}

/* The most bytes live at once, each block rounded as placed. */
static uint64_t peak_rounded(const trace *t) {
    uint64_t live = 0, peak = 0;
    uint64_t *size = xcalloc(t->num_allocs, sizeof *size);
    for (size_t i = 0; i < t->num_events; i++) {
        const trace_event *e = &t->events[i];
        if (e->kind == TRACE_ALLOC) {
            size[e->alloc] = rounded(e->bytes);
            live += size[e->alloc];
            if (live > peak) peak = live;
        } else {
            live -= size[e->alloc];
        }
    }
    free(size);
    return peak;
}

static void report(const char *path, const char *rule, uint64_t top, uint64_t peak) {
    printf("{\"trace\": ");
    json_string(stdout, path);                      /* valid UTF-8 whatever the path's bytes */
    printf(", \"rule\": \"%s\", \"peak_live_rounded_bytes\": %llu, \"top_bytes\": %llu, "
           "\"top_to_live\": %.4f}\n", rule, (unsigned long long)peak, (unsigned long long)top,
           peak ? (double)top / (double)peak : 0.0);
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int with_offline = 1, check = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-offline") == 0) with_offline = 0;
        else if (strcmp(argv[i], "--check") == 0) check = 1;
        else if (path == NULL && argv[i][0] != '-') path = argv[i];
        else path = NULL, i = argc;
    }
    if (path == NULL) {
        fprintf(stderr, "usage: placement TRACE [--no-offline] [--check]\n");
        return 2;
    }
    trace t;
    char err[512];
    if (trace_load(path, &t, err, sizeof err) != 0) {
        fprintf(stderr, "placement: %s\n", err);
        return 1;
    }
    for (size_t i = 0; i < t.num_events; i++) {
        if (t.events[i].bytes > MAX_REQUEST) {
            fprintf(stderr, "placement: %s: a request of %llu bytes is beyond what this model places\n", path,
                    (unsigned long long)t.events[i].bytes);
            trace_release(&t);
            return 1;
        }
    }
    uint64_t peak = peak_rounded(&t);
    size_t *dies = death_times(&t);
    report(path, "best-fit", online(&t, BEST_FIT, NULL, check), peak);
    report(path, "first-fit", online(&t, FIRST_FIT, NULL, check), peak);
    report(path, "lifetimes", online(&t, LIFETIMES, dies, check), peak);
    if (with_offline) report(path, "offline", offline(&t, check), peak);
    free(dies);
    trace_release(&t);
    return 0;
}
