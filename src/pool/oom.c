/*
 * oom.c: the out-of-memory report of an arena: what stood in the way of a request (the card
 * itself, the physical device's limit, a limit set from outside the process, a live limit
 * (vram_set_live_limit), a memory fraction, the limit, a private pool's share of it,
 * or fragmentation), with the figures that show it, and the largest block a request could get.
 *
 * A reader (arena.h): the front door settles the arena first (slot mode left, the extents
 * recounted), so that the report sees every block as a chunk. Counts each report in num_ooms.
 * Arena lock held.
 */
#include <stdio.h>

#include "common/ledger_member.h"
#include "pool/arena.h"

/* Largest free block within memory held from the driver: in the VMM region, the longest mapped
 * run inside a free chunk (classes are visited largest first, and the walk stops once no class can
 * beat the best run found). */
static int largest_mapped_visit(pool_chunk *c, void *ctx, size_t *floor) {
    size_t *best = ctx;
    if (c->size <= *best) return 0;
    size_t run = c->region->kind == REGION_VMM ? vram__pool_vmm_mapped_run(&c->region->vmm, c->addr, c->size, NULL)
                                               : c->size;
    if (run > *best) *best = *floor = run;
    return 0;
}

size_t vram__pool_largest_free_locked(const pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    if (p->vmm == NULL) {
        pool_chunk *largest = vram__free_bins_largest(&p->bins);
        return largest ? largest->size : 0;
    }
    size_t best = 0;
    vram__free_bins_descending(&p->bins, largest_mapped_visit, &best, 0);
    vram__free_bins_descending(&p->sbins, largest_mapped_visit, &best, best);
    return best;
}

/* With growth by mapping: the free bytes of the arena that lie in granules shared with blocks in
 * use (mapped, not idle), which neither move under another block nor go back. The extents are
 * recounted (the front door settles them before a report). */
static size_t oom_stuck_locked(const pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    if (p->vmm == NULL) return 0;
    size_t free_bytes = p->reserved - p->current, idle = p->vmm->vmm.idle;
    return free_bytes > idle ? free_bytes - idle : 0;
}

/* The sentence that says why free memory did not serve: how much of it is stuck in shared granules. */
static void oom_stuck_sentence(const pool_arena *p, size_t stuck, size_t current, size_t rounded, size_t limit,
                               char *out, size_t len) {
    out[0] = '\0';
    if (stuck == 0) return;
    size_t gran = p->cfg.caps.granularity, whole = (rounded + gran - 1) / gran * gran;
    snprintf(out, len, "; %zu of the free bytes lie in granules shared with blocks in use (memory is mapped "
             "in granules of %zu bytes, and a granule with a byte in use neither moves nor goes back)%s", stuck,
             gran, current + stuck + whole > limit
             ? ", and the bytes in use, those and the request's whole granules together exceed the limit" : "");
}

/* What set the cap in force below the logical device's limit (a limit that moves: arenas.c), as the
 * report's cause; `reserved`: what the device holds, which may be above it. */
static void oom_moved_cap(const pool_arena *p, size_t limit, size_t reserved, char *out, size_t len) {
    char above[160] = "";
    if (reserved > limit) {
        snprintf(above, sizeof above, " (the device holds %zu bytes, %zu above it, until blocks are freed)",
                 reserved, reserved - limit);
    }
    if (atomic_load(&p->shared->external_cap) == limit) {
        snprintf(out, len, "the limit of %zu bytes set on this process from outside it (vram limit) is reached%s",
                 limit, above);
    } else if (atomic_load(&p->shared->live_limit) == limit) {
        snprintf(out, len, "the live limit of %zu bytes (vram_set_live_limit; the limit configured is %zu bytes, "
                 "from %s) is reached%s", limit, p->cfg.limit, p->cfg.limit_source, above);
    } else {
        snprintf(out, len, "the memory fraction %g of the card (%zu bytes, set by vram_set_memory_fraction: "
                 "PyTorch's set_per_process_memory_fraction) is reached%s", atomic_load(&p->shared->fraction),
                 limit, above);
    }
}

