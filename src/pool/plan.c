/*
 * plan.c: the repeating step of an allocation stream and its offline placement (see plan.h).
 *
 * Invariants: requests are numbered from 0 in the order fed; the history ring holds the last
 * PLAN_HISTORY of them (request n at n % PLAN_HISTORY); `live` is the bytes of the requests fed and
 * not freed; `candidate` is 0 or a period P with key[n - k] == key[n - k - P] for the last `run`
 * requests n - k, all from `since` on (the history before a gap joins nothing after it). No lock: the
 * owner serializes its calls.
 */
#include "pool/plan.h"

#include <stdlib.h>
#include <string.h>

#define PLAN_CHAIN_WALK 64     /* older occurrences of a 4-gram looked at for a longer period */

static uint64_t mix(uint64_t x) {          /* a 64-bit finalizer (splitmix64's) */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
    return x << k | x >> (64 - k);
}

static plan_request *at(const plan_detector *d, uint64_t n) {
    return &d->req[n % PLAN_HISTORY];
}

static int same_key(const plan_detector *d, uint64_t a, uint64_t b) {
    const plan_request *x = at(d, a), *y = at(d, b);
    return x->size == y->size && x->stream == y->stream;
}

/* Writes a byte of every page of [p, p + n) now, once (volatile: malloc and memset of zeros would
 * be turned into calloc, whose pages come on first touch), rather than a page fault every 128
 * requests over the program's first PLAN_HISTORY ones: on a virtual machine, where a fault takes
 * microseconds, transformer_varlen's warm passes 2-5 cost 138-214 ns a call with the faults, 70
 * without (vram replay --passes 12, 2-core machine). */
static void touch_pages(void *p, size_t n) {
    volatile unsigned char *b = p;
    for (size_t i = 0; i < n; i += 4096) b[i] = 0;
    if (n > 0) b[n - 1] = 0;   /* (p need not start a page: the last one) */
}

int vram__plan_detector_init(plan_detector *d) {
    memset(d, 0, sizeof *d);
    d->req = malloc(PLAN_HISTORY * sizeof *d->req);
    d->live_before = malloc(PLAN_HISTORY * sizeof *d->live_before);
    d->gram_prev = malloc(PLAN_HISTORY * sizeof *d->gram_prev);
    if (d->req == NULL || d->live_before == NULL || d->gram_prev == NULL) {
        vram__plan_detector_free(d);
        d->off = 1;
        return -1;
    }
    touch_pages(d->req, PLAN_HISTORY * sizeof *d->req);
    touch_pages(d->live_before, PLAN_HISTORY * sizeof *d->live_before);
    touch_pages(d->gram_prev, PLAN_HISTORY * sizeof *d->gram_prev);
    return 0;
}

void vram__plan_detector_free(plan_detector *d) {
    free(d->req);
    free(d->live_before);
    free(d->gram_prev);
    d->req = NULL;
    d->live_before = NULL;
    d->gram_prev = NULL;
}

void vram__plan_free(pool_plan *plan) {
    free(plan->size);
    free(plan->stream);
    free(plan->offset);
    free(plan->below);
    free(plan->below_first);
    free(plan->wraps);
    free(plan->due_first);
    free(plan->due_k);
    memset(plan, 0, sizeof *plan);
}

/* ---- placement ------------------------------------------------------------------------------ */

typedef struct place_ctx {
    const size_t   *size;
    const uint64_t *born, *dies;
} place_ctx;

static const place_ctx *sort_ctx;          /* (qsort has no context argument; callers serialize) */

static int larger_first(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (sort_ctx->size[x] != sort_ctx->size[y]) return sort_ctx->size[x] < sort_ctx->size[y] ? 1 : -1;
    return (sort_ctx->born[x] > sort_ctx->born[y]) - (sort_ctx->born[x] < sort_ctx->born[y]);
}

