/*
 * unit_debug.c: the pool's debug assertions (src/pool/debug.h) fire, each in a child process, with the
 * rule named on stderr: a `_locked` function called without its arena's lock, a lock taken against the
 * lock order (the arena lock after a pointer-table shard's); and the same calls made by the rules
 * run through. A block freed to the free bins on the simulated card reads the freed pattern. Built
 * and registered only in debug builds (VRAM_DEBUG: CMAKE_BUILD_TYPE=Debug), where the assertions are.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool/backing.h"
#include "pool/split_merge.h"
#include "unit.h"

#ifdef VRAM_DEBUG

/* Runs fn in a child with its stderr into err (len bytes, NUL-ended); its wait status. */
static int run_child(void (*fn)(void), char *err, size_t len) {
    int fds[2];
    EXPECT(pipe(fds) == 0);
    fflush(stdout);
    pid_t pid = fork();
    EXPECT(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < len && (r = read(fds[0], err + n, len - 1 - n)) > 0) n += (size_t)r;
    err[n] = '\0';
    close(fds[0]);
    int status = 0;
    EXPECT(waitpid(pid, &status, 0) == pid);
    return status;
}

static pool_arena *bare_arena(void) {
    pool_arena *p = aligned_alloc(_Alignof(pool_arena), sizeof *p);
    EXPECT(p != NULL);
    memset(p, 0, sizeof *p);
    p->plan.lo = UINT64_MAX;
    pool_lock_init(&p->lock);
    return p;
}

static void recount_without_the_lock(void) {
    vram__vmm_recount_locked(bare_arena());           /* a _locked function, the lock not taken */
}

static void recount_with_the_lock(void) {
    pool_arena *p = bare_arena();
    pool_lock_take(&p->lock);
    vram__vmm_recount_locked(p);
    pool_lock_give(&p->lock);
}

/* `wrong` aborts in a child with `says` on stderr; `right`, the same done by the rule, exits 0 silently. */
static void expect_rule(void (*wrong)(void), void (*right)(void), const char *says) {
    char err[512];
    unit_note("the rule whose breach says \"%s\"", says);
    int status = run_child(wrong, err, sizeof err);
    EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    EXPECT(strstr(err, says) != NULL);
    status = run_child(right, err, sizeof err);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_SIZE(strlen(err), ==, 0);
}

UNIT_TEST(debug, locked_function_without_the_lock_aborts) {
    expect_rule(recount_without_the_lock, recount_with_the_lock, "the arena lock is held in a _locked function");
}

static void arena_lock_after_a_shard(void) {
    pool_arena *p = bare_arena();
    pool_spin_lock(&p->ptr_table[0].lock, POOL_RANK_SHARD);
    pool_lock_take(&p->lock);                   /* against the order: arena, cache, shard */
}

static void shard_after_the_arena_lock(void) {
    pool_arena *p = bare_arena();
    pool_lock_take(&p->lock);
    pool_spin_lock(&p->ptr_table[0].lock, POOL_RANK_SHARD);
    pool_spin_unlock(&p->ptr_table[0].lock);
    pool_lock_give(&p->lock);
}

UNIT_TEST(debug, lock_order_is_checked) {
    expect_rule(arena_lock_after_a_shard, shard_after_the_arena_lock, "the lock order");
}

/* A plain region over host memory, as the simulated card's device memory is the host's. */
UNIT_TEST(debug, a_block_freed_on_the_simulated_card_reads_the_freed_pattern) {
    static const vram__backend sim = {.name = "sim"};
    size_t size = 4 * VRAM_POOL_UNIT;
    unsigned char *mem = aligned_alloc(VRAM_POOL_UNIT, size);
    EXPECT(mem != NULL);
    memset(mem, 0x11, size);
    pool_arena *p = bare_arena();
    p->cfg.backend = &sim;
    pool_lock_take(&p->lock);
    pool_region *r = calloc(1, sizeof *r);
    pool_chunk *c = chunk_new_locked(p);
    EXPECT(r != NULL && c != NULL);
    r->kind = REGION_PLAIN;
    r->base = (uint64_t)(uintptr_t)mem;
    r->size = size;
    r->first = r->last = c;
    p->regions = r;
    *c = (pool_chunk){.addr = r->base, .size = size, .region = r, .state = CHUNK_USED, .req = size};
    p->current = size;
    p->used_count = 1;
    vram__pool_release_used_locked(p, c);             /* the free of the block, to the free bins */
    for (size_t i = 0; i < size; i++) EXPECT_INT(mem[i], ==, POOL_FILL_FREED);
    EXPECT(r->first->state == CHUNK_FREE);
    pool_lock_give(&p->lock);
}

#endif
