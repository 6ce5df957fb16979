#!/usr/bin/env python3
"""mutate.py: plants known bugs in vram, one at a time, and checks that the test suite catches each.

    tests/mutate.py [--list] [--check-patterns] [--only ID[,ID...]] [--rev REV] [--jobs N] [--keep DIR]
                    [--build-type T] [--whole-suite]

Each mutant (MUTANTS below) is one plausible bug: a piece of code (found by its exact text, which must
occur once in its file) replaced by a wrong one, the README promise it breaks, and a ctest regular
expression of the tests expected to catch it. The script copies the committed tree (REV, default HEAD:
commit what you want mutated; the list itself is read from this file as it is) into a scratch directory,
builds it once (link-time optimization off, which changes no behaviour and makes relinks quick) and runs
the suite once (it must pass), then for each mutant: plants it, rebuilds incrementally, runs the mutant's
own tests first (quick when they catch it) and, when they pass, the rest of the suite; restores the file.
A mutant is caught when a test fails (or times out); it survives when the whole suite passes. A mutant
that no longer applies (its text is not found once), whose tests match no test, or that does not build is
an error: the list is kept in step with the code. Mutants shown to be equivalent (no test could tell them
from the original) carry `equivalent` with the reason and are not run. The checkout is never touched.

--list prints the mutants; --check-patterns checks, without building, that every mutant's text occurs
once in this checkout (ctest's mutate_list runs it, so that a change that makes a mutant stale fails CI);
--keep DIR keeps the scratch directory, so that a later run rebuilds only what changed and runs the
baseline suite again only when the tree changed (beyond this file); --only runs some mutants;
--whole-suite runs the whole suite against each mutant (slow: every test that catches it is named).

Prints a line per mutant (caught by which tests / SURVIVED / error, seconds) and the totals; exits 0 when
every mutant was caught or is equivalent, 1 otherwise, 2 on bad usage. It does not run in CI (it takes
long). Measured on the 2-core development machine, shared with other builds (2026-12-05, load average
3-14, --jobs 2): the suite (the baseline, once per tree) 7 min at load 3-8, 11-11.5 min at 8-14; a
mutant its own tests catch 15-90 s (the library's, the CLI's, report, shim_ledger, slurm) or 75-130 s
(the preload library's: its own tests are the six shim tests); a mutant its own tests miss costs a suite
run more (4 min at load 4, 8.5-10.5 min at 8-14). The whole list was not timed in one go: its 162
mutants, run in parts, add up to about 2 h at load 8-14 (161 caught, 1 equivalent; docs/DESIGN.md,
Tests and CI).

The environment of the tests: CI=1 (tests that need a tool fail rather than skip), as CI runs them.
"""

import argparse
import fcntl
import hashlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time


class Mutant:
    def __init__(self, mid, path, old, new, promise, tests="", equivalent=""):
        self.id, self.path, self.old, self.new = mid, path, old, new
        self.promise, self.tests, self.equivalent = promise, tests, equivalent


M = Mutant

