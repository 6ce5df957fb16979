/*
 * unit_split_merge.c: the cuts and joins of chunks (src/pool/split_merge.h) on their own, on an
 * arena record built by hand (no backend, no runtime): the split of a block and its rest (free or
 * pending), the front cut that keeps the chunk's record, the cut at an address, the merge of a freed
 * chunk with its free neighbours (the record kept, the one recycled), never with a busy one, never
 * across a zone's edge (the small zone's end, the plan's zone's start) nor across regions, the free
 * bins of each zone and the figures of the hand-out and free paths kept consistent; and a randomized
 * run against a reference map of units (who holds each 256 bytes), whose free runs, cut at the zones'
 * edges, must be exactly the free chunks.
 *
 * Regions are laid out as strings in units of 256 bytes, "U4 F12 P2" (used, free, pending), so an
 * expected layout reads as the tiling it is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/split_merge.h"
#include "pool/stats.h"
#include "pool/stream_order.h"
#include "unit.h"

#define U VRAM_POOL_UNIT
#define BASE ((uint64_t)0x7f0000000000ull)

static const char *layout(const pool_region *r);

/* On a failure: the layout of every region of the arena. */
static void print_regions(void *ctx) {
    const pool_arena *p = ctx;
    for (const pool_region *r = p->regions; r != NULL; r = r->next) {
        printf("  region at 0x%" PRIx64 ": %s\n", r->base, layout(r));
    }
}

static pool_arena *arena_new(void) {
    pool_arena *p = aligned_alloc(_Alignof(pool_arena), sizeof *p);
    EXPECT(p != NULL);
    memset(p, 0, sizeof *p);
    p->plan.lo = UINT64_MAX;          /* no plan's zone, no small zone: as vram__arena_create leaves it */
    pool_lock_init(&p->lock);
    pool_lock_take(&p->lock);         /* held throughout, as the _locked functions need (debug.h) */
    unit_on_failure(print_regions, p);
    return p;
}

static pool_chunk *chunk_at(pool_arena *p, pool_region *r, uint64_t addr, size_t size) {
    pool_chunk *c = chunk_new_locked(p);
    EXPECT(c != NULL);
    c->addr = addr;
    c->size = size;
    c->region = r;
    c->state = CHUNK_FREE;
    c->prev = r->last;
    if (r->last) r->last->next = c; else r->first = c;
    r->last = c;
    vram__free_bins_insert(pool_bins_of(p, c), c);
    return c;
}

/* A region of `units` units at base, one free chunk (the VMM region of the arena when vmm). */
static pool_region *region_new(pool_arena *p, uint64_t base, size_t units, int vmm) {
    pool_region *r = calloc(1, sizeof *r);
    EXPECT(r != NULL);
    r->kind = vmm ? REGION_VMM : REGION_PLAIN;
    r->base = base;
    r->size = units * U;
    r->next = p->regions;
    p->regions = r;
    if (vmm) p->vmm = r;
    chunk_at(p, r, base, units * U);
    return r;
}

/* A VMM region of 64 units in three zones: small [0, 16), large [16, 48), the plan's [48, 64), a free
 * chunk each, as backing.c and plan_arena.c leave them. */
static pool_region *zoned_region(pool_arena *p) {
    pool_region *r = calloc(1, sizeof *r);
    EXPECT(r != NULL);
    r->kind = REGION_VMM;
    r->base = BASE;
    r->size = 64 * U;
    p->regions = r;
    p->vmm = r;
    p->small_end = BASE + 16 * U;
    p->plan.lo = BASE + 48 * U;
    p->plan.hi = BASE + 64 * U;
    chunk_at(p, r, BASE, 16 * U);
    chunk_at(p, r, BASE + 16 * U, 32 * U);
    p->plan.first = chunk_at(p, r, BASE + 48 * U, 16 * U);
    return r;
}

static void arena_free_all(pool_arena *p) {
    while (p->regions != NULL) {
        pool_region *r = p->regions;
        p->regions = r->next;
        for (pool_chunk *c = r->first, *n; c != NULL; c = n) {
            n = c->next;
            free(c);
        }
        free(r);
    }
    vram__chunk_free_spares(p);
    unit_on_failure(NULL, NULL);
    pool_lock_give(&p->lock);
    free(p);
}

/* ---- the region as a string, and its invariants ---------------------------------------------- */