/* The cause when the driver refused memory: the card is full, with what other processes hold
 * (`reserved`: what this process holds when it has no card budget). */
static void oom_card_full(const pool_arena *p, size_t reserved, const char *driver_msg, char *out, size_t len) {
    size_t card_free = 0, card_total = 0, ours = p->cfg.budget ? atomic_load(&p->cfg.budget->reserved) : reserved;
    char others[192] = "";
    if (p->cfg.backend->mem_info(p->cfg.dev, &card_free, &card_total) == VRAM_OK) {
        size_t other = card_total - card_free > ours ? card_total - card_free - ours : 0;
        snprintf(others, sizeof others, "; the card has %zu of %zu bytes free and other processes (or other "
                 "allocators in this one) hold about %zu bytes", card_free, card_total, other);
    }
    snprintf(out, len, "the card itself is full: the driver refused more memory (%s)%s", driver_msg, others);
}

/* The out-of-memory error: this arena's figures, or with `all` those of every arena of the
 * logical device (summed by arenas.c). */
static vram_status pool_oom_report(const pool_arena *p, size_t size, size_t rounded, grow_result why,
                                   const arena_figures *all, size_t stuck) {
    char driver_msg[1024];
    snprintf(driver_msg, sizeof driver_msg, "%s", vram_last_error());
    size_t current = all ? all->current : p->current, reserved = all ? all->reserved : p->reserved;
    size_t largest_free = all ? all->largest_free : vram__pool_largest_free_locked(p);
    size_t limit = atomic_load_explicit(&p->shared->budget.cap, memory_order_relaxed);   /* (a fraction's) */
    if (limit > p->cfg.limit) limit = p->cfg.limit;
    size_t growable = p->cfg.growth && reserved < limit ? limit - reserved : 0;
    size_t free_bytes = reserved - current, gran = p->cfg.caps.granularity;
    char cause[1536], stuck_msg[384];
    oom_stuck_sentence(p, all ? 0 : stuck, current, rounded, limit, stuck_msg, sizeof stuck_msg);
    if (why == GROW_DRIVER) {
        oom_card_full(p, reserved, driver_msg, cause, sizeof cause);
    } else if (why == GROW_CARD_LIMIT && p->cfg.budget->member != NULL &&
               vram__ledger_member_refusal(p->cfg.budget->member, p->cfg.budget->member_card, cause, sizeof cause)) {
        /* the ledger's gate refused (a group's budget, a limit set from outside): its sentence */
    } else if (why == GROW_CARD_LIMIT && atomic_load(&p->cfg.budget->external) == atomic_load(&p->cfg.budget->cap)) {
        snprintf(cause, sizeof cause, "the limit of %zu bytes set on this process's card from outside it (vram "
                 "limit) is reached, shared by its logical devices", atomic_load(&p->cfg.budget->cap));
    } else if (why == GROW_CARD_LIMIT) {
        snprintf(cause, sizeof cause, "the physical device's limit is reached (%s), shared by its logical devices",
                 p->cfg.budget->cap_source);
    } else if (limit < p->cfg.limit && (reserved > limit || rounded > limit - (current < limit ? current : limit))) {
        oom_moved_cap(p, limit, p->cfg.growth ? reserved : current, cause, sizeof cause);
    } else if (p->pinned && all != NULL && why == GROW_LIMIT) {
        snprintf(cause, sizeof cause, "the memory limit of %zu bytes is reached (limit from %s): %zu bytes are "
                 "in use and %zu held free by the device's other pools, which a private pool (a CUDA graph's) "
                 "cannot use", p->cfg.limit, p->cfg.limit_source, current, free_bytes);
    } else if (rounded > p->cfg.limit - (current < p->cfg.limit ? current : p->cfg.limit)) {
        snprintf(cause, sizeof cause, "the memory limit of %zu bytes is reached (limit from %s)",
                 p->cfg.limit, p->cfg.limit_source);
    } else if (p->vmm != NULL && limit == p->cfg.limit && vram__round_up(current + rounded, gran) > limit) {
        /* no placement could have served it: what the blocks in use and the request need in whole
         * granules is above the limit (the rounding of the last granule is unavoidable) */
        size_t need = vram__round_up(current + rounded, gran);
        snprintf(cause, sizeof cause, "the memory limit of %zu bytes is reached (limit from %s): the %zu bytes in "
                 "use and the request need %zu granules of %zu bytes (%zu bytes) even with no gap between blocks, "
                 "%zu bytes more than the limit", p->cfg.limit, p->cfg.limit_source, current, need / gran, gran,
                 need, need - limit);
    } else if (p->cfg.growth && limit == p->cfg.limit && free_bytes < rounded && growable < rounded) {
        /* neither the free bytes held nor the room to grow would do alone: without the limit growth
         * would map more, so the limit is what stands in the way (not fragmentation) */
        snprintf(cause, sizeof cause, "the memory limit of %zu bytes is reached for this request (limit from %s): "
                 "%zu bytes are in use (%.1f%% of it); the %zu bytes free in the pool (largest block %zu) and the "
                 "%zu bytes it leaves to grow are not one piece large enough%s", p->cfg.limit, p->cfg.limit_source,
                 current, limit ? 100.0 * (double)current / (double)limit : 0.0, free_bytes,
                 largest_free, growable, stuck_msg);
    } else {
        snprintf(cause, sizeof cause, "fragmentation: %zu bytes are free in the pool%s but no free block "
                 "is large enough%s", free_bytes + growable, growable ? " (counting room to grow)" : "", stuck_msg);
    }
    return vram__fail(VRAM_ERR_OUT_OF_MEMORY,
                      "out of memory on %s: cannot allocate %zu bytes: %s. requested %zu bytes (rounded %zu), "
                      "in use %zu, reserved %zu, limit %zu, largest free block %zu, free in pool %zu",
                      p->cfg.name, size, cause, size, rounded, current, reserved, limit,
                      largest_free, free_bytes);
}