# Each: an id, the file, the exact text and its replacement, the README promise it breaks, and a ctest
# regular expression of the tests expected to catch it (tried first; the whole suite runs when they pass).
MUTANTS = [
    # ---- the C API: configuration, its freeze at the start, errors ----------------------------
    M("api_visible_ignored", "src/runtime/runtime.c",
      "rt.visible_in_force[i] = i < rt.ndev && (!rt.visible_set || rt.visible[i]);",
      "rt.visible_in_force[i] = i < rt.ndev;",
      "vram_set_visible_devices chooses the cards the runtime uses", r"vram\.(config|logical|physical)|python"),
    M("api_list_physical_starts", "src/runtime/api.c",
      "    s = vram__rt_discover_wlocked();\n    *count = s == VRAM_OK ? rt.ndev : 0;",
      "    s = vram__rt_start_wlocked();\n    *count = s == VRAM_OK ? rt.ndev : 0;",
      "vram_list_physical_devices does not start the runtime (the configuration can follow it)",
      r"vram\.(config|physical)|python"),
    M("api_growth_after_start", "src/runtime/api.c",
      "int same = rt.growth_in_force[physical_index] == enable;",
      "int same = 1;",
      "after the start a call that changes the configuration fails with VRAM_ERR_ALREADY_INITIALIZED",
      r"vram\.config|python"),
    M("api_limit_after_start", "src/runtime/api.c",
      "int same = limit_bytes == rt.limit_in_force[physical_index];",
      "int same = 1;",
      "after the start a call that changes the configuration fails with VRAM_ERR_ALREADY_INITIALIZED",
      r"vram\.(config|faults)|python"),
    M("api_logical_after_start", "src/runtime/api.c",
      "return unlock_with(same_configs(c, configs, n) ? VRAM_OK",
      "return unlock_with(1 ? VRAM_OK",
      "after the start a call that changes the configuration fails with VRAM_ERR_ALREADY_INITIALIZED",
      r"vram\.(config|logical)|python"),
    M("api_visible_message", "src/runtime/api.c",
      '"Visible devices cannot be modified after being initialized"',
      '"Visible devices cannot be changed after being initialized"',
      "TensorFlow's sentence: \"Visible devices cannot be modified after being initialized\"",
      r"vram\.config|python"),
    M("api_limit_above_card", "src/runtime/api.c",
      "if (limit_bytes > total) {",
      "if (limit_bytes > total + total) {",
      "vram_set_memory_limit caps a card: a limit beyond the card is refused by name",
      r"vram\.config|python"),
    M("api_shutdown_with_live_blocks", "src/runtime/runtime.c",
      "        if (live != 0) {\n            return vram__fail(VRAM_ERR_CONFLICT, \"vram_shutdown:",
      "        if (live != 0 && 0) {\n            return vram__fail(VRAM_ERR_CONFLICT, \"vram_shutdown:",
      "vram.shutdown() returns every byte to the driver (ValueError while blocks are live)",
      r"vram\.lifecycle|python"),
    M("api_free_foreign_pointer", "src/runtime/api_memory.c",
      "    vram__rt_leave(me);\n    return vram__fail(VRAM_ERR_INVALID_POINTER, \"%s(%p): this pointer was not allocated by vram\",",
      "    vram__rt_leave(me);\n    return VRAM_OK;\n    return vram__fail(VRAM_ERR_INVALID_POINTER, \"%s(%p): this pointer was not allocated by vram\",",
      "every call returns a vram_status: a free of a pointer vram did not allocate fails (VramError)",
      r"vram\.(alloc|release|lifecycle)|python"),
    M("api_fraction_range", "src/runtime/api_memory.c",
      "if (!(fraction >= 0.0 && fraction <= 1.0)) {",
      "if (!(fraction >= 0.0)) {",
      "vram_set_memory_fraction: PyTorch's memory fraction, 0 to 1",
      r"vram\.(allocstats|stats|config)|python"),
    M("alloc_alignment", "src/pool/arena.c",
      "    size_t rounded = vram__round_up(size, VRAM_POOL_UNIT);\n    pool_chunk *c = NULL;",
      "    size_t rounded = vram__round_up(size, 64);\n    pool_chunk *c = NULL;",
      "vram_malloc: 256-byte aligned blocks", r"vram\.(alloc|stats|oom)"),
    M("stats_reset_peak", "src/pool/stats.c",
      "    p->peak = p->current;\n    p->peak_reserved = p->reserved;",
      "    p->peak_reserved = p->reserved;",
      "vram_reset_memory_stats / reset_peak_memory_stats(): the peak becomes what is in use now",
      r"vram\.(stats|allocstats)|python"),
    M("stats_peak_reserved", "src/pool/stats.c",
      "        while (all > peak && !atomic_compare_exchange_weak(&p->shared->peak_reserved, &peak, all)) {",
      "        while (all > peak + (2u << 20) && !atomic_compare_exchange_weak(&p->shared->peak_reserved, &peak, all)) {",
      "vram_get_memory_info: peak reserved", r"vram\.(stats|growth|allocstats)|cli"),
    M("stats_freed_bytes", "src/pool/stats.c",
      "out->freed += (int64_t)(st->in + st->cur0 - st->cur);",
      "out->freed += (int64_t)(st->in - st->cur);",
      "vram_get_allocator_stats: PyTorch's memory_stats() figures (freed since the last reset)",
      r"vram\.allocstats"),

    # ---- tf.config in Python ----------------------------------------------------------------
    M("py_oom_not_memoryerror", "python/vram/_errors.py",
      "class OutOfMemoryError(MemoryError):",
      "class OutOfMemoryError(RuntimeError):",
      "an allocation that does not fit raises vram.OutOfMemoryError (a MemoryError)", r"python"),
    M("py_already_initialized_runtimeerror", "python/vram/_errors.py",
      '    "VRAM_ERR_ALREADY_INITIALIZED": RuntimeError,',
      '    "VRAM_ERR_ALREADY_INITIALIZED": ValueError,',
      "a change after the start raises RuntimeError with TensorFlow's sentence", r"python"),
    M("py_unrecognized_valueerror", "python/vram/_errors.py",
      '    "VRAM_ERR_UNRECOGNIZED_DEVICE": ValueError,',
      '    "VRAM_ERR_UNRECOGNIZED_DEVICE": RuntimeError,',
      "an unknown device raises ValueError", r"python"),
    M("py_status_attribute", "python/vram/_errors.py",
      "    error = cls(message)\n    error.status = name\n    return error\n\n\ndef status_error",
      "    error = cls(message)\n    return error\n\n\ndef status_error",
      "each exception carries .status, the C name", r"python"),
    M("py_no_matching_message", "python/vram/_core.py",
      "\"No matching devices found for '%s'\" % name",
      "\"No device found for '%s'\" % name",
      "device strings follow TensorFlow's rules and messages (\"No matching devices found for 'GPU:2'\")",
      r"python"),
    M("py_device_string_trailing_newline", "python/vram/_core.py",
      "match = _LOCAL_NAME.fullmatch(text)",
      "match = _LOCAL_NAME.match(text)",
      "device strings follow TensorFlow's rules ('GPU:0junk' does not parse)", r"python"),
    M("py_config_type_error", "python/vram/config.py",
      "        raise TypeError(\"logical_devices must be a list of tf.config.LogicalDeviceConfiguration, got an item %r\"",
      "        raise ValueError(\"logical_devices must be a list of tf.config.LogicalDeviceConfiguration, got an item %r\"",
      "a list of something else than LogicalDeviceConfiguration: TypeError", r"python"),
    M("py_experimental_priority", "python/vram/config.py",
      "if config.experimental_priority is not None or config.experimental_device_ordinal is not None:",
      "if config.experimental_device_ordinal is not None:",
      "experimental_priority, experimental_device_ordinal: not supported, ValueError", r"python"),
    M("py_cpu_list", "python/vram/config.py",
      "    return device_type is None or device_type == _GPU",
      "    return True",
      "GPUs only: list_physical_devices('CPU') is []", r"python"),
    M("py_limit_zero_string", "python/vram/config.py",
      "        if limit_bytes == 0:\n            raise status_error",
      "        if limit_bytes == -1:\n            raise status_error",
      "a limit never turns into no limit: set_memory_limit refuses a size string of 0 bytes ('0.4')", r"python"),
    M("py_bool_not_device_index", "python/vram/config.py",
      "found = type(device) is int and device == d.index",
      "found = isinstance(device, int) and device == d.index",
      "a physical GPU is a PhysicalDevice, its name or its index (not True); arguments are checked", r"python"),

    # ---- limits, growth, TensorFlow's reserve, logical devices ------------------------------
    M("reserve_9x", "src/runtime/runtime.c",
      "    return 1800 * VRAM_MIB;\n}",
      "    return 1536 * VRAM_MIB;\n}",
      "the default leaves 1800 MiB on compute capability 9.x and above", r"vram\.env"),
    M("reserve_8x_audit", "src/runtime/runtime.c",
      "if (compute_major <= 8) return 1536 * VRAM_MIB;",
      "if (compute_major <= 8) return 1800 * VRAM_MIB;",
      "the default leaves 1536 MiB on 8.x (the audit's survivor)", r"vram\.env"),
    M("reserve_7x", "src/runtime/runtime.c",
      "if (compute_major <= 7) return 1050 * VRAM_MIB;",
      "if (compute_major <= 7) return 1536 * VRAM_MIB;",
      "the default leaves 1050 MiB on compute capability 7.x", r"vram\.env"),
    M("reserve_below_7", "src/runtime/runtime.c",
      "if (compute_major <= 6) return 500 * VRAM_MIB;",
      "if (compute_major <= 6) return 1050 * VRAM_MIB;",
      "the default leaves 500 MiB below compute capability 7.0", r"vram\.env"),
    M("reserve_small_free", "src/runtime/runtime.c",
      "if (available < 2 * VRAM_GIB) return 225 * VRAM_MIB;",
      "if (available < 2 * VRAM_MIB) return 225 * VRAM_MIB;",
      "the default leaves 225 MiB when less than 2 GiB is free", r"vram\.env"),
    M("limit_env_overrides_program", "src/runtime/runtime.c",
      "    if (e != NULL) {\n        if (e->bytes > total) {",
      "    if (e != NULL && rt.config[i].limit == 0) {\n        if (e->bytes > total) {",
      "VRAM_MEMORY_LIMIT overrides the program's limit", r"vram\.(env|faults|oom)"),
    M("limit_per_card_wins", "src/runtime/runtime.c",
      "const vram__env_size *e = env->limit_dev[i].set ? &env->limit_dev[i]\n                            : env->limit_all.set    ? &env->limit_all : NULL;",
      "const vram__env_size *e = env->limit_all.set ? &env->limit_all\n                            : env->limit_dev[i].set ? &env->limit_dev[i] : NULL;",
      "VRAM_MEMORY_LIMIT_<i> on physical card i wins over VRAM_MEMORY_LIMIT", r"vram\.(env|faults|oom)"),
    M("fraction_smaller_wins", "src/runtime/runtime.c",
      "if (setup->cap == 0 || f < setup->cap) {",
      "if (setup->cap == 0 || f > setup->cap) {",
      "VRAM_MEMORY_FRACTION: the smaller limit wins", r"vram\.(env|faults|growth)"),
    M("fraction_rounding_to_zero", "src/runtime/runtime.c",
      "        if (f == 0) {                    /* 0 would read as \"no limit\": every limit gone */",
      "        if (f == 0 && 0) {               /* 0 would read as \"no limit\": every limit gone */",
      "a fraction that rounds to nothing is refused by name (never no limit)", r"vram\.(env|faults)"),
    M("force_growth_false_ignored", "src/runtime/runtime.c",
      "return env->force_growth >= 0 ? env->force_growth",
      "return env->force_growth > 0 ? env->force_growth",
      "VRAM_FORCE_ALLOW_GROWTH=false overrides the program's growth", r"vram\.(env|config|faults)"),
    M("logical_min_of_card_limit", "src/runtime/runtime.c",
      "if (setup->cap != 0 && setup->cap < limit) {",
      "if (setup->cap != 0 && setup->cap > limit) {",
      "each logical device gets min(its configured MiB, the card's limit)", r"vram\.(logical|env|oom)"),
    M("logical_card_budget_shared", "src/pool/backing.c",
      "    if (!budget_take(p->cfg.budget, bytes)) {\n        budget_give(&p->shared->budget, bytes);",
      "    if (0 && !budget_take(p->cfg.budget, bytes)) {\n        budget_give(&p->shared->budget, bytes);",
      "the card's limit also bounds what its logical devices hold together", r"vram\.(logical|oom|growth)"),
    M("logical_sum_above_card", "src/runtime/api.c",
      "if (mb > SIZE_MAX / VRAM_MIB || !vram__add_ok(sum, mb * VRAM_MIB, &sum) || sum > total) {",
      "if (mb > SIZE_MAX / VRAM_MIB || !vram__add_ok(sum, mb * VRAM_MIB, &sum)) {",
      "logical devices split a card: configurations adding up to more than the card are refused",
      r"vram\.(logical|config)|python"),
    M("limit_budget_off_by_granule", "src/pool/backing.c",
      "if (cur > cap || bytes > cap - cur) return 0;",
      "if (cur > cap || bytes > cap - cur + (2u << 20)) return 0;",
      "with a limit the card never holds more", r"vram\.(growth|oom|release|perthread)"),
    M("prealloc_at_start", "src/pool/arena.c",
      "if (s == VRAM_OK && !cfg->growth && cfg->limit >= VRAM_POOL_UNIT) {",
      "if (s == VRAM_OK && !cfg->growth && cfg->limit >= VRAM_POOL_UNIT && 0) {",
      "without growth the limit (or TensorFlow's default) is taken at start", r"vram\.(alloc|growth|config|stats)"),
    M("growth_no_move_at_limit", "src/pool/backing.c",
      "    if (moved) need = vmm_move_idle_locked(p, c);   /* (every idle extent that fits goes at once) */",
      "    if (moved && !tight) need = vmm_move_idle_locked(p, c);",
      "growth: when the limit would be crossed, idle memory moves under the new block (no error the limit "
      "itself would not cause)", r"vram\.(growth|release|oom)"),
    M("growth_no_unmap_at_limit", "src/pool/backing.c",
      "    while (need > (room = arena_headroom(p)) && vmm_idle_locked(p) > 0) {",
      "    while (0 && need > (room = arena_headroom(p)) && vmm_idle_locked(p) > 0) {",
      "growth: when the limit would be crossed, idle memory is given back", r"vram\.(growth|release|oom)"),
    M("growth_plain_no_room", "src/pool/backing.c",
      "        if (headroom < size) {\n            plain_make_room_locked(p, size);",
      "        if (headroom < size && 0) {\n            plain_make_room_locked(p, size);",
      "growth without VMM gives idle regions back when the limit would be crossed", r"vram\.growth"),
    M("best_fit_first_fit_audit", "src/pool/free_bins.c",
      "if (c->size >= size && (best == NULL || c->size < best->size ||",
      "if (c->size >= size && (best == NULL ||",
      "a best-fit allocator: best fit within a size class (the audit's survivor)", r"vram\.(alloc|unit)"),
    M("best_fit_next_class", "src/pool/free_bins.c",
      "    i = next_class(b, i);\n    return i.fl < 0 ? NULL : list_best(b->head[i.fl][i.sl], size);",
      "    i = next_class(b, i);\n    if (i.fl >= 0 && i.sl + 1 < FREE_BINS_SL && (b->sl_map[i.fl] >> (i.sl + 1))) i.sl++;\n    return i.fl < 0 ? NULL : list_best(b->head[i.fl][i.sl], size);",
      "a best-fit allocator: the smallest class that holds the request", r"vram\.(alloc|unit)"),
    M("coalescing_off", "src/pool/split_merge.c",
      "int join_prev = prev != NULL && prev->state == CHUNK_FREE && !pool_zone_edge(p, c->addr);",
      "int join_prev = 0;",
      "a coalescing allocator: freed neighbours merge", r"vram\.(alloc|unit)"),

    M("async_pending_taken_early", "src/pool/stream_order.c",
      "        if (done) vram__pending_settle_locked(p, c);",
      "        if (1) vram__pending_settle_locked(p, c);",
      "stream-ordered as cudaMallocAsync: a block freed on a stream goes to other streams only once the stream "
      "is past the free", r"vram\.async"),
    M("record_stream_ignored", "src/pool/stream_order.c",
      "if (be->event_query(p->cfg.dev, u->use[u->done].event, &done) != VRAM_OK) done = 0;",
      "if (be->event_query(p->cfg.dev, u->use[u->done].event, &done) != VRAM_OK || 1) done = 1;",
      "vram_record_stream: a block used on another stream is reused only once that stream is past the free",
      r"vram\.async"),
    M("hold_large_ignored", "src/pool/backing.c",
      "int hold = p->cfg.hold_peak || (p->cfg.hold_large > 0 && c->size >= p->cfg.hold_large) || p->plan.hold ||",
      "int hold = p->cfg.hold_peak || p->plan.hold ||",
      "hold_large_mb:N: a large block takes idle memory from holes it does not fit instead of mapping more",
      r"vram\.(release|async|growth)"),
    M("plan_serves_a_differing_request", "src/pool/plan_arena.c",
      "    int next = plan->size[k] == rounded && plan->stream[k] == (uintptr_t)stream;",
      "    int next = plan->stream[k] == (uintptr_t)stream;",
      "plan: a request that differs from the plan's next one goes to best fit (the plan bends)",
      r"vram\.plan|plan_|placement"),
    M("plan_never_evicts", "src/pool/plan_arena.c",
      "        pl->evicted[h] = 1;",
      "        pl->evicted[h] = 0;",
      "plan: a request whose block outlived its planned place goes to best fit from then on",
      r"vram\.plan"),
    M("plan_grows_past_its_mark", "src/pool/backing.c",
      "    if (p->plan.keep && need > 0 && p->reserved + need > p->hold_mark) return GROW_PLAN;",
      "",
      "plan: a plan in force gives way rather than hold more than the arena ever held",
      r"vram\.plan|plan_"),

    # ---- vram_trim, idle release -------------------------------------------------------------
    M("trim_keep_each_arena_audit", "src/pool/arenas.c",
      "vram_status s = a != NULL ? vram__arena_trim(a, i == 0 ? keep_bytes : 0) : VRAM_OK;",
      "vram_status s = a != NULL ? vram__arena_trim(a, keep_bytes) : VRAM_OK;",
      "vram_trim(device, keep_bytes) keeps keep_bytes in total (the audit's survivor)", r"vram\.perthread"),
    M("trim_keeps_too_much", "src/pool/backing.c",
      "    if (p->vmm != NULL) vmm_unmap_idle_locked(p, excess - keep, &refusal);",
      "    if (p->vmm != NULL) vmm_unmap_idle_locked(p, (excess - keep) / 2, &refusal);",
      "vram_trim gives cached memory back to the driver: whole idle extents", r"vram\.(growth|perthread|stats|alloc)"),
    M("trim_prealloc_region", "src/pool/backing.c",
      "        if (p->regions != NULL || p->cfg.limit < VRAM_POOL_UNIT) return GROW_OFF;",
      "        if (p->cfg.limit < VRAM_POOL_UNIT) return GROW_OFF;",
      "a preallocated pool takes its region again only after a trim gave it back",
      r"vram\.(growth|alloc|stats|lifecycle)",
      equivalent="a preallocated pool's budget is its region (the limit), so a second region is refused by the "
                 "budget (GROW_LIMIT) where the check said GROW_OFF, and both causes give the same report for an "
                 "arena that is never pinned (only private pools, always growing, are): nothing observable changes"),
    M("trim_prealloc_retake", "src/pool/backing.c",
      "    if (!p->cfg.growth) {\n        if (p->regions != NULL || p->cfg.limit < VRAM_POOL_UNIT) return GROW_OFF;",
      "    if (!p->cfg.growth) {\n        return GROW_OFF;",
      "a preallocated pool with no live block gives its region back on vram_trim and takes it again on the next "
      "allocation", r"vram\.(release|growth|alloc|stats|lifecycle)|python"),
    M("trim_plain_regions_kept", "src/pool/backing.c",
      "    vram_status s = trim_plain_regions_locked(p, keep);",
      "    vram_status s = VRAM_OK;",
      "vram_trim gives back entirely free regions (a preallocated pool with no live block its region)",
      r"vram\.(release|growth|alloc|stats|lifecycle)|python"),
    M("idle_release_period", "src/pool/vmm.c",
      "        if (!bits_any(v->touched_bits, x->offset >> v->gran_shift, ((x->offset + x->size) >> v->gran_shift) - 1))\n            extent_unmap(v, e, chg);",
      "        extent_unmap(v, e, chg);",
      "idle_release_ms: returns memory that stayed unused for a whole period", r"vram\.(growth|threads|stats)"),
    M("idle_release_never", "src/runtime/runtime.c",
      "if (rt.alloc_conf_in_force.idle_release_ms == 0) return VRAM_OK;",
      "if (1) return VRAM_OK;",
      "idle_release_ms:N: a background thread returns unused memory", r"vram\.(growth|threads|lifecycle|stats)"),

    # ---- out-of-memory messages ----------------------------------------------------------------
    M("oom_limit_cause", "src/pool/oom.c",
      "} else if (rounded > p->cfg.limit - (current < p->cfg.limit ? current : p->cfg.limit)) {",
      "} else if (rounded > p->cfg.limit) {",
      "out-of-memory errors name the cause: the limit and where it came from", r"vram\.(oom|env)"),
    M("oom_limit_source", "src/pool/oom.c",
      "        snprintf(cause, sizeof cause, \"the memory limit of %zu bytes is reached (limit from %s)\",\n                 p->cfg.limit, p->cfg.limit_source);",
      "        snprintf(cause, sizeof cause, \"the memory limit of %zu bytes is reached\", p->cfg.limit);",
      "the limit's message names where it came from (vram_set_memory_limit, the variable, the logical device)",
      r"vram\.(oom|env)"),
    M("oom_card_full_others", "src/pool/oom.c",
      "    char others[192] = \"\";\n    if (p->cfg.backend->mem_info(p->cfg.dev, &card_free, &card_total) == VRAM_OK) {\n"
      "        size_t other = card_total - card_free > ours ? card_total - card_free - ours : 0;",
      "    char others[192] = \"\";\n    if (p->cfg.backend->mem_info(p->cfg.dev, &card_free, &card_total) == VRAM_OK) {\n"
      "        size_t other = card_total - card_free;",
      "the card itself full: the driver's CUDA_ERROR_OUT_OF_MEMORY and how much other processes hold",
      r"vram\.(oom|driver_fail)"),
    M("oom_fragmentation_room", "src/pool/oom.c",
      "\"is large enough%s\", free_bytes + growable, growable ?",
      "\"is large enough%s\", free_bytes, growable ?",
      "fragmentation: enough free bytes, no block large enough (with the numbers)", r"vram\.oom"),
    M("oom_stuck_granules", "src/pool/oom.c",
      "current + stuck + whole > limit",
      "current + whole > limit",
      "with growth the message says whether in use, the stuck granules and the request together exceed the limit",
      r"vram\.(oom|release)"),
    M("oom_whole_granules", "src/pool/oom.c",
      "} else if (p->vmm != NULL && limit == p->cfg.limit && vram__round_up(current + rounded, gran) > limit) {",
      "} else if (p->vmm != NULL && limit == p->cfg.limit && current + rounded > limit) {",
      "when in use and the request need more whole granules than the limit holds, the message says so",
      r"vram\.(oom|release)"),
    M("oom_count", "src/pool/oom.c",
      "    p->num_ooms++;\n    return pool_oom_report(p, size, rounded, why, all, all ? 0 : oom_stuck_locked(p));",
      "    return pool_oom_report(p, size, rounded, why, all, all ? 0 : oom_stuck_locked(p));",
      "PyTorch's memory_stats() figures (num_ooms)", r"vram\.(allocstats|stats|oom)"),

    # ---- allocator options and their defaults ---------------------------------------------------
    M("conf_unknown_option", "src/runtime/env.c",
      "    char known[256] = \"\";",
      "    return VRAM_OK;\n    char known[256] = \"\";",
      "a malformed value makes vram_init fail, naming the variable and the value (an unknown option too)",
      r"vram\.(env|faults)"),
    M("conf_whole_range", "src/runtime/env.c",
      "if (errno != 0 || end == value || *end != '\\0' || n < min || n > max) return -1;",
      "if (errno != 0 || end == value || *end != '\\0' || n < min) return -1;",
      "arenas:N (1 to 8): a value out of range is refused", r"vram\.(env|faults|perthread)"),
    M("conf_env_overrides_program", "src/runtime/runtime.c",
      "        vram_status s = vram__alloc_conf_parse(env->alloc_conf_text, \"VRAM_ALLOC_CONF\", &base,\n                                               &rt.alloc_conf_in_force);",
      "        vram_status s = vram__alloc_conf_parse(\"\", \"VRAM_ALLOC_CONF\", &base,\n                                               &rt.alloc_conf_in_force);",
      "VRAM_ALLOC_CONF overrides the program's vram_set_alloc_conf", r"vram\.(env|config|faults)"),
    M("conf_default_map_ahead", "src/runtime/env.h",
      "X(map_ahead_mb, WHOLE, size_t, 64, 0",
      "X(map_ahead_mb, WHOLE, size_t, 32, 0",
      "map_ahead_mb: default 64", r"vram\.(env|growth|release)|cli"),
    M("conf_default_small_pool", "src/runtime/env.h",
      "X(small_pool_kb, WHOLE, size_t, 256, 0",
      "X(small_pool_kb, WHOLE, size_t, 128, 0",
      "small_pool_kb: default 256", r"vram\.(env|growth|release)|cli"),
    M("conf_default_hold_peak", "src/runtime/env.h",
      "X(hold_peak, BOOL, int, 0, 0, 1,",
      "X(hold_peak, BOOL, int, 1, 0, 1,",
      "hold_peak: default false", r"vram\.(env|growth|release)|cli"),
    M("conf_default_plan", "src/runtime/env.h",
      "X(plan, BOOL, int, 1, 0, 1,",
      "X(plan, BOOL, int, 0, 0, 1,",
      "plan: on by default", r"vram\.(env|plan)|plan_ns|plan_tail"),
    M("conf_default_arenas", "src/pool/arenas.c",
      "p->arenas = cfg->arenas > 0 && cfg->arenas < POOL_ARENAS ? cfg->arenas : POOL_ARENAS;",
      "p->arenas = cfg->arenas > 0 && cfg->arenas < POOL_ARENAS ? cfg->arenas : 4;",
      "arenas: default 8", r"vram\.(perthread|threads)"),
    M("extent_default_with_limit", "src/pool/arena.c",
      "        if (p->cfg.limit_chosen || p->cfg.plan) {",
      "        if (p->cfg.plan) {",
      "extent_mb: one granule by default when you set a limit (plan:false too)", r"vram\.(growth|env|release)"),
    M("load_small_blocks", "src/pool/backing.c",
      "    return !p->loaded && size >= POOL_BLOCK_EXTENT_GRANULES * p->cfg.caps.granularity ? p->block_extent : 0;",
      "    return !p->loaded ? p->block_extent : 0;",
      "a load maps blocks of 32 MiB and more in large extents, smaller ones granule by granule", r"vram\.plan"),
    M("load_never_ends", "src/pool/backing.c",
      "(in - p->current) > p->current / POOL_LOAD_FREED) p->loaded = 1;",
      "(in - p->current) > p->current / POOL_LOAD_FREED) (void)0;",
      "a load ends once the program freed 1/16 of what it holds", r"vram\.plan"),
    M("wake_large_blocks_granules", "src/pool/sleep.c",
      "        if (c->state != CHUNK_USED || c->size < POOL_BLOCK_EXTENT_GRANULES * v->gran) continue;",
      "        if (c->state != CHUNK_USED || c->size < POOL_BLOCK_EXTENT_GRANULES * v->gran || 1) continue;",
      "a wake maps a large block's granules in extents of its own (one-granule arenas)", r"vram\.sleep"),
    M("stats_load_extent_ends", "src/pool/stats.c",
      "    if (v->gran_ext[end - 1] >= 0) {",
      "    if (0) {",
      "statistics from the chunks count a load's extent busy beyond the block in it", r"vram\.plan"),
    M("stats_slot_gap_above", "src/pool/stats.c",
      "            n[k] += zv->n > 0 && at < p->plan.hi;         /* the gap above the last */",
      "            n[k] += 0;",
      "statistics in slot mode count the free gap above the zone's last live slot as split off it", r"vram\.plan"),
    M("stats_slot_granules", "src/pool/stats.c",
      "                if (v != NULL) stats_busy_granules(v, x->addr, x->size, &b[k], &covered);",
      "",
      "statistics in slot mode count the granules under the zone's live slots busy", r"vram\.plan"),
    M("stats_zone_unseen", "src/pool/plan_slots.c",
      "    zv->zone = pl->zone;",
      "    zv->zone = NULL;",
      "statistics in slot mode read the zone through its live slots, not as one block", r"vram\.plan"),
    M("extent_default_divisor", "src/pool/arena.c",
      "p->cfg.limit >= POOL_LARGE_LIMIT ? POOL_EXTENT_DIV_LARGE : POOL_EXTENT_DIV);",
      "p->cfg.limit >= POOL_LARGE_LIMIT ? POOL_EXTENT_DIV : POOL_EXTENT_DIV_LARGE);",
      "extent_mb with plan:false and no limit: the limit / 256 (limit / 128 from 64 GiB)", r"vram\.(growth|env|release)"),
    M("thread_cache_default", "src/pool/arena.c",
      "        tcache = cfg->limit / 256;",
      "        tcache = cfg->limit / 128;",
      "thread_cache_mb: default limit / 256, at most 64 MiB", r"vram\.(perthread|threads)"),
    M("map_ahead_sixteenth", "src/pool/backing.c",
      "size_t ahead = p->reserved / POOL_MAP_AHEAD_DIV, room = arena_headroom(p);",
      "size_t ahead = p->reserved / 4, room = arena_headroom(p);",
      "map_ahead_mb: at most 1/16 of what is held", r"vram\.(growth|release)"),
    M("map_ahead_cap", "src/pool/backing.c",
      "    if (ahead > p->cfg.map_ahead) ahead = p->cfg.map_ahead;",
      "",
      "map_ahead_mb:N maps up to N MiB beyond the block (0: only what blocks need)", r"vram\.(growth|release)"),
    M("vmm_false_ignored", "src/runtime/runtime.c",
      "cfg.caps.vmm_supported = rt.caps[phys].vmm_supported && rt.alloc_conf_in_force.vmm != 0;",
      "cfg.caps.vmm_supported = rt.caps[phys].vmm_supported;",
      "vmm:false grows by separate cuMemAlloc regions", r"vram\.(growth|env)"),

    # ---- environment variables -------------------------------------------------------------------
    M("env_zero_limit", "src/runtime/env.c",
      "    if (out->bytes == 0) {\n        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, \"%s='%s': a limit must be larger than zero",
      "    if (out->bytes == 0 && 0) {\n        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, \"%s='%s': a limit must be larger than zero",
      "a limit never turns into no limit: a size that rounds to nothing is refused by name", r"vram\.(env|faults)"),
    M("env_fraction_above_one", "src/runtime/env.c",
      "!(f > 0.0 && f <= 1.0)) {",
      "!(f > 0.0)) {",
      "VRAM_MEMORY_FRACTION: 0 < f <= 1; a malformed value fails naming the variable", r"vram\.(env|faults)"),
    M("env_device_limit_index", "src/runtime/env.c",
      "if (eq == NULL || end != eq || end == idx || i < 0 || i >= ndev) {",
      "if (eq == NULL || end != eq || end == idx || i < 0) {",
      "VRAM_MEMORY_LIMIT_<i> of a card that does not exist is refused, naming the variable", r"vram\.(env|faults)"),
    M("env_backend_unknown", "src/runtime/env.c",
      "    } else if (strcmp(v, \"sim\") == 0) {\n        *out = &vram__backend_sim;\n    } else {",
      "    } else {\n        *out = &vram__backend_sim;\n    }\n    if (0) {",
      "VRAM_BACKEND: cuda (default) or sim; another value is refused naming it", r"vram\.env"),
    M("env_membarrier_malformed", "src/runtime/env.c",
      "    return v == NULL ? 0 : vram__parse_bool(v, on);",
      "    if (v != NULL) (void)vram__parse_bool(v, on);\n    return 0;",
      "VRAM_MEMBARRIER: a malformed value makes vram_init fail naming it", r"vram\.(env|lifecycle)"),
    M("size_locale", "src/common/status.c",
      "return c_locale != (locale_t)0 ? strtod_l(text, end, c_locale) : strtod(text, end);",
      "return strtod(text, end);",
      "sizes mean the same in the library, the preload library and vram run, in every locale",
      r"vram\.(faults|parse|env)|shim"),
    M("size_unit_tera", "src/common/status.c",
      "    case 'T': shift = 40; e++; break;",
      "    case 'T': shift = 30; e++; break;",
      "sizes: K, M, G, T are powers of 1024", r"vram\.parse"),
    M("size_overflow", "src/common/status.c",
      "if (errno == ERANGE || (shift > 0 && n > (SIZE_MAX >> shift))) {",
      "if (errno == ERANGE) {",
      "a size too large is refused, never wrapped into a small limit", r"vram\.parse"),
    M("sim_devices_count", "src/backend/sim_env.c",
      "for (int i = 0; i < count; i++, cfg->ncards++) {",
      "for (int i = 0; i < 1; i++, cfg->ncards++) {",
      "VRAM_SIM_DEVICES: 2x16GiB is two cards", r"vram\.(env|physical)"),
    M("sim_fail_after_off_by_one", "src/backend/sim.c",
      "if (vram__sim_st.cfg.fail_set && vram__sim_st.alloc_ok >= vram__sim_st.cfg.fail_after)",
      "if (vram__sim_st.cfg.fail_set && vram__sim_st.alloc_ok > vram__sim_st.cfg.fail_after)",
      "VRAM_SIM_FAIL_ALLOC_AFTER: the simulated driver's allocations succeed N times, then fail",
      r"vram\.(driver_fail|env|faults)"),
    M("visible_uuid", "src/backend/sim_env.c",
      "    if (v->kind != VRAM_VISIBLE_GPU || strncmp(v->text, \"GPU-\", 4) != 0) return -1;\n    return sim_uuid_card(v->text, v->len, ncards);",
      "    return -1;",
      "CUDA_VISIBLE_DEVICES: honoured by both backends (indices or UUIDs)", r"vram\.(env|physical)|cli|shim"),
    M("visible_invalid_ends_list", "src/backend/sim_env.c",
      "if (card < 0 || sim_listed(cfg, card)) break;",
      "if (card < 0 || sim_listed(cfg, card)) continue;",
      "CUDA_VISIBLE_DEVICES as the driver: the list ends at the first invalid entry", r"vram\.(env|physical)"),

    # ---- the CUDA driver backend, over tests/shim's fake libcuda.so.1 ------------------------------
    M("cuda_error_name_dropped", "src/backend/cuda_load.c",
      "    return vram__fail(cuda_status(r), \"%s: %s\", what, err);",
      "    (void)err;\n    return vram__fail(cuda_status(r), \"%s\", what);",
      "every driver failure keeps its name in the message (the CUDA backend tested over a fake driver)",
      r"vram_cuda"),
    M("cuda_oom_is_driver_error", "src/backend/cuda_load.c",
      "return r == CUDA_ERROR_OUT_OF_MEMORY ? VRAM_ERR_OUT_OF_MEMORY : VRAM_ERR_DRIVER;",
      "return VRAM_ERR_DRIVER;",
      "the card itself full (the driver's CUDA_ERROR_OUT_OF_MEMORY) is an out-of-memory error, on the CUDA backend",
      r"vram_cuda"),
    M("cuda_refused_free_counted", "src/backend/cuda.c",
      "    if (r != CUDA_SUCCESS) return vram__cuda_fail(r, \"cuMemFree(0x%llx) on device %d\",",
      "    if (0) return vram__cuda_fail(r, \"cuMemFree(0x%llx) on device %d\",",
      "bytes come back to a limit only once the driver has freed them (a refused cuMemFree, CUDA backend)",
      r"vram_cuda"),

    # ---- the command-line tool ------------------------------------------------------------------
    M("cli_usage_exit", "tools/vram.c",
      "    fputs(\"\\nTry 'vram help' or 'vram COMMAND --help'.\\n\", stderr);\n    return 2;",
      "    fputs(\"\\nTry 'vram help' or 'vram COMMAND --help'.\\n\", stderr);\n    return 1;",
      "exit status 2: usage error", r"cli"),
    M("cli_ls_exit", "tools/vram.c",
      "        fprintf(stderr, \"vram ls: %s: %s\\n\", vram_status_name(s), detail);\n    }\n    return 1;",
      "        fprintf(stderr, \"vram ls: %s: %s\\n\", vram_status_name(s), detail);\n    }\n    return 0;",
      "vram ls: without a GPU, \"No GPU found: REASON\" and exit 1", r"cli"),
    M("replay_allow_failures", "tools/replay.c",
      "rc = job.interrupted ? 130 : r.failed_allocs && !opt->allow_failures ? 3 : 0;",
      "rc = job.interrupted ? 130 : r.failed_allocs ? 3 : 0;",
      "--allow-failures: exit 0 even when allocations failed", r"cli|limit_bisect|limit_tight"),
    M("replay_exit_3", "tools/replay.c",
      "rc = job.interrupted ? 130 : r.failed_allocs && !opt->allow_failures ? 3 : 0;",
      "rc = job.interrupted ? 130 : r.failed_allocs && !opt->allow_failures ? 1 : 0;",
      "vram replay exits 3 when allocations failed", r"cli"),
    M("replay_exit_130", "tools/replay.c",
      "rc = job.interrupted ? 130 :",
      "rc = job.interrupted ? 1 :",
      "vram replay exits 130 when interrupted (Ctrl-C prints what it has so far)", r"cli"),
    M("replay_ratio_audit", "tools/replay_report.c",
      "return r->peak_live ? (double)r->peak_reserved / (double)r->peak_live : 0.0;",
      "return r->peak_live ? (double)r->peak_in_use / (double)r->peak_live : 0.0;",
      "vram replay: peak live and reserved bytes, their ratio (the audit's survivor)", r"cli"),
    M("replay_tail_ratio", "tools/replay_report.c",
      "return has_tail(job, r) ? (double)job->tail_reserved / (double)r->tail_live : 0.0;",
      "return has_tail(job, r) ? (double)job->tail_reserved / (double)r->peak_live : 0.0;",
      "vram replay --json: tail_reserved_to_live (the same ratio over pass 1's last quarter of events)",
      r"plan_tail|cli"),
    M("replay_json_driver_swapped", "tools/replay_report.c",
      "           r->driver_allocs, r->driver_frees, r->driver_moves);\n    printf(\", \\\"plan_steps\\\"",
      "           r->driver_frees, r->driver_allocs, r->driver_moves);\n    printf(\", \\\"plan_steps\\\"",
      "vram replay --json: driver_allocs, driver_frees, driver_moves", r"cli|report"),
    M("report_driver_swapped_audit", "tools/report.c",
      "r->end.num_driver_allocs, r->end.num_driver_frees, r->end.num_driver_moves);",
      "r->end.num_driver_frees, r->end.num_driver_allocs, r->end.num_driver_moves);",
      "vram report shows the driver calls (the audit's survivor)", r"report"),
    M("replay_sim_card_cap", "tools/replay.c",
      "    if (bytes < limit) bytes = limit;\n    if (bytes > SIM_CARD_MAX) bytes = SIM_CARD_MAX;",
      "    if (bytes > SIM_CARD_MAX) bytes = SIM_CARD_MAX;",
      "with no GPU, a simulated card large enough for the trace and --limit, at most 16 TiB", r"cli"),
    M("trace_error_line", "tools/trace.c",
      "    int n = p->line ? snprintf(p->err, p->errlen, \"%s:%zu: \", p->path, p->line)",
      "    int n = 0 ? snprintf(p->err, p->errlen, \"%s:%zu: \", p->path, p->line)",
      "a trace that cannot be read whole is an error naming the file and the line", r"cli"),
    M("report_snapshot_growth_bound", "tools/snapshot_to_trace.py",
      "OUTPUT_PER_BYTE = 256                 # the trace may be this many times the pickle's size...",
      "OUTPUT_PER_BYTE = 65536               # the trace may be this many times the pickle's size...",
      "a pickle whose trace would be more than 256 times its size (plus 4 MiB) is refused in one line", r"report"),
    M("report_pickle_runs_code", "tools/snapshot_to_trace.py",
      "    def find_class(self, module, name):\n        raise SnapshotError(",
      "    def find_class(self, module, name):\n        return pickle._Unpickler.find_class(self, module, name)\n        raise SnapshotError(",
      "a pickle that asks for anything else (a function, a class) is refused before anything runs", r"report"),
    M("run_exit_127", "tools/run.c",
      "return err == ENOENT ? 127 : 126;",
      "return err == ENOENT ? 126 : 127;",
      "vram run: its exit status is CMD's (126/127 when CMD cannot run)", r"shim|cli"),
    M("run_fraction_smaller_wins", "tools/run.c",
      "if (o->has_limit && o->limit < bytes) bytes = o->limit;",
      "if (o->has_limit && o->limit > bytes) bytes = o->limit;",
      "vram run --fraction F (with --limit, the smaller wins)", r"shim"),
    M("run_fraction_zero_accepted", "tools/run.c",
      "if (errno || end == v || *end || !isfinite(f) || f <= 0.0 || f > 1.0)",
      "if (errno || end == v || *end || !isfinite(f) || f < 0.0 || f > 1.0)",
      "vram run --fraction: 0 < F <= 1 (a limit never turns into no limit)", r"shim"),
    M("run_group_limit_needs_group", "tools/run.c",
      "    if (o->has_group_limit && !o->group) return run_usage_error(\"--group-limit needs --group NAME\");",
      "",
      "vram run --group-limit: with --group", r"shim|cli"),
    M("run_growth_env", "tools/run.c",
      "if (setenv(\"VRAM_GROWTH\", o.growth ? \"1\" : \"0\", 1) != 0 || unsetenv(\"VRAM_FORCE_ALLOW_GROWTH\") != 0)",
      "if ((o.growth && setenv(\"VRAM_GROWTH\", \"1\", 1) != 0) || unsetenv(\"VRAM_FORCE_ALLOW_GROWTH\") != 0)",
      "without --growth the limit is reserved at the program's first allocation", r"shim"),
    M("run_ledger_checked_first", "tools/run.c",
      "        if (run_check_ledger(argv[cmd_at]) != 0) return 1;",
      "        (void)run_check_ledger(argv[cmd_at]);",
      "vram run --group-limit refuses to start the program when the ledger cannot be opened safely",
      r"shim_ledger"),
    M("top_free_wraps", "tools/top.c",
      "return t->in_use >= t->limit ? 0 : t->limit - t->in_use;   /* never wraps */",
      "return t->limit - t->in_use;",
      "vram top: free (under the limit)", r"shim_ledger|shim"),

    # ---- the preload library's accounting (shim/shim.h's table) ---------------------------------
    M("shim_refused_free_audit", "shim/limits.c",
      "    if (r == CUDA_SUCCESS) {\n        shim_uncount(e->dev, e->size);\n        return;\n    }",
      "    if (1) {\n        shim_uncount(e->dev, e->size);\n        return;\n    }",
      "bytes come back to a limit only once the driver has freed them (the audit's survivor)", r"shim"),
    M("shim_limit_off_by_one", "shim/limits.c",
      "int over = (limit && (size > limit || used > limit - size)) || g.malformed[0];",
      "int over = (limit && (size > limit || used >= limit - size)) || g.malformed[0];",
      "an allocation past the limit fails with CUDA_ERROR_OUT_OF_MEMORY (up to the limit it succeeds)",
      r"shim"),
    M("shim_malformed_limit_open", "shim/limits.c",
      "int over = (limit && (size > limit || used > limit - size)) || g.malformed[0];",
      "int over = limit && (size > limit || used > limit - size);",
      "a malformed limit refuses every allocation", r"shim"),
    M("shim_zero_limit_is_none", "shim/env.c",
      "    else if (bytes == 0) shim_malformed(name, v, 1);",
      "",
      "a limit of 0 bytes ('0.4' rounds to nothing) refuses every allocation", r"shim"),
    M("shim_device_limit_wins", "shim/env.c",
      "        if (src == SHIM_LIMIT_ALL && g.limit_src[d] == SHIM_LIMIT_DEVICE) continue;",
      "",
      "VRAM_LIMIT_<i> wins over VRAM_LIMIT", r"shim"),
    M("shim_meminfo_free", "shim/limits.c",
      "size_t f = used >= t ? 0 : t - used;",
      "size_t f = t;",
      "cuMemGetInfo reports the limit as the card's total, free = limit - in use", r"shim"),
    M("shim_total_mem", "shim/calls.c",
      "    if (limit && limit < *bytes) *bytes = limit;\n    return r;\n}\n\n\n/* ---- the CUDA < 3.2",
      "    return r;\n}\n\n\n/* ---- the CUDA < 3.2",
      "cuDeviceTotalMem reports the limit as the card's total", r"shim"),
    M("shim_nvml_used", "shim/nvml.c",
      "    memory->used = memory->total - memory->free;",
      "    (void)0;",
      "NVML (what nvidia-smi shows) reports the limit as the card's total: used = total - free", r"shim"),
    M("shim_pitch_counted", "shim/calls.c",
      "    if (*pitch >= width_bytes && (!height || *pitch <= SIZE_MAX / height)) actual = *pitch * height;",
      "",
      "cuMemAllocPitch counted as pitch x height", r"shim"),
    M("shim_managed_counted", "shim/calls.c",
      "    int dev = dptr ? shim_current_device() : -1;\n    if (shim_take(\"cuMemAllocManaged\"",
      "    int dev = -1;\n    if (shim_take(\"cuMemAllocManaged\"",
      "cuMemAllocManaged counted on the device that allocated it", r"shim"),
    M("shim_release_after_map", "shim/allocs.c",
      "if (a->refs || a->maps || a->pins) return;",
      "if (a->refs || a->pins) return;",
      "cuMemCreate: a handle released right after its mapping counts until the unmap", r"shim"),
    M("shim_refused_release", "shim/allocs.c",
      "    if (r != CUDA_SUCCESS) {\n        (void)shim_insert_unsafe(saved);\n    } else if (a) {",
      "    if (0) {\n        (void)shim_insert_unsafe(saved);\n    } else if (a) {",
      "cuMemCreate counts until nothing holds it: a refused cuMemRelease frees nothing", r"shim"),
    M("shim_refused_unmap", "shim/allocs.c",
      "        if (r != CUDA_SUCCESS) {\n            (void)shim_insert_unsafe(&u->maps[i]);",
      "        if (0) {\n            (void)shim_insert_unsafe(&u->maps[i]);",
      "mappings count until cuMemUnmap (a refused unmap keeps them)", r"shim"),
    M("shim_mipmap_levels", "shim/arrays.c",
      "for (unsigned l = 0; l < (levels ? levels : 1) && l < 64; l++) {",
      "for (unsigned l = 0; l < 1; l++) {",
      "arrays: the texels' bytes, every level", r"shim"),
    M("shim_stack_per_thread", "shim/ctxlimit.c",
      "size_t all = (size_t)sms * (size_t)threads;",
      "size_t all = (size_t)sms;",
      "cuCtxSetLimit of the stack: per thread the device holds", r"shim"),
    M("shim_printf_fifo", "shim/ctxlimit.c",
      "return limit == CU_LIMIT_MALLOC_HEAP_SIZE || limit == CU_LIMIT_PRINTF_FIFO_SIZE || limit == CU_LIMIT_STACK_SIZE;",
      "return limit == CU_LIMIT_MALLOC_HEAP_SIZE || limit == CU_LIMIT_STACK_SIZE;",
      "cuCtxSetLimit of the printf FIFO counted", r"shim"),
    M("shim_pools_trimmed_before_refusal", "shim/held.c",
      "    shim_held_trim(dev);\n    return shim_reserve(fn, dev, size, 1);",
      "    return shim_reserve(fn, dev, size, 1);",
      "memory pools: the pools' unused memory is given back before an allocation is refused", r"shim"),
    M("shim_graph_checked_at_launch", "shim/graphs.c",
      "    if (shim_graph_reserve(fn, mask, need) != 0) return CUDA_ERROR_OUT_OF_MEMORY;",
      "    if (shim_graph_reserve(fn, mask, need) != 0 && 0) return CUDA_ERROR_OUT_OF_MEMORY;",
      "graph memory is checked before cuGraphLaunch / cuGraphUpload may map more", r"shim"),

    # ---- group limits and the ledger ----------------------------------------------------------------
    M("group_total_all_cards", "src/common/ledger.c",
      "        if (strncmp(s->group, group, sizeof s->group) != 0 || strncmp(s->uuid, uuid, sizeof s->uuid) != 0)",
      "        if (strncmp(s->group, group, sizeof s->group) != 0)",
      "--group-limit: the group's processes together take at most SIZE on each device (by UUID)",
      r"shim_ledger|shim_faults"),
    M("group_dead_member_counted", "src/common/ledger.c",
      "        if (!vram__ledger_slot_alive(s)) {\n            ledger_free_slot(s);\n            continue;\n        }\n        if (__atomic_load_n(&s->sleep",
      "        if (__atomic_load_n(&s->sleep",
      "vram top lists only live members; a dead member's bytes do not count against its group",
      r"shim_ledger|shim_faults"),
    M("group_own_usage_without_slot", "shim/limits.c",
      "    if (group_limit && !grouped) total = used;",
      "",
      "a group limit fails closed: without the ledger it holds for the process's own usage", r"shim_ledger|shim"),
    M("group_check_only_own", "shim/limits.c",
      "(size > group_limit || total > group_limit - size)",
      "(size > group_limit || used > group_limit - size)",
      "--group-limit: the group's processes together take at most SIZE", r"shim_ledger|shim_faults|slurm"),
    M("group_unfollowable_ledger_open", "shim/group.c",
      "            grouped = 1;\n            *total = UINT64_MAX;",
      "            grouped = 1;\n            *total = 0;",
      "a member that can no longer open the ledger at the path refuses its group's allocations until it can",
      r"shim_ledger|shim_faults"),
    M("group_name_length", "src/common/ledger.c",
      "if (n == 0 || n >= LEDGER_NAME_LEN) return 0;",
      "if (n == 0 || n > LEDGER_NAME_LEN) return 0;",
      "--group NAME: 1-31 of A-Z a-z 0-9 . _ -", r"shim_ledger|shim|cli"),
    M("ledger_dir_open_to_others", "src/common/ledger.c",
      "    if (st.st_mode & 077) {\n        snprintf(err, errlen, \"%s has mode %03o;",
      "    if (st.st_mode & 007) {\n        snprintf(err, errlen, \"%s has mode %03o;",
      "a ledger directory open to others (group included) is refused with the reason", r"shim_ledger"),
    M("ledger_dir_repaired", "src/common/ledger.c",
      "if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077)) {",
      "if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 007)) {",
      "vram run --group-limit sets a ledger directory of yours that is open to others back to 0700 and says so",
      r"shim_ledger"),
    M("ledger_dir_other_owner", "src/common/ledger.c",
      "    if (st.st_uid != geteuid()) {\n        snprintf(err, errlen, \"%s belongs to uid %lu, not to this user (uid %lu); refused\"",
      "    if (0) {\n        snprintf(err, errlen, \"%s belongs to uid %lu, not to this user (uid %lu); refused\"",
      "a ledger directory that belongs to someone else is refused", r"shim_ledger"),
    M("ledger_file_open_to_others", "src/common/ledger.c",
      "if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {",
      "if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {",
      "a ledger file open to others is refused", r"shim_ledger"),
    M("ledger_shm_taken", "src/common/ledger.c",
      "if (S_ISDIR(st.st_mode) && st.st_uid == geteuid()) return ledger_path(dir, len, err, errlen, \"%s\", shm);",
      "if (S_ISDIR(st.st_mode)) return ledger_path(dir, len, err, errlen, \"%s\", shm);",
      "another user cannot deny you the ledger: /dev/shm/vram-<uid> of someone else is passed over", r"shim_ledger"),
    M("ledger_xdg_of_other", "src/common/ledger.c",
      "if (xdg && xdg[0] == '/' && ledger_own_dir(xdg))",
      "if (xdg && xdg[0] == '/')",
      "XDG_RUNTIME_DIR: the ledger is in DIR/vram only when DIR is a directory of yours", r"shim_ledger|slurm"),
    M("ledger_home_host", "src/common/ledger.c",
      "ledger_path(dir, len, err, errlen, \"%s/.cache/vram/ledger-%s\", home, host) ||",
      "ledger_path(dir, len, err, errlen, \"%s/.cache/vram/ledger-%.0s\", home, host) ||",
      "~/.cache/vram/ledger-<host>: machines sharing a home never share a ledger", r"shim_ledger"),
    M("ledger_run_user", "src/common/ledger.c",
      "    if (ledger_own_dir(run))\n        return ledger_path(dir, len, err, errlen, \"%s/vram\", run)",
      "    if (0)\n        return ledger_path(dir, len, err, errlen, \"%s/vram\", run)",
      "/run/user/<uid>/vram while logind keeps that directory for you", r"shim_ledger"),
    M("ledger_publish_peak", "shim/group.c",
      "    if (g.used[dev] > g.peak[dev]) g.peak[dev] = g.used[dev];",
      "",
      "vram top: peak", r"shim_ledger|shim"),
    M("ledger_sigbus", "shim/group.c",
      "        g.ledger_lost = 1;\n        return;\n    }",
      "        g.ledger_lost = 1;\n    }",
      "a truncated ledger never kills a program: a mapping past the end is replaced, no SIGBUS",
      r"shim_ledger|shim_faults"),

    # ---- Prometheus ------------------------------------------------------------------------------------
    M("prom_group_limit_smallest", "tools/top.c",
      "if (r[i].group_limit && (!g[k].limit || r[i].group_limit < g[k].limit)) g[k].limit = r[i].group_limit;",
      "if (r[i].group_limit && (!g[k].limit || r[i].group_limit > g[k].limit)) g[k].limit = r[i].group_limit;",
      "vram_group_limit_bytes: the smallest its members set", r"shim_ledger"),
    M("prom_no_limit_series", "tools/top.c",
      "        if (r[i].limit) prom_process(\"vram_process_limit_bytes\", &r[i], user, r[i].limit);",
      "        prom_process(\"vram_process_limit_bytes\", &r[i], user, r[i].limit);",
      "vram_process_limit_bytes: no series without a limit", r"shim_ledger"),
    M("prom_group_per_card", "tools/top.c",
      "while (k < ng && (strcmp(g[k].group, r[i].group) != 0 || strcmp(g[k].uuid, r[i].uuid) != 0)) k++;",
      "while (k < ng && strcmp(g[k].group, r[i].group) != 0) k++;",
      "per group and card, vram_group_in_use_bytes", r"shim_ledger"),
    M("prom_label_escape", "tools/top.c",
      "if (*s == '\\\\' || *s == '\"') putchar('\\\\'), putchar(*s);",
      "if (*s == '\"') putchar('\\\\'), putchar(*s);",
      "Prometheus' text format: label values escaped", r"shim_ledger"),
    M("prom_write_failure", "tools/top.c",
      "    if (e || ferror(stdout)) {",
      "    if (0) {",
      "a failed write exits 1 and leaves the last file", r"shim_ledger"),

    # ---- the Slurm plugin ------------------------------------------------------------------------------
    M("slurm_shards_multiply", "spank/vram_spank.c",
      "return n > SIZE_MAX / site_shard_limit ? SIZE_MAX : (size_t)n * site_shard_limit;",
      "return site_shard_limit;",
      "--gres=shard:2: 2 shards x shard_limit", r"slurm"),
    M("slurm_vram_limit_first", "spank/vram_spank.c",
      "    if (opt_limit) return opt_limit;\n    char shards[32];",
      "    char shards[32];",
      "--vram-limit wins; without it shard_limit per shard, else default_limit", r"slurm"),
    M("slurm_group_budget", "spank/vram_spank.c",
      "set_size(sp, \"VRAM_LIMIT\", limit) || set_size(sp, \"VRAM_GROUP_LIMIT\", limit) ||\n"
      "                  set_size(sp, \"VRAM_LIMIT_MAX\", limit) || set_size(sp, \"VRAM_GROUP_LIMIT_MAX\", limit)))",
      "set_size(sp, \"VRAM_LIMIT\", limit) ||\n                  set_size(sp, \"VRAM_LIMIT_MAX\", limit)))",
      "the job's tasks on a node share one budget per GPU", r"slurm"),
    M("slurm_site_growth", "spank/vram_spank.c",
      "set(sp, \"VRAM_GROWTH\", opt_growth || site_growth ? \"1\" : \"0\")",
      "set(sp, \"VRAM_GROWTH\", opt_growth ? \"1\" : \"0\")",
      "growth=0|1: the default for jobs that do not say --vram-growth", r"slurm"),
    M("slurm_zero_refused", "spank/vram_spank.c",
      "    if (v == 0) {\n        slurm_error(\"vram: %s=%s is 0 bytes",
      "    if (v == 0 && 0) {\n        slurm_error(\"vram: %s=%s is 0 bytes",
      "a bad value is refused by srun before anything runs", r"slurm"),
    M("slurm_ledger_node_place", "spank/vram_spank.c",
      "if (vram__ledger_place(dir, sizeof dir, LEDGER_PLACE_NODE, note, sizeof note, err, sizeof err) != 0 ||",
      "if (vram__ledger_place(dir, sizeof dir, 0, note, sizeof note, err, sizeof err) != 0 ||",
      "the job's tasks keep their ledger where the node keeps the user's, whatever XDG_RUNTIME_DIR or "
      "VRAM_LEDGER_DIR the job brought", r"slurm"),
    M("slurm_epilog_frees", "spank/vram_spank.c",
      "    (void)vram__ledger_reclaim_locked(&l);\n    int alive = 0;",
      "    int alive = 0;",
      "when the job ends (scancel included) the plugin frees its processes' ledger slots", r"slurm"),

    # ---- the PyTorch / CuPy faces (without a GPU) ----------------------------------------------------
    M("torch_fraction_ignored", "src/pool/arenas.c",
      "    if (f < cap) cap = f;\n",
      "",
      "set_per_process_memory_fraction() (also after the start)", r"vram\.(allocstats|stats|oom|growth)|python"),
    M("torch_mempool_to_eager", "src/pool/arenas.c",
      "    for (int i = 0; i < POOL_ARENAS && s == VRAM_ERR_OUT_OF_MEMORY && others && size <= p->cfg.limit; i++) {\n"
      "        pool_arena *b = atomic_load(&p->arena[i]);",
      "    for (int i = 0; i < ALL_ARENAS && s == VRAM_ERR_OUT_OF_MEMORY && others && size <= p->cfg.limit; i++) {\n"
      "        pool_arena *b = any_arena(p, i);",
      "torch.cuda.MemPool: its memory never goes to eager tensors until the graph is released", r"vram\.private"),
    M("torch_install_without_pytorch", "python/vram/torch.py",
      "        import torch  # (without PyTorch: ImportError, before anything is tried)",
      "        try:\n            import torch  # noqa: F401\n        except ImportError:\n            return None",
      "install() without PyTorch raises ImportError before any build is tried", r"python"),
]