/* Whether [bx, dx) and [by, dy) meet on a cycle of `cycle` events (0: no cycle): a block alive past
 * the cycle's end (d > cycle) is alive again from the cycle's start, in the next repetition. */
static int alive_together(uint64_t bx, uint64_t dx, uint64_t by, uint64_t dy, uint64_t cycle) {
    if (bx < dy && by < dx) return 1;
    return cycle != 0 && ((bx < dy + cycle && by + cycle < dx) || (bx + cycle < dy && by < dx + cycle));
}

size_t vram__plan_place(size_t n, const size_t *size, const uint64_t *born, const uint64_t *dies, uint64_t cycle,
                  uint64_t *off) {
    size_t *order = malloc((n ? n : 1) * sizeof *order), *placed = malloc((n ? n : 1) * sizeof *placed);
    if (order == NULL || placed == NULL) {
        free(order);
        free(placed);
        return SIZE_MAX;
    }
    place_ctx ctx = {size, born, dies};
    for (size_t i = 0; i < n; i++) order[i] = i;
    sort_ctx = &ctx;
    qsort(order, n, sizeof *order, larger_first);
    size_t nplaced = 0, top = 0;                     /* placed: by offset */
    for (size_t i = 0; i < n; i++) {
        size_t b = order[i];
        uint64_t o = 0;
        for (size_t k = 0; k < nplaced; k++) {       /* the lowest gap among blocks alive with b */
            size_t p = placed[k];
            if (!alive_together(born[p], dies[p], born[b], dies[b], cycle)) continue;
            if (off[p] >= o + size[b]) break;
            if (off[p] + size[p] > o) o = off[p] + size[p];
        }
        off[b] = o;
        size_t lo = 0, hi = nplaced;                 /* where b goes by offset */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (off[placed[mid]] < o) lo = mid + 1;
            else hi = mid;
        }
        memmove(&placed[lo + 1], &placed[lo], (nplaced - lo) * sizeof *placed);
        placed[lo] = b;
        nplaced++;
        if (o + size[b] > top) top = o + size[b];
    }
    free(order);
    free(placed);
    return top;
}

/* The most bytes of the n blocks alive at once: a sweep over births and deaths in time (a death
 * before a birth at the same time: the placement lets such blocks share bytes). */
typedef struct sweep_point {
    uint64_t t;        /* time << 1 | 1 for a birth, | 0 for a death */
    size_t   bytes;
} sweep_point;

static int by_time(const void *a, const void *b) {
    uint64_t x = ((const sweep_point *)a)->t, y = ((const sweep_point *)b)->t;
    return (x > y) - (x < y);
}

static size_t live_peak(size_t n, const size_t *size, const uint64_t *born, const uint64_t *dies, uint64_t cycle) {
    sweep_point *pt = malloc((4 * n + 1) * sizeof *pt);
    if (pt == NULL) return 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int wraps = dies[i] > cycle;               /* alive again from the cycle's start: [0, dies - cycle) */
        pt[m++] = (sweep_point){born[i] << 1 | 1, size[i]};
        pt[m++] = (sweep_point){(wraps ? cycle : dies[i]) << 1, size[i]};
        if (wraps) {
            pt[m++] = (sweep_point){0 << 1 | 1, size[i]};
            pt[m++] = (sweep_point){(dies[i] - cycle) << 1, size[i]};
        }
    }
    qsort(pt, m, sizeof *pt, by_time);
    size_t live = 0, peak = 0;
    for (size_t i = 0; i < m; i++) {
        if (pt[i].t & 1) live += pt[i].bytes;
        else live -= pt[i].bytes;
        if (live > peak) peak = live;
    }
    free(pt);
    return peak;
}

/* ---- the plan of one step ------------------------------------------------------------------- */