vram_status vram__oom_report_locked(pool_arena *p, size_t size, size_t rounded, grow_result why, const arena_figures *all) {
    POOL_ASSERT_LOCKED(p);
    p->num_ooms++;
    return pool_oom_report(p, size, rounded, why, all, all ? 0 : oom_stuck_locked(p));
}

vram_status vram__arena_wake_oom(pool_arena *p, const char *what, size_t need, grow_result why) {
    char driver_msg[1024], cause[1536];
    snprintf(driver_msg, sizeof driver_msg, "%s", vram_last_error());
    size_t reserved = atomic_load(&p->shared->reserved);
    size_t limit = atomic_load_explicit(&p->shared->budget.cap, memory_order_relaxed);   /* (a fraction's) */
    if (limit > p->cfg.limit) limit = p->cfg.limit;
    if (why == GROW_DRIVER) {
        oom_card_full(p, reserved, driver_msg, cause, sizeof cause);
    } else if (why == GROW_CARD_LIMIT) {
        snprintf(cause, sizeof cause, "the physical device's limit is reached (%s), shared by its logical devices",
                 p->cfg.budget->cap_source);
    } else if (limit < p->cfg.limit) {
        snprintf(cause, sizeof cause, "the memory fraction %g of the card (%zu bytes, vram_set_memory_fraction) "
                 "would be passed", atomic_load(&p->shared->fraction), limit);
    } else {
        snprintf(cause, sizeof cause, "the memory limit of %zu bytes (limit from %s) would be passed: the memory "
                 "awake holds %zu bytes of it", p->cfg.limit, p->cfg.limit_source, reserved);
    }
    return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "out of memory on %s: cannot wake %s: its blocks need %zu bytes on the "
                      "card again: %s. Nothing was woken and nothing is lost: free memory, or sleep something else, "
                      "and wake it again", p->cfg.name, what, need, cause);
}