def check_patterns(mutants, root):
    """The problems of the list against the tree at root: ids, files, texts that do not occur once."""
    problems, seen = [], set()
    for m in mutants:
        if m.id in seen:
            problems.append(f"{m.id}: a second mutant with this id")
        seen.add(m.id)
        if not m.promise:
            problems.append(f"{m.id}: no promise")
        if m.old == m.new:
            problems.append(f"{m.id}: its replacement is its text")
        path = os.path.join(root, m.path)
        try:
            with open(path, encoding="utf-8", newline="") as f:
                count = f.read().count(m.old)
        except OSError as e:
            problems.append(f"{m.id}: cannot read {m.path}: {e.strerror}")
            continue
        if count != 1:
            problems.append(f"{m.id}: its text occurs {count} times in {m.path} (it must occur once)")
    return problems


def run(cmd, cwd, env=None, log=None):
    """Runs cmd in a session of its own; returns (exit status, seconds). Output goes to `log` (a file) or
    is dropped. Interrupted, it ends the whole session (ctest's tests included) before raising."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log or subprocess.DEVNULL,
                         stderr=subprocess.STDOUT if log else subprocess.DEVNULL, start_new_session=True)
    try:
        rc = p.wait()
    except BaseException:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        raise
    return rc, time.monotonic() - t0


def failed_tests(build):
    """The names of the tests ctest's last run failed."""
    path = os.path.join(build, "Testing", "Temporary", "LastTestsFailed.log")
    try:
        with open(path) as f:
            return [line.strip().split(":", 1)[-1] for line in f if line.strip()]
    except OSError:
        return []