/* The planned block below each request (plan.h): alive when it is requested, ending highest at or
 * below its offset (of those ending equally high, the first of the n); `first`: blocks of the step
 * itself only (in the first step followed, the blocks of the step before lie outside the plan's
 * range). born / dies of the n planned blocks (dies > cycle: alive into the next step until dies -
 * cycle), which[] their requests. A sweep over the step's events in time: the blocks alive are kept
 * by where they end, and each request asks for the highest end at or below its offset; O(n log n)
 * and a move of the alive set per change (its size). 0, or -1 without host memory. */
typedef struct below_item {
    uint64_t end;       /* where block j ends in the plan's range */
    uint32_t j;
} below_item;

static int by_end_then_later(const below_item *a, uint64_t end, uint32_t j) {   /* a before (end, j)? */
    return a->end < end || (a->end == end && a->j > j);
}

/* The first of the m items not before (end, j), by end and then by j from the last. */
static size_t below_seek(const below_item *set, size_t m, uint64_t end, uint32_t j) {
    size_t lo = 0, hi = m;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (by_end_then_later(&set[mid], end, j)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int by_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

enum { BELOW_GONE, BELOW_BEFORE, BELOW_ASK, BELOW_BORN };   /* at one time, in this order */

static int plan_below(const pool_plan *p, int32_t *below, int first, size_t n, const uint32_t *which,
                      const uint64_t *born, const uint64_t *dies, uint64_t cycle) {
    uint64_t *ev = malloc((4 * n + 1) * sizeof *ev);     /* time << 34 | kind << 32 | block */
    below_item *set = malloc((2 * n + 1) * sizeof *set);
    if (ev == NULL || set == NULL) {
        free(ev);
        free(set);
        return -1;
    }
    size_t m = 0, alive = 0;
    for (uint32_t j = 0; j < (uint32_t)n; j++) {
        ev[m++] = born[j] << 34 | (uint64_t)BELOW_ASK << 32 | j;
        ev[m++] = born[j] << 34 | (uint64_t)BELOW_BORN << 32 | j;
        if (dies[j] <= cycle) ev[m++] = dies[j] << 34 | (uint64_t)BELOW_GONE << 32 | j;   /* this step's */
        if (!first && dies[j] > cycle) {            /* the step before's block: alive from the start */
            ev[m++] = (uint64_t)BELOW_BEFORE << 32 | j;
            ev[m++] = (dies[j] - cycle) << 34 | (uint64_t)BELOW_GONE << 32 | j;
        }
    }
    qsort(ev, m, sizeof *ev, by_u64);
    for (uint32_t i = 0; i < p->period; i++) below[i] = -1;
    for (size_t e = 0; e < m; e++) {
        uint32_t j = (uint32_t)ev[e], kind = (uint32_t)(ev[e] >> 32) & 3;
        uint64_t end = p->offset[which[j]] + p->size[which[j]];
        size_t at = below_seek(set, alive, end, j);
        if (kind == BELOW_BORN || kind == BELOW_BEFORE) {
            memmove(&set[at + 1], &set[at], (alive - at) * sizeof *set);
            set[at] = (below_item){end, j};
            alive++;
        } else if (kind == BELOW_GONE) {             /* (a block alive twice is there twice) */
            if (at < alive && set[at].j == j && set[at].end == end) {
                memmove(&set[at], &set[at + 1], (alive - at - 1) * sizeof *set);
                alive--;
            }
        } else {                                     /* the highest end at or below j's offset */
            size_t k = below_seek(set, alive, p->offset[which[j]] + 1, UINT32_MAX);
            while (k > 0 && set[k - 1].j == j) k--;
            if (k > 0) below[which[j]] = (int32_t)which[set[k - 1].j];
        }
    }
    free(ev);
    free(set);
    return 0;
}

/* The life of request s + i's block in the step of `cycle` events from request s's: [*b, *e), or
 * with *e > cycle into the next step, until *e - cycle: when it was freed in the next step, or
 * else when the same request's block of the step before was freed in this one (before request
 * s + i either way). 0 when it lives longer than a step, or its death is not known: best fit's
 * then (weights, optimizer state, a cache). */
static int block_life(const plan_detector *d, uint64_t s, uint32_t P, uint32_t i, uint64_t *b, uint64_t *e) {
    const plan_request *r = at(d, s + i), *prev = at(d, s + i - P);
    uint64_t t0 = at(d, s)->born, end = at(d, s + P)->born;
    *b = r->born - t0;
    if (r->dies != UINT64_MAX && r->dies < end) {
        *e = r->dies - t0;
        return 1;
    }
    if (r->dies != UINT64_MAX) {           /* freed in the next step already: before its own request? */
        if (r->dies - end >= *b) return 0;
        *e = (end - t0) + (r->dies - end);
        return 1;
    }
    if (s + i < P || s + i - P < d->since || !same_key(d, s + i, s + i - P) || prev->dies == UINT64_MAX ||
        prev->dies < t0 || prev->dies >= r->born) {
        return 0;
    }
    *e = (end - t0) + (prev->dies - t0);
    return 1;
}

/* Places the n planned blocks of plan p (their requests which[], lives born / dies): offsets,
 * top, the blocks below, the request after which no block of the step before is alive. 0, or -1
 * without host memory. */
static int place_step(pool_plan *p, size_t n, const uint32_t *which, const size_t *bsize, const uint64_t *born,
                      const uint64_t *dies, uint64_t cycle) {
    uint64_t *boff = malloc((n ? n : 1) * sizeof *boff);
    size_t top = boff != NULL ? vram__plan_place(n, bsize, born, dies, cycle, boff) : SIZE_MAX;
    if (top == SIZE_MAX) {
        free(boff);
        return -1;
    }
    uint64_t last_wrap = 0;                /* the last death of a block of the step before */
    for (size_t k = 0; k < n; k++) {
        p->offset[which[k]] = boff[k];
        p->wraps[which[k]] = dies[k] > cycle;
        if (dies[k] > cycle && dies[k] - cycle > last_wrap) last_wrap = dies[k] - cycle;
    }
    free(boff);
    p->planned = (uint32_t)n;
    p->top = top;
    p->settle = 0;
    if (last_wrap > 0) {
        p->settle = p->period;
        for (size_t k = 0; k < n; k++) {
            if (born[k] > last_wrap && which[k] < p->settle) p->settle = which[k];
        }
    }
    if (plan_below(p, p->below, 0, n, which, born, dies, cycle) != 0) return -1;
    return plan_below(p, p->below_first, 1, n, which, born, dies, cycle);
}

/* The due lists of plan p (plan.h) for its n planned blocks (requests which[], deaths dies[] in the
 * step of `cycle` events from request s's, past the cycle: in the next step): each block is due at
 * the first request born after its free, found by a binary search over the step's requests (their
 * events rise), request 0 of the next step when the free comes after the step's last request. A
 * counting sort by request. 0, or -1 without host memory. */
static int plan_due(const plan_detector *d, uint64_t s, pool_plan *p, size_t n, const uint32_t *which,
                    const uint64_t *dies, uint64_t cycle) {
    uint32_t P = p->period, *due = malloc((n ? n : 1) * sizeof *due);
    p->due_first = calloc((size_t)P + 1, sizeof *p->due_first);
    p->due_k = malloc((n ? n : 1) * sizeof *p->due_k);
    if (due == NULL || p->due_first == NULL || p->due_k == NULL) {
        free(due);
        return -1;
    }
    uint64_t t0 = at(d, s)->born;
    for (size_t b = 0; b < n; b++) {
        uint64_t t = dies[b] > cycle ? dies[b] - cycle : dies[b];
        uint32_t lo = 0, hi = P;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (at(d, s + mid)->born - t0 < t) lo = mid + 1;
            else hi = mid;
        }
        due[b] = lo == P ? 0 : lo;
        p->due_first[due[b] + 1]++;
    }
    for (uint32_t j = 0; j < P; j++) p->due_first[j + 1] += p->due_first[j];
    for (size_t b = 0; b < n; b++) p->due_k[p->due_first[due[b]]++] = which[b];   /* (each start moves */
    for (uint32_t j = P; j > 0; j--) p->due_first[j] = p->due_first[j - 1];       /*  to the next's) */
    p->due_first[0] = 0;
    free(due);
    return 0;
}

/* Makes the plan of the step [s, s + P) (requests; all in the history), whose blocks freed before
 * the next step's end are planned. 0, or -1 without host memory (*plan untouched). */
static int make_plan(const plan_detector *d, uint64_t s, uint32_t P, pool_plan *plan) {
    pool_plan p = {.period = P, .start_request = s};
    uint64_t bytes = 0;                    /* all the step's requests: at least its planned blocks' peak */
    for (uint32_t i = 0; d->min_live > 0 && i < P && bytes < d->min_live; i++) bytes += at(d, s + i)->size;
    if (d->min_live > 0 && bytes < d->min_live) {   /* below the owner's bar: nothing to place, nor to */
        *plan = p;                                  /* allocate (a step's layers repeat too, often) */
        return 0;
    }
    uint64_t cycle = at(d, s + P)->born - at(d, s)->born;      /* the step's events */
    size_t *bsize = malloc(P * sizeof *bsize);
    uint64_t *born = malloc(P * sizeof *born), *dies = malloc(P * sizeof *dies);
    uint32_t *which = malloc(P * sizeof *which);
    p.size = malloc(P * sizeof *p.size);
    p.stream = malloc(P * sizeof *p.stream);
    p.offset = malloc(P * sizeof *p.offset);
    p.below = malloc(P * sizeof *p.below);
    p.below_first = malloc(P * sizeof *p.below_first);
    p.wraps = calloc(P, sizeof *p.wraps);
    int ok = bsize && born && dies && which && p.size && p.stream && p.offset && p.below && p.below_first && p.wraps;
    size_t n = 0, planned_bytes = 0;
    for (uint32_t i = 0; ok && i < P; i++) {
        p.size[i] = at(d, s + i)->size;
        p.stream[i] = at(d, s + i)->stream;
        p.offset[i] = PLAN_UNPLANNED;
        if (!block_life(d, s, P, i, &born[n], &dies[n])) continue;
        bsize[n] = p.size[i];
        planned_bytes += bsize[n];
        which[n++] = i;
    }
    /* (a sort: not when the blocks' bytes together are below the bar, or too many to place) */
    if (ok && n <= PLAN_MAX_PLACED && planned_bytes >= d->min_live) {
        p.live_peak = live_peak(n, bsize, born, dies, cycle);
    }
    int worth = ok && n > 0 && n <= PLAN_MAX_PLACED && p.live_peak >= d->min_live;   /* placing is O(n^2) */
    if (worth) ok = place_step(&p, n, which, bsize, born, dies, cycle) == 0 &&
                    plan_due(d, s, &p, n, which, dies, cycle) == 0;
    free(bsize);
    free(born);
    free(dies);
    free(which);
    if (!ok) {
        vram__plan_free(&p);
        return -1;
    }
    *plan = p;
    return 0;
}

/* The step's start in the last whole period [n - 2P + 1, n - P]: the request before which the
 * fewest bytes were live (the first such). */
static uint64_t step_start(const plan_detector *d, uint64_t n, uint32_t P) {
    uint64_t best = n + 1 - 2 * (uint64_t)P;
    for (uint64_t s = best + 1; s <= n - P; s++) {
        if (d->live_before[s % PLAN_HISTORY] < d->live_before[best % PLAN_HISTORY]) best = s;
    }
    return best;
}

/* ---- detection ------------------------------------------------------------------------------ */

/* A period for request n longer than d->floor: the older occurrences of its 4-gram, nearest first,
 * whose last four keys match; 0 when none. */
static uint32_t find_candidate(const plan_detector *d, uint64_t n) {
    uint64_t m = n;
    for (int walk = 0; walk < PLAN_CHAIN_WALK; walk++) {
        uint32_t back = d->gram_prev[m % PLAN_HISTORY];
        if (back == 0 || back > m || n - (m - back) > PLAN_MAX_STEP || n - (m - back) + 4 > PLAN_HISTORY / 2) {
            return 0;
        }
        m -= back;
        if (m < d->since + 3) return 0;     /* (its 4-gram reaches across a gap: not a repetition) */
        uint64_t P = n - m;
        if (P <= d->floor) continue;
        int match = 1;
        for (uint64_t k = 0; k < 4 && match; k++) match = same_key(d, n - k, m - k);
        if (match) return (uint32_t)P;
    }
    return 0;
}

/* Notes request n's 4-gram (the last four keys) for later candidates. */
static void note_gram(plan_detector *d, uint64_t n, uint64_t key) {
    d->keys[n % 4] = key;
    d->gram_prev[n % PLAN_HISTORY] = 0;
    if (n < 3) return;
    /* one finalizer over the four keys, each turned by its place (the bucket only narrows the search:
     * a candidate's keys are compared themselves) */
    uint64_t g = mix(rotl(d->keys[(n - 3) % 4], 48) ^ rotl(d->keys[(n - 2) % 4], 32) ^
                     rotl(d->keys[(n - 1) % 4], 16) ^ key);
    uint32_t *bucket = &d->gram[g >> (64 - PLAN_GRAM_BITS)];
    /* the distance back to the last request ending in this bucket, modulo 2^32 (an empty bucket, 0,
     * is further back than request 0; a stale one only costs a compare of keys) */
    uint32_t back = (uint32_t)(n + 1) - *bucket;
    if (back > 0 && back <= n && back < PLAN_HISTORY / 2) d->gram_prev[n % PLAN_HISTORY] = back;
    *bucket = (uint32_t)(n + 1);
}

int vram__plan_note_request(plan_detector *d, size_t size, uintptr_t stream, uint64_t *id, pool_plan *plan) {
    uint64_t n = d->requests++;
    *id = n;
    if (d->off) return 0;
    if (d->floor != 0 && n >= d->floor_until) d->floor = 0;   /* the period may come back */
    plan_request *r = at(d, n);
    *r = (plan_request){size, stream, d->events++, UINT64_MAX};
    d->live_before[n % PLAN_HISTORY] = d->live;
    d->live += size;
    note_gram(d, n, (uint64_t)size * 0x9e3779b97f4a7c15ull ^ (uint64_t)stream);
    if (d->candidate != 0) {
        if (same_key(d, n, n - d->candidate)) {
            d->run++;
        } else {                                       /* broken: longer periods only from now */
            if (d->run >= d->candidate) {
                d->floor = d->candidate;
                d->floor_until = n + 2 * (uint64_t)d->candidate;
            }
            d->candidate = d->run = d->fired = 0;
        }
    }
    if (d->candidate == 0 && (d->candidate = find_candidate(d, n)) != 0) d->run = 4;
    if (d->candidate == 0 || d->run < d->candidate || d->fired == d->candidate) return 0;
    uint64_t s = step_start(d, n, d->candidate);
    if (make_plan(d, s, d->candidate, plan) != 0) return -1;
    plan->start_request = s + 2 * (uint64_t)d->candidate;   /* the next step in phase with s */
    d->fired = d->candidate;
    d->floor = 0;
    return 1;
}

void vram__plan_note_gap(plan_detector *d) {
    d->since = d->requests;
    d->candidate = d->run = d->fired = d->floor = 0;
}

void vram__plan_note_free(plan_detector *d, uint64_t id, size_t size) {
    d->live -= size;
    if (d->off) return;
    if (id + PLAN_HISTORY > d->requests) at(d, id)->dies = d->events;
    d->events++;
}