static const char *layout(const pool_region *r) {
    static char buf[16384];
    size_t at = 0;
    buf[0] = '\0';
    for (const pool_chunk *c = r->first; c != NULL && at < sizeof buf - 32; c = c->next) {
        char k = c->state == CHUNK_FREE ? 'F' : c->state == CHUNK_USED ? 'U' : c->state == CHUNK_PENDING ? 'P' : '?';
        if (c->size % U != 0) {
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%c%zuB", at ? " " : "", k, c->size);
        } else {
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%c%zu", at ? " " : "", k, c->size / U);
        }
    }
    return buf;
}

#define EXPECT_LAYOUT(r, want)                                                                  \
    do {                                                                                        \
        const char *got_ = layout(r);                                                           \
        if (strcmp(got_, want) != 0)                                                            \
            unit_fail(__FILE__, __LINE__, "layout of %s\n    got:  %s\n    want: %s", #r, got_, want); \
    } while (0)

static int cls_differs(const pool_chunk *c, int fl, int sl) {
    return c->bin_fl != fl || c->bin_sl != sl;
}

static int in_bins(const free_bins *b, const pool_chunk *c) {
    for (const pool_chunk *x = b->head[c->bin_fl][c->bin_sl]; x != NULL; x = x->right) {
        if (x == c) return 1;
    }
    return 0;
}

/* split_merge.c's invariants: chunks tile each region in address order; no two free neighbours but
 * across a zone's edge; every free chunk in its zone's bins and only those (counts and bytes);
 * plan.first starts the plan's zone; the arena's figures are the sum of its used chunks. */
static void expect_sound(pool_arena *p) {
    size_t count[3] = {0, 0, 0}, bytes[3] = {0, 0, 0}, used = 0, used_bytes = 0;
    free_bins *all[3] = {&p->bins, &p->sbins, &p->plan.bins};
    for (pool_region *r = p->regions; r != NULL; r = r->next) {
        uint64_t at = r->base;
        EXPECT(r->first != NULL && r->first->prev == NULL);
        for (pool_chunk *c = r->first; c != NULL; c = c->next) {
            unit_note("the chunk at unit %" PRIu64 " of the region at 0x%" PRIx64, (c->addr - r->base) / U, r->base);
            EXPECT_U64(c->addr, ==, at);
            EXPECT(c->size > 0);
            EXPECT_PTR(c->region, ==, r);
            EXPECT(c->next != NULL || r->last == c);
            if (c->next) EXPECT_PTR(c->next->prev, ==, c);
            if (p->plan.hi != 0) {       /* no chunk spans a zone's edge */
                uint64_t end = c->addr + c->size;
                if (r == p->vmm) {
                    EXPECT(!(c->addr < p->small_end && end > p->small_end));
                    EXPECT(!(c->addr < p->plan.lo && end > p->plan.lo));
                }
            }
            if (c->state == CHUNK_FREE) {
                free_bins *b = pool_bins_of(p, c);
                EXPECT(in_bins(b, c));
                int k = b == &p->bins ? 0 : b == &p->sbins ? 1 : 2;
                count[k]++;
                bytes[k] += c->size;
                if (c->next && c->next->state == CHUNK_FREE) EXPECT(pool_zone_edge(p, c->next->addr));
            } else if (c->state == CHUNK_USED) {
                used++;
                used_bytes += c->size;
            }
            at += c->size;
        }
        EXPECT_U64(at, ==, r->base + r->size);
    }
    for (int k = 0; k < 3; k++) {
        EXPECT_SOUND(vram__free_bins_check(all[k], UNIT_WHY));
        EXPECT_SIZE(all[k]->count, ==, count[k]);
        EXPECT_SIZE(all[k]->bytes, ==, bytes[k]);
    }
    if (p->plan.hi != 0) {
        EXPECT(p->plan.first != NULL);
        EXPECT_U64(p->plan.first->addr, ==, p->plan.lo);
    }
    EXPECT_SIZE(p->used_count, ==, used);
    EXPECT_SIZE(p->current, ==, used_bytes);
    size_t kinds = p->stats.bytes[1].cur + p->stats.bytes[2].cur;
    EXPECT_SIZE(kinds, ==, used_bytes);
    EXPECT_SIZE(p->stats.blocks[1].cur + p->stats.blocks[2].cur, ==, used);
    unit_note("%s", "");
}

/* ---- hand-out and free as the arena does them (vram__arena_take_locked, vram__pool_release_used_locked) ---- */

static pool_chunk *take_req(pool_arena *p, pool_chunk *c, size_t size, size_t req) {
    c = chunk_take_front_locked(p, c, size);
    c->state = CHUNK_USED;
    c->req = req;
    note_used_locked(p, c, 1);
    return c;
}

static pool_chunk *take(pool_arena *p, pool_chunk *c, size_t size) {
    return take_req(p, c, size, size);
}

static pool_chunk *chunk_at_unit(pool_region *r, size_t unit) {
    for (pool_chunk *c = r->first; c != NULL; c = c->next) {
        if (c->addr == r->base + unit * U) return c;
    }
    unit_fail(__FILE__, __LINE__, "no chunk starts at unit %zu: %s", unit, layout(r));
}

/* Used blocks of the given sizes (units) from the start of r's first chunk, the rest left free. */
static void carve(pool_arena *p, pool_region *r, const size_t *units, int n) {
    for (int i = 0; i < n; i++) {
        pool_chunk *c = r->first;
        while (c->state != CHUNK_FREE) c = c->next;
        take(p, c, units[i] * U);
    }
}

/* ---- split ----------------------------------------------------------------------------------- */

UNIT_TEST(split_merge, split_cuts_a_block_and_indexes_the_rest) {
    pool_arena *p = arena_new();
    pool_region *r = region_new(p, BASE, 64, 0);
    pool_chunk *c = r->first;
    vram__free_bins_remove(&p->bins, c);             /* as a hand-out takes it */
    c->state = CHUNK_USED;
    EXPECT_INT(vram__chunk_split_locked(p, c, 16 * U), ==, 0);
    EXPECT_LAYOUT(r, "U16 F48");
    EXPECT_PTR(r->first, ==, c);
    EXPECT_U64(r->last->addr, ==, BASE + 16 * U);
    EXPECT_PTR(vram__free_bins_best_fit(&p->bins, U), ==, r->last);
    EXPECT_SIZE(p->bins.count, ==, 1);
    EXPECT_SIZE(p->bins.bytes, ==, 48 * U);
    c->state = CHUNK_FREE;                     /* (the arena's figures: nothing was counted) */
    vram__chunk_make_free_locked(p, c, 0);
    EXPECT_LAYOUT(r, "F64");
    expect_sound(p);
    arena_free_all(p);
}

UNIT_TEST(split_merge, a_rest_under_a_unit_stays_with_the_block) {
    pool_arena *p = arena_new();
    pool_region *r = region_new(p, BASE, 4, 0);
    pool_chunk *c = r->first;
    vram__free_bins_remove(&p->bins, c);
    c->state = CHUNK_USED;
    EXPECT_INT(vram__chunk_split_locked(p, c, 4 * U), ==, 0);          /* nothing left */
    EXPECT_LAYOUT(r, "U4");
    EXPECT_INT(vram__chunk_split_locked(p, c, 4 * U - 255), ==, 0);    /* 255 bytes left: kept whole */
    EXPECT_LAYOUT(r, "U4");
    EXPECT_INT(vram__chunk_split_locked(p, c, 3 * U), ==, 0);          /* one unit left: split */
    EXPECT_LAYOUT(r, "U3 F1");
    EXPECT_SIZE(p->bins.count, ==, 1);
    c->state = CHUNK_FREE;
    vram__chunk_make_free_locked(p, c, 0);
    EXPECT_LAYOUT(r, "F4");
    expect_sound(p);
    arena_free_all(p);
}

/* The rest of a pending chunk is pending on the same stream, with the same event (one more reference). */
UNIT_TEST(split_merge, the_rest_of_a_pending_chunk_stays_pending) {
    pool_arena *p = arena_new();
    pool_region *r = region_new(p, BASE, 32, 0);
    pool_chunk *c = r->first;
    vram__free_bins_remove(&p->bins, c);
    pool_event ev = {.event = (void *)0x1, .refs = 1};
    c->state = CHUNK_PENDING;
    c->stream = (void *)0x5;
    c->event = &ev;
    EXPECT_INT(vram__chunk_split_locked(p, c, 8 * U), ==, 0);
    EXPECT_LAYOUT(r, "P8 P24");
    pool_chunk *rest = c->next;
    EXPECT_PTR(rest->stream, ==, (void *)0x5);
    EXPECT_PTR(rest->event, ==, &ev);
    EXPECT_INT(ev.refs, ==, 2);
    EXPECT_PTR(p->order.pending, ==, rest);
    EXPECT_SIZE(p->order.pending_count, ==, 1);
    EXPECT_SIZE(p->order.unrecorded, ==, 0);
    EXPECT_SIZE(p->bins.count, ==, 0);          /* nothing pending is in the bins */
    /* one without an event yet (an owned-stream free): the rest counts as unrecorded too */
    pending_unlink_locked(p, rest);
    rest->event = NULL;
    ev.refs--;
    EXPECT_INT(vram__chunk_split_locked(p, rest, 4 * U), ==, 0);
    EXPECT_LAYOUT(r, "P8 P4 P20");
    EXPECT_PTR(rest->next->event, ==, NULL);
    EXPECT_SIZE(p->order.unrecorded, ==, 1);
    EXPECT_SIZE(p->order.pending_count, ==, 1);
    arena_free_all(p);
}

/* ---- the front cut --------------------------------------------------------------------------- */

UNIT_TEST(split_merge, take_front_gives_a_new_record_and_keeps_the_chunks) {
    pool_arena *p = arena_new();
    size_t s = ((size_t)4 << 20) + 64 * 1024;         /* in [4 MiB, 4 MiB + 128 KiB), one class */
    pool_region *r = region_new(p, BASE, s / U, 0);
    pool_chunk *c = r->first;
    region_new(p, BASE + (1ull << 30), s / U, 0);     /* another chunk of c's class, newer: its head */
    int fl = c->bin_fl, sl = c->bin_sl;
    EXPECT_PTR(p->bins.head[fl][sl]->right, ==, c);
    pool_chunk *b = chunk_take_front_locked(p, c, 64 * U);     /* 4 MiB + 48 KiB left: the same class */
    EXPECT_PTR(b, !=, c);
    EXPECT_U64(b->addr, ==, BASE);
    EXPECT_SIZE(b->size, ==, 64 * U);
    EXPECT_INT(b->state, ==, CHUNK_FREE);     /* (the caller marks it used) */
    EXPECT_PTR(r->first, ==, b);
    EXPECT_PTR(b->prev, ==, NULL);
    EXPECT_PTR(b->next, ==, c);
    EXPECT_PTR(c->prev, ==, b);
    EXPECT_U64(c->addr, ==, BASE + 64 * U);
    EXPECT_SIZE(c->size, ==, s - 64 * U);
    EXPECT_INT(c->bin_fl, ==, fl);               /* its place in the bins kept */
    EXPECT_INT(c->bin_sl, ==, sl);
    EXPECT_PTR(p->bins.head[fl][sl]->right, ==, c);
    EXPECT_SIZE(p->bins.count, ==, 2);
    EXPECT_SIZE(p->bins.bytes, ==, 2 * s - 64 * U);
    b->state = CHUNK_USED;
    EXPECT_LAYOUT(r, "U64 F16576");
    EXPECT_SOUND(vram__free_bins_check(&p->bins, UNIT_WHY));
    /* into another class: it moves */
    pool_chunk *b2 = chunk_take_front_locked(p, c, s / 2);
    b2->state = CHUNK_USED;
    EXPECT_LAYOUT(r, "U64 U8320 F8256");
    EXPECT(in_bins(&p->bins, c));
    EXPECT_INT(cls_differs(c, fl, sl), ==, 1);
    EXPECT_SOUND(vram__free_bins_check(&p->bins, UNIT_WHY));
    /* a rest under a unit: the chunk itself, out of the bins */
    pool_chunk *d = chunk_take_front_locked(p, c, c->size);
    EXPECT_PTR(d, ==, c);
    EXPECT(!in_bins(&p->bins, c));
    EXPECT_SIZE(p->bins.count, ==, 1);
    c->state = CHUNK_FREE;
    vram__chunk_make_free_locked(p, c, 0);
    b2->state = CHUNK_FREE;
    vram__chunk_make_free_locked(p, b2, 0);
    b->state = CHUNK_FREE;
    vram__chunk_make_free_locked(p, b, 0);
    EXPECT_LAYOUT(r, "F16640");
    expect_sound(p);
    arena_free_all(p);
}

UNIT_TEST(split_merge, take_front_of_the_plans_first_chunk_moves_plan_first) {
    pool_arena *p = arena_new();
    pool_region *r = zoned_region(p);
    pool_chunk *z = p->plan.first;
    pool_chunk *b = take(p, z, 4 * U);
    EXPECT_PTR(p->plan.first, ==, b);
    EXPECT_LAYOUT(r, "F16 F32 U4 F12");
    EXPECT(in_bins(&p->plan.bins, z));
    expect_sound(p);
    vram__pool_release_used_locked(p, b);
    EXPECT_LAYOUT(r, "F16 F32 F16");
    expect_sound(p);
    arena_free_all(p);
}

/* ---- the cut at an address ------------------------------------------------------------------- */

UNIT_TEST(split_merge, cut_at_an_address_leaves_both_parts_free_and_indexed) {
    pool_arena *p = arena_new();
    pool_region *r = region_new(p, BASE, 64, 0);
    pool_chunk *c = r->first;
    EXPECT_PTR(vram__chunk_cut_at_locked(p, c, BASE), ==, c);          /* at its start: itself */
    EXPECT_LAYOUT(r, "F64");
    pool_chunk *z = vram__chunk_cut_at_locked(p, c, BASE + 20 * U);
    EXPECT(z != NULL);
    EXPECT_U64(z->addr, ==, BASE + 20 * U);
    EXPECT_LAYOUT(r, "F20 F44");                                /* (a hand-out takes z next) */
    EXPECT(in_bins(&p->bins, c) && in_bins(&p->bins, z));
    EXPECT_SIZE(p->bins.count, ==, 2);
    EXPECT_SIZE(p->bins.bytes, ==, 64 * U);
    pool_chunk *b = take(p, z, 4 * U);
    EXPECT_LAYOUT(r, "F20 U4 F40");
    expect_sound(p);
    vram__pool_release_used_locked(p, b);
    EXPECT_LAYOUT(r, "F64");
    expect_sound(p);
    arena_free_all(p);
}

/* ---- merge ----------------------------------------------------------------------------------- */

UNIT_TEST(split_merge, a_freed_block_between_busy_neighbours_stays_alone) {
    pool_arena *p = arena_new();
    pool_region *r = region_new(p, BASE, 64, 0);
    size_t sizes[] = {4, 4, 4, 4};
    carve(p, r, sizes, 4);
    EXPECT_LAYOUT(r, "U4 U4 U4 U4 F48");
    expect_sound(p);
    pool_chunk *b = chunk_at_unit(r, 4), *d = chunk_at_unit(r, 12);
    vram__pool_release_used_locked(p, b);
    EXPECT_LAYOUT(r, "U4 F4 U4 U4 F48");
    EXPECT(in_bins(&p->bins, b));
    /* a pending neighbour is busy too */
    pool_chunk *pend = chunk_at_unit(r, 8);
    note_used_locked(p, pend, 0);
    pend->state = CHUNK_PENDING;
    pending_link_locked(p, pend);
    vram__pool_release_used_locked(p, d);             /* next to the pending one and the free rest */
    EXPECT_LAYOUT(r, "U4 F4 P4 F52");
    pending_unlink_locked(p, pend);
    vram__chunk_make_free_locked(p, pend, 1);         /* its stream passed the free: all of it joins */
    EXPECT_LAYOUT(r, "U4 F60");
    expect_sound(p);
    arena_free_all(p);
}

UNIT_TEST(split_merge, merge_with_the_previous_keeps_its_record) {
    pool_arena *p = arena_new();
    pool_region *r = region_new(p, BASE, 64, 0);
    size_t sizes[] = {4, 4, 4};
    carve(p, r, sizes, 3);
    pool_chunk *a = chunk_at_unit(r, 0), *b = chunk_at_unit(r, 4);
    vram__pool_release_used_locked(p, a);
    vram__pool_release_used_locked(p, b);
    EXPECT_LAYOUT(r, "F8 U4 F52");
    EXPECT_PTR(r->first, ==, a);                /* a grew over b */
    EXPECT_SIZE(a->size, ==, 8 * U);
    EXPECT_PTR(p->spare, ==, b);                /* b's record recycled */
    EXPECT(in_bins(&p->bins, a));
    expect_sound(p);
    pool_chunk *n = chunk_new_locked(p);        /* the spare comes back zeroed */
    EXPECT_PTR(n, ==, b);
    EXPECT_U64(n->addr, ==, 0);
    EXPECT_PTR(n->prev, ==, NULL);
    EXPECT_PTR(p->spare, ==, NULL);
    chunk_recycle_locked(p, n);
    arena_free_all(p);
}

UNIT_TEST(split_merge, merge_with_the_next_gives_it_the_address) {
    pool_arena *p = arena_new();
    pool_region *r = region_new(p, BASE, 64, 0);
    size_t sizes[] = {4, 4, 4};
    carve(p, r, sizes, 3);
    pool_chunk *a = chunk_at_unit(r, 0), *b = chunk_at_unit(r, 4), *rest = r->last;
    vram__pool_release_used_locked(p, b);
    EXPECT_LAYOUT(r, "U4 F4 U4 F52");
    pool_chunk *c = chunk_at_unit(r, 8);
    vram__pool_release_used_locked(p, c);             /* joins b before it and the rest after it */
    EXPECT_LAYOUT(r, "U4 F60");
    EXPECT_PTR(a->next, ==, b);                 /* the previous keeps its record, */
    EXPECT_PTR(r->last, ==, b);                 /* the last one's went */
    EXPECT_SIZE(p->bins.count, ==, 1);
    (void)rest;
    vram__pool_release_used_locked(p, a);             /* joins the next: it takes a's address */
    EXPECT_LAYOUT(r, "F64");
    EXPECT_PTR(r->first, ==, b);
    EXPECT_PTR(r->last, ==, b);
    EXPECT_U64(b->addr, ==, BASE);
    EXPECT_PTR(b->prev, ==, NULL);
    expect_sound(p);
    arena_free_all(p);
}

/* The small zone's end and the plan's zone's start: free chunks on both sides stay apart, each in
 * its zone's bins. */
UNIT_TEST(split_merge, no_merge_across_a_zones_edge) {
    pool_arena *p = arena_new();
    pool_region *r = zoned_region(p);
    EXPECT_LAYOUT(r, "F16 F32 F16");
    EXPECT_SIZE(p->sbins.count, ==, 1);
    EXPECT_SIZE(p->bins.count, ==, 1);
    EXPECT_SIZE(p->plan.bins.count, ==, 1);
    expect_sound(p);
    /* blocks on both sides of each edge */
    pool_chunk *s_last = take(p, vram__chunk_cut_at_locked(p, chunk_at_unit(r, 0), BASE + 12 * U), 4 * U);
    pool_chunk *l_first = take(p, chunk_at_unit(r, 16), 4 * U);
    pool_chunk *l_last = take(p, vram__chunk_cut_at_locked(p, chunk_at_unit(r, 20), BASE + 44 * U), 4 * U);
    pool_chunk *z_first = take(p, p->plan.first, 4 * U);
    EXPECT_LAYOUT(r, "F12 U4 U4 F24 U4 U4 F12");
    expect_sound(p);
    vram__pool_release_used_locked(p, l_first);       /* joins the large zone's free chunk, not the small's */
    EXPECT_LAYOUT(r, "F12 U4 F28 U4 U4 F12");
    vram__pool_release_used_locked(p, s_last);        /* joins the small zone's only */
    EXPECT_LAYOUT(r, "F16 F28 U4 U4 F12");
    vram__pool_release_used_locked(p, z_first);       /* the plan's zone's */
    EXPECT_LAYOUT(r, "F16 F28 U4 F16");
    EXPECT_PTR(p->plan.first, ==, chunk_at_unit(r, 48));
    vram__pool_release_used_locked(p, l_last);
    EXPECT_LAYOUT(r, "F16 F32 F16");
    EXPECT_SIZE(p->sbins.bytes, ==, 16 * U);
    EXPECT_SIZE(p->bins.bytes, ==, 32 * U);
    EXPECT_SIZE(p->plan.bins.bytes, ==, 16 * U);
    expect_sound(p);
    arena_free_all(p);
}

/* The plan's zone's first chunk freed next to a free one after it: that record starts the zone now. */
UNIT_TEST(split_merge, plan_first_follows_a_merge_at_the_zones_start) {
    pool_arena *p = arena_new();
    pool_region *r = zoned_region(p);
    pool_chunk *z = take(p, p->plan.first, 4 * U);
    pool_chunk *rest = z->next;
    EXPECT_PTR(p->plan.first, ==, z);
    vram__pool_release_used_locked(p, z);
    EXPECT_PTR(p->plan.first, ==, rest);
    EXPECT_U64(rest->addr, ==, p->plan.lo);
    EXPECT_LAYOUT(r, "F16 F32 F16");
    expect_sound(p);
    arena_free_all(p);
}

/* Two regions whose addresses touch: their free ends stay two chunks, each in its own region. */
UNIT_TEST(split_merge, no_merge_across_regions) {
    pool_arena *p = arena_new();
    pool_region *r1 = region_new(p, BASE, 32, 0);
    pool_region *r2 = region_new(p, BASE + 32 * U, 32, 0);
    pool_chunk *a = take(p, r1->first, 28 * U);        /* r1: U28 F4 */
    pool_chunk *b = take(p, r2->first, 4 * U);         /* r2: U4 F28 */
    take(p, r2->last, 4 * U);                          /* r2: U4 U4 F24 */
    EXPECT_LAYOUT(r1, "U28 F4");
    EXPECT_LAYOUT(r2, "U4 U4 F24");
    vram__pool_release_used_locked(p, b);                    /* r2's first: touches r1's free end */
    EXPECT_LAYOUT(r1, "U28 F4");
    EXPECT_LAYOUT(r2, "F4 U4 F24");
    EXPECT_PTR(r1->last->next, ==, NULL);
    EXPECT_PTR(r2->first->prev, ==, NULL);
    EXPECT_SIZE(p->bins.count, ==, 3);
    vram__pool_release_used_locked(p, a);
    EXPECT_LAYOUT(r1, "F32");
    EXPECT_LAYOUT(r2, "F4 U4 F24");
    expect_sound(p);
    arena_free_all(p);
}

/* The hand-out and free paths' figures (note_used_locked): PyTorch's kinds split at 1 MiB, and a VMM
 * region's counts marked stale by a free. */
UNIT_TEST(split_merge, the_figures_follow_hand_outs_and_frees) {
    pool_arena *p = arena_new();
    pool_region *r = region_new(p, BASE, 16384, 1);    /* 4 MiB */
    pool_chunk *small = take_req(p, r->first, 4 * U, 1000);
    pool_chunk *mib = take(p, r->last, 4096 * U);      /* 1 MiB: still small */
    pool_chunk *large = take(p, r->last, 4097 * U);
    EXPECT_LAYOUT(r, "U4 U4096 U4097 F8187");
    EXPECT_SIZE(p->current, ==, 8197 * U);
    EXPECT_SIZE(p->used_count, ==, 3);
    EXPECT_U64(p->num_allocs, ==, 3);
    EXPECT_SIZE(p->stats.blocks[1].cur, ==, 2);
    EXPECT_SIZE(p->stats.blocks[2].cur, ==, 1);
    EXPECT_SIZE(p->stats.bytes[1].cur, ==, 4100 * U);
    EXPECT_SIZE(p->stats.bytes[2].cur, ==, 4097 * U);
    EXPECT_SIZE(p->stats.req[0].cur, ==, 1000 + 8193 * U);
    EXPECT_SIZE(p->stats.req[1].cur, ==, 1000 + 4096 * U);
    expect_sound(p);
    r->vmm.stale = 0;
    vram__pool_release_used_locked(p, mib);
    EXPECT_INT(r->vmm.stale, ==, 1);                   /* the extents' counts are stale now */
    EXPECT_SIZE(p->current, ==, 4101 * U);
    EXPECT_U64(p->num_frees, ==, 1);
    EXPECT_SIZE(p->stats.bytes[1].cur, ==, 4 * U);
    EXPECT_SIZE(p->stats.blocks[1].cur, ==, 1);
    EXPECT_SIZE(p->peak, ==, 8197 * U);
    EXPECT_LAYOUT(r, "U4 F4096 U4097 F8187");
    expect_sound(p);
    vram__pool_release_used_locked(p, small);
    EXPECT_SIZE(p->stats.req[0].cur, ==, 4097 * U);
    EXPECT_SIZE(p->stats.req[1].cur, ==, 0);
    vram__pool_release_used_locked(p, large);
    EXPECT_LAYOUT(r, "F16384");
    EXPECT_SIZE(p->current, ==, 0);
    EXPECT_SIZE(p->used_count, ==, 0);
    EXPECT_U64(p->num_frees, ==, 3);
    EXPECT_SIZE(p->stats.req[0].cur, ==, 0);
    expect_sound(p);
    arena_free_all(p);
}

/* ---- randomized, against a map of units ------------------------------------------------------ */

#define UNITS 2048
#define SMALL_END 512           /* the zones: small [0, 512), large [512, 1536), the plan's [1536, 2048) */
#define PLAN_LO 1536
#define MAXLIVE 512

static int zone_of(size_t unit) {
    return unit < SMALL_END ? 0 : unit < PLAN_LO ? 1 : 2;
}

UNIT_TEST(split_merge, random_against_a_map_of_units) {
    unit_rng rng = unit_rng_make();
    pool_arena *p = arena_new();
    pool_region *r = calloc(1, sizeof *r);
    EXPECT(r != NULL);
    r->kind = REGION_VMM;
    r->base = BASE;
    r->size = UNITS * U;
    p->regions = p->vmm = r;
    p->small_end = BASE + SMALL_END * U;
    p->plan.lo = BASE + PLAN_LO * U;
    p->plan.hi = BASE + UNITS * U;
    chunk_at(p, r, BASE, SMALL_END * U);
    chunk_at(p, r, BASE + SMALL_END * U, (PLAN_LO - SMALL_END) * U);
    p->plan.first = chunk_at(p, r, BASE + PLAN_LO * U, (UNITS - PLAN_LO) * U);
    free_bins *zbins[3] = {&p->sbins, &p->bins, &p->plan.bins};

    static int owner[UNITS];                  /* 0: free, else 1 + the live block's index */
    static pool_chunk *live[MAXLIVE];
    int nlive = 0;
    for (int step = 0; step < 6000; step++) {
        unsigned op = (unsigned)unit_rng_below(&rng, 10);
        unit_note("step %d, op %u", step, op);
        if (op < 5 && nlive < MAXLIVE) {                       /* a hand-out by best fit in a zone */
            int z = (int)unit_rng_below(&rng, 3);
            size_t units = 1 + (size_t)unit_rng_below(&rng, unit_rng_below(&rng, 4) == 0 ? 200 : 12);
            pool_chunk *c = vram__free_bins_best_fit(zbins[z], units * U);
            if (c == NULL) continue;
            EXPECT_INT(zone_of((c->addr - BASE) / U), ==, z);
            c = take(p, c, units * U);
            live[nlive++] = c;
            for (size_t u = (c->addr - BASE) / U, k = 0; k < units; k++) {
                EXPECT_INT(owner[u + k], ==, 0);                  /* never handed out twice */
                EXPECT_INT(zone_of(u + k), ==, z);
                owner[u + k] = nlive;
            }
        } else if (op < 6) {                                   /* a hand-out at an address */
            size_t u = (size_t)unit_rng_below(&rng, UNITS);
            pool_chunk *c = r->first;
            while (c->addr + c->size <= BASE + u * U) c = c->next;
            if (c->state != CHUNK_FREE || nlive == MAXLIVE) continue;
            pool_chunk *z = vram__chunk_cut_at_locked(p, c, BASE + u * U);
            EXPECT(z != NULL);
            size_t room = (z->size / U), units = 1 + (size_t)unit_rng_below(&rng, room < 8 ? room : 8);
            z = take(p, z, units * U);
            live[nlive++] = z;
            for (size_t k = 0; k < units; k++) {
                EXPECT_INT(owner[u + k], ==, 0);
                owner[u + k] = nlive;
            }
        } else if (nlive > 0) {                                /* a free */
            int i = (int)unit_rng_below(&rng, (uint64_t)nlive);
            pool_chunk *c = live[i];
            size_t u0 = (c->addr - BASE) / U, units = c->size / U;
            for (size_t k = 0; k < units; k++) owner[u0 + k] = 0;
            vram__pool_release_used_locked(p, c);
            live[i] = live[--nlive];
            if (i < nlive) {                                   /* the moved block's units */
                pool_chunk *m = live[i];
                for (size_t k = 0; k < m->size / U; k++) owner[(m->addr - BASE) / U + k] = i + 1;
            }
        }
        /* the chunks are exactly the map: each live block one used chunk, each free run (cut at
         * the zones' edges) one free chunk */
        pool_chunk *c = r->first;
        for (size_t u = 0; u < UNITS;) {
            size_t end = u + 1;
            if (owner[u] == 0) {
                while (end < UNITS && owner[end] == 0 && end != SMALL_END && end != PLAN_LO) end++;
                EXPECT_INT(c->state, ==, CHUNK_FREE);
            } else {
                while (end < UNITS && owner[end] == owner[u]) end++;
                EXPECT_PTR(c, ==, live[owner[u] - 1]);
                EXPECT_INT(c->state, ==, CHUNK_USED);
            }
            EXPECT_U64(c->addr, ==, BASE + u * U);
            EXPECT_SIZE(c->size, ==, (end - u) * U);
            c = c->next;
            u = end;
        }
        EXPECT_PTR(c, ==, NULL);
        if (step % 16 == 0) expect_sound(p);
    }
    while (nlive > 0) vram__pool_release_used_locked(p, live[--nlive]);
    EXPECT_LAYOUT(r, "F512 F1024 F512");
    expect_sound(p);
    unit_note("%s", "");
    arena_free_all(p);
}