# The test that checks this list against the tree (--check-patterns) fails whenever a mutant is planted:
# never run here.
SELF_TEST = "^mutate_list$"


def ctest(build, jobs, regex=None, exclude=None, env=None, log=None):
    """Runs the tests (those matching regex, less those matching exclude, never SELF_TEST); returns
    (exit status, seconds, the tests that failed)."""
    try:
        os.unlink(os.path.join(build, "Testing", "Temporary", "LastTestsFailed.log"))
    except FileNotFoundError:
        pass
    cmd = ["ctest", "--test-dir", build, "-j", str(jobs), "--timeout", "600", "--output-on-failure"]
    if regex:
        cmd += ["-R", regex]
    cmd += ["-E", f"({exclude})|{SELF_TEST}" if exclude else SELF_TEST]
    rc, secs = run(cmd, build, env=env, log=log)
    return rc, secs, failed_tests(build) if rc != 0 else []


def test_count(build, regex):
    """How many tests regex selects."""
    out = subprocess.run(["ctest", "--test-dir", build, "-N", "-R", regex], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    for line in out.splitlines():
        if line.startswith("Total Tests:"):
            return int(line.split(":")[1])
    return 0


def sync_tree(src, rev, tree):
    """Makes tree the committed tree rev of the checkout src, writing only the files that differ (so that
    a kept build rebuilds only what changed, and a mutant left by a killed run is undone). Returns the
    commit's id."""
    commit = subprocess.run(["git", "-C", src, "rev-parse", "--verify", rev + "^{commit}"],
                            stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    archive = subprocess.run(["git", "-C", src, "archive", commit], stdout=subprocess.PIPE, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            path = os.path.join(tree, member.name)
            if member.isdir():
                os.makedirs(path, exist_ok=True)
            elif member.issym():
                if not os.path.islink(path) or os.readlink(path) != member.linkname:
                    if os.path.lexists(path):
                        os.unlink(path)
                    os.symlink(member.linkname, path)
            elif member.isfile():
                data = tar.extractfile(member).read()
                try:
                    with open(path, "rb") as f:
                        same = f.read() == data
                except OSError:
                    same = False
                if not same:
                    if os.path.lexists(path):
                        os.unlink(path)
                    with open(path, "wb") as f:
                        f.write(data)
                os.chmod(path, member.mode & 0o777)
    return commit


def tree_stamp(src, commit, own):
    """What the baseline depends on: the commit's files and their contents, less this script (whose list
    of mutants changes no test), so that editing the list does not run the suite again."""
    listing = subprocess.run(["git", "-C", src, "ls-tree", "-r", commit], stdout=subprocess.PIPE, text=True,
                             check=True).stdout
    kept = "".join(line + "\n" for line in listing.splitlines() if line.split("\t", 1)[-1] != own)
    return hashlib.sha1(kept.encode()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description="plant known bugs one at a time; the tests must catch each")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--check-patterns", action="store_true",
                    help="check that every mutant's text occurs once in this checkout (no build) and exit")
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--rev", default="HEAD", help="the commit to mutate (default HEAD)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--keep", help="scratch directory to use and keep (else a temporary one, removed); "
                    "a later run with the same one rebuilds only what changed")
    ap.add_argument("--build-type", default="", help="CMAKE_BUILD_TYPE (default: the project's)")
    ap.add_argument("--whole-suite", action="store_true",
                    help="run the whole suite against every mutant (every test that catches it is named), "
                    "not its own tests first")
    args = ap.parse_args()
    # SIGTERM (and SIGINT, which a shell's background job ignores) ends the run as Ctrl-C does: the
    # running build or ctest session is killed and the scratch tree is left for the next run to undo
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ids = [m.id for m in MUTANTS]
    chosen = MUTANTS
    if args.only:
        want = args.only.split(",")
        unknown = [w for w in want if w not in ids]
        if unknown:
            print("mutate.py: no mutant " + ", ".join(unknown), file=sys.stderr)
            return 2
        chosen = [m for m in MUTANTS if m.id in want]
    if args.list:
        for m in chosen:
            state = "equivalent: " + m.equivalent if m.equivalent else m.tests or "(whole suite)"
            print(f"{m.id:34} {m.path}  [{state}]\n{'':34} {m.promise}")
        return 0
    if args.check_patterns:
        problems = check_patterns(chosen, src)
        for p in problems:
            print("mutate.py: " + p, file=sys.stderr)
        if problems:
            print("mutate.py: make each such mutant plant the same bug in the code as it is now (tests/mutate.py's "
                  "MUTANTS), then check that the tests still catch it: tests/mutate.py --only ID", file=sys.stderr)
        if not problems:
            print(f"{len(chosen)} mutants, each text found once in {src}")
        return 1 if problems else 0
    if len(set(ids)) != len(ids):
        print("mutate.py: duplicate mutant ids", file=sys.stderr)
        return 2

    scratch = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="vram-mutate-")
    tree, build = os.path.join(scratch, "tree"), os.path.join(scratch, "build")
    logpath = os.path.join(scratch, "mutate.log")
    os.makedirs(tree, exist_ok=True)
    lock = open(os.path.join(scratch, "lock"), "w")      # two runs in one directory would mix their mutants
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print(f"mutate.py: another run uses {scratch}", file=sys.stderr)
        return 1
    commit = sync_tree(src, args.rev, tree)
    # The tests as CI runs them (CI=1: a test that needs a missing tool fails rather than skips); no
    # bytecode written into the tree, whose sources change within a second of their cached copies.
    env = dict(os.environ, CI="1", PYTHONDONTWRITEBYTECODE="1")
    t_start = time.monotonic()
    caught = survived = errors = skipped = 0
    try:
        with open(logpath, "a") as log:
            # Link-time optimization off: it changes no behaviour, and each mutant relinks the library
            # and everything linked with it (with it on, a relink takes minutes on 2 cores).
            configure = ["cmake", "-S", tree, "-B", build, "-DVRAM_LTO=OFF"]
            if args.build_type:
                configure.append("-DCMAKE_BUILD_TYPE=" + args.build_type)
            if run(configure, scratch, log=log)[0] != 0 or \
                    run(["cmake", "--build", build, "-j", str(args.jobs)], scratch, log=log)[0] != 0:
                print(f"mutate.py: the unmutated tree does not build (see {logpath})", file=sys.stderr)
                return 1
            # The whole suite must pass without a mutant, once per tree for a kept scratch directory.
            stamp = os.path.join(scratch, "baseline-passed")
            tree_id = tree_stamp(src, commit, os.path.relpath(os.path.abspath(__file__), src))
            try:
                with open(stamp) as f:
                    passed_before = f.read().strip() == tree_id
            except OSError:
                passed_before = False
            if passed_before:
                print(f"baseline: the suite passed before on this tree ({commit[:12]})", flush=True)
            else:
                rc, secs, failed = ctest(build, args.jobs, env=env, log=log)
                if rc != 0 and failed:
                    # once more, those alone: a test that shares the machine-wide ledger
                    # (/dev/shm/vram-<uid>) with other builds' tests can fail while they run
                    names = "|".join(failed)
                    rc, more, again = ctest(build, args.jobs, regex=f"^({names})$", env=env, log=log)
                    secs += more
                    if rc == 0:
                        print(f"baseline: {', '.join(failed)} failed once and passed when run again: the run "
                              "goes on, but look at it", flush=True)
                    failed = again
                if rc != 0:
                    print(f"mutate.py: the unmutated tree fails {', '.join(failed) or 'its tests'} "
                          f"(see {logpath}): fix that first", file=sys.stderr)
                    return 1
                with open(stamp, "w") as f:
                    f.write(tree_id + "\n")
                print(f"baseline: the suite passes on {commit[:12]} ({secs:.0f} s)", flush=True)

            for m in chosen:
                path = os.path.join(tree, m.path)
                with open(path, encoding="utf-8", newline="") as f:
                    original = f.read()
                count = original.count(m.old)
                if count != 1:
                    errors += 1
                    print(f"{m.id:34} error: its text occurs {count} times in {m.path}", flush=True)
                    continue
                if m.equivalent:
                    skipped += 1
                    print(f"{m.id:34} equivalent ({m.equivalent})", flush=True)
                    continue
                if m.tests and test_count(build, m.tests) == 0:
                    errors += 1
                    print(f"{m.id:34} error: its tests ({m.tests}) match no test", flush=True)
                    continue
                t0 = time.monotonic()
                with open(path, "w", encoding="utf-8", newline="") as f:
                    f.write(original.replace(m.old, m.new, 1))
                try:
                    log.write(f"\n==== {m.id}\n")
                    log.flush()
                    if run(["cmake", "--build", build, "-j", str(args.jobs)], scratch, log=log)[0] != 0:
                        errors += 1
                        print(f"{m.id:34} error: does not build", flush=True)
                        continue
                    rc, by, how = 0, [], ""
                    if args.whole_suite:
                        rc, _, by = ctest(build, args.jobs, env=env, log=log)
                    else:
                        if m.tests:
                            rc, _, by = ctest(build, args.jobs, regex=m.tests, env=env, log=log)
                        if rc == 0:
                            how = " (not by its own tests)" if m.tests else ""
                            rc, _, by = ctest(build, args.jobs, exclude=m.tests or None, env=env, log=log)
                    secs = time.monotonic() - t0
                    if by:
                        caught += 1
                        print(f"{m.id:34} caught by {', '.join(by[:4])}{' ...' if len(by) > 4 else ''}{how} "
                              f"({secs:.0f} s)", flush=True)
                    elif rc != 0:
                        errors += 1
                        print(f"{m.id:34} error: ctest exited {rc} without naming a failed test (see {logpath})",
                              flush=True)
                    else:
                        survived += 1
                        print(f"{m.id:34} SURVIVED ({secs:.0f} s): {m.promise}", flush=True)
                finally:
                    with open(path, "w", encoding="utf-8", newline="") as f:
                        f.write(original)
            run(["cmake", "--build", build, "-j", str(args.jobs)], scratch, log=log)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    total = time.monotonic() - t_start
    print(f"{caught} caught, {survived} survived, {errors} errors, {skipped} equivalent; "
          f"{total / 60:.0f} min with --jobs {args.jobs}")
    return 0 if survived == 0 and errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
