/*
 * test_sleep.c: tags, sleep and wake (vram_set_tag, vram_sleep, vram_wake): a tag's blocks leave the card
 * and come back at the same addresses, with their bytes (offload) or without (discard); a wake the
 * limit, the card's budget or the card refuses leaves everything asleep as it was; another process sees
 * the memory go and come back (VRAM_SIM_SHARED, FAKE_CUDA_SHARED on the CUDA backend); the statistics;
 * what each mode of the pool refuses; vram_check after each step.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define STREAM_A ((void *)0x1)

/* A growing pool on a 16 GiB card under `limit`, mapping only what blocks need. */
static void growth(size_t limit) {
    use_sim_growth(limit, "map_ahead_mb:0");
}

static void *tagged(const char *tag, size_t size) {
    void *p = NULL;
    CHECK_OK(vram_set_tag(tag));
    CHECK_OK(vram_malloc(&p, size, 0));
    CHECK_OK(vram_set_tag(NULL));
    CHECK(p != NULL);
    return p;
}

static const vram__backend *backend(void) {
    return harness_on_cuda() ? &vram__backend_cuda : &vram__backend_sim;
}

/* The card's free bytes as the driver reports them to this process. */
static size_t card_free(void) {
    size_t free_bytes = 0, total = 0;
    CHECK_OK(backend()->mem_info(0, &free_bytes, &total));
    return free_bytes;
}

/* Makes the cards one machine's, shared with other processes (the driver's view for them): the
 * simulated backend's VRAM_SIM_SHARED, or the fake driver's FAKE_CUDA_SHARED. */
static void share_cards(char *path, size_t len) {
    snprintf(path, len, "/tmp/vram-sleep-test-%d", (int)getpid());
    unlink(path);
    set_env(harness_on_cuda() ? "FAKE_CUDA_SHARED" : "VRAM_SIM_SHARED", path);
}

/* The free bytes of card 0 as another process sees them: a child reads them from the driver
 * (cuMemGetInfo on the CUDA backend) and hands them over a pipe. */
static size_t card_free_elsewhere(void) {
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        size_t free_bytes = 0, total = 0;
        int ok = backend()->mem_info(0, &free_bytes, &total) == VRAM_OK;
        if (!ok) free_bytes = SIZE_MAX;
        (void)!write(fds[1], &free_bytes, sizeof free_bytes);
        _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    size_t got = 0;
    CHECK(read(fds[0], &got, sizeof got) == (ssize_t)sizeof got);
    close(fds[0]);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return got;
}

TEST(sleep_offload_wakes_at_the_same_addresses_with_the_bytes) {
    growth(1 * GiB);
    void *a = tagged("weights", 3 * MiB), *b = tagged("weights", 5 * MiB + 256), *c = tagged("weights", 64 * KiB);
    void *u = NULL;
    CHECK_OK(vram_malloc(&u, 4 * MiB, 0));              /* untagged: stays on the card */
    fill(a, 3 * MiB, 1);
    fill(b, 5 * MiB + 256, 2);
    fill(c, 64 * KiB, 3);
    fill(u, 4 * MiB, 4);
    vram_memory_info before = INFO(0);
    size_t tagged_bytes = 3 * MiB + 5 * MiB + 256 + 64 * KiB, card0 = card_free();
    CHECK_OK(vram_sleep(0, "weights", VRAM_SLEEP_OFFLOAD));
    CHECK_ALL();
    vram_memory_info asleep = INFO(0);
    CHECK_SIZE(asleep.current, ==, before.current);                 /* the blocks are still allocated */
    CHECK_SIZE(asleep.asleep_bytes, ==, tagged_bytes);
    CHECK_SIZE(asleep.asleep_host_bytes, ==, tagged_bytes);
    CHECK_SIZE(asleep.reserved, ==, 4 * MiB);                       /* the untagged block's granules alone */
    CHECK_SIZE(card_free(), ==, card0 + (before.reserved - 4 * MiB));
    CHECK(filled(u, 4 * MiB, 4));
    CHECK_OK(vram_wake(0, "weights"));
    CHECK_ALL();
    vram_memory_info awake = INFO(0);
    CHECK_SIZE(awake.asleep_bytes, ==, 0);
    CHECK_SIZE(awake.asleep_host_bytes, ==, 0);
    CHECK_SIZE(awake.reserved, ==, before.reserved);
    CHECK(filled(a, 3 * MiB, 1) && filled(b, 5 * MiB + 256, 2) && filled(c, 64 * KiB, 3));
    CHECK(filled(u, 4 * MiB, 4));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_free(c));
    CHECK_OK(vram_free(u));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());
    check_counters_balanced();
    vram__backend_counters n = sim_counters();
    CHECK_U64(n.host_alloc, ==, n.host_free);
}

/* A wake maps the whole granules of a block of 32 MiB or more in extents of its own (sleep.c), as a
 * load does, in an arena of one-granule extents (the plan on, no limit set: the untagged blocks'; a
 * tag's arena maps extents of 58 MiB, as `plan:false`); the rest granule by granule. On the 16 GiB
 * card the extents are 58 MiB (29 granules). After the load (x, 64 MiB, freed), blocks of 64 MiB at
 * 0, 34 MiB + 4 KiB at 64 MiB, 36 MiB at 98 MiB + 4 KiB and 16 MiB at 134 MiB + 4 KiB are granules
 * 0-75. Everything sleeps (no tag), and the wake maps 29 + 3, 17 and 17 granules (4 extents), the
 * granules at 98 and 134 MiB that two blocks share (2) and the 16 MiB block's other 8: 14 creates,
 * where granule by granule took 76; `plan:false` maps the run in 58 MiB pieces: 3. The blocks sleep
 * discarded (no bytes copied, which a sanitizer build pays for by the byte) and wake usable. Once the
 * first block is freed, trim gives back its 32 granules whole with the plan; `plan:false`'s second
 * piece, [29, 58), is busy with the second block: 29 go back. */
TEST(sleep_wake_maps_large_blocks_in_their_own_extents) {
    uint64_t woke[2];
    for (int plan = 0; plan <= 1; plan++) {
        use_sim_growth(0, plan ? "plan:true,map_ahead_mb:0,small_pool_kb:0"       /* (0: no limit set) */
                               : "plan:false,map_ahead_mb:0,small_pool_kb:0");
        void *x = NULL;
        CHECK_OK(vram_malloc(&x, 64 * MiB, 0));
        CHECK_OK(vram_free(x));                                      /* the load is over */
        size_t sizes[4] = {64 * MiB, 34 * MiB + 4 * KiB, 36 * MiB, 16 * MiB};
        void *b[4];
        for (int i = 0; i < 4; i++) CHECK_OK(vram_malloc(&b[i], sizes[i], 0));
        CHECK((char *)b[3] - (char *)b[0] == (ptrdiff_t)(134 * MiB + 4 * KiB));   /* one after another */
        CHECK_OK(vram_sleep(0, NULL, VRAM_SLEEP_DISCARD));
        CHECK_SIZE(INFO(0).reserved, ==, 0);
        vram__backend_counters c0 = sim_counters();
        CHECK_OK(vram_wake(0, NULL));
        woke[plan] = sim_counters().phys_create - c0.phys_create;
        CHECK_ALL();
        for (int i = 0; i < 4; i++) {                                /* each block's ends mapped */
            fill(b[i], 64 * KiB, (unsigned char)(0x40 + i));
            fill((char *)b[i] + sizes[i] - 64 * KiB, 64 * KiB, (unsigned char)(0x50 + i));
        }
        for (int i = 0; i < 4; i++) {
            CHECK(filled(b[i], 64 * KiB, (unsigned char)(0x40 + i)));
            CHECK(filled((char *)b[i] + sizes[i] - 64 * KiB, 64 * KiB, (unsigned char)(0x50 + i)));
        }
        CHECK_SIZE(INFO(0).reserved, ==, 76 * 2 * MiB);
        CHECK_OK(vram_free(b[0]));
        CHECK_OK(vram_trim(0, 0));
        CHECK_SIZE(INFO(0).reserved, ==, (plan ? 76 - 32 : 76 - 29) * 2 * MiB);
        for (int i = 1; i < 4; i++) CHECK_OK(vram_free(b[i]));
        CHECK_ALL();
        CHECK_OK(vram_shutdown());
        check_counters_balanced();
    }
    CHECK_U64(woke[0], ==, 3);
    CHECK_U64(woke[1], ==, 14);
}

TEST(sleep_discard_wakes_without_the_bytes) {
    growth(1 * GiB);
    void *a = tagged("kv", 6 * MiB);
    fill(a, 6 * MiB, 7);
    vram__backend_counters c0 = sim_counters();
    CHECK_OK(vram_sleep(0, "kv", VRAM_SLEEP_DISCARD));
    CHECK_ALL();
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 6 * MiB);
    CHECK_SIZE(INFO(0).asleep_host_bytes, ==, 0);
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_OK(vram_wake(0, "kv"));
    CHECK_ALL();
    CHECK(!filled(a, 6 * MiB, 7));                                  /* new memory under the same address */
    vram__backend_counters c1 = sim_counters();
    CHECK_U64(c1.host_alloc, ==, c0.host_alloc);
    CHECK_U64(c1.copy_to_host + c1.copy_to_device, ==, c0.copy_to_host + c0.copy_to_device);
    fill(a, 6 * MiB, 8);                                            /* and it is usable memory */
    CHECK(filled(a, 6 * MiB, 8));
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

/* One copy per run of blocks that touch each other, at sleep and at wake (the blocks still live),
 * one pinned host block reused by all; the bytes moved are the blocks' bytes, nothing more. */
TEST(sleep_copies_a_run_of_blocks_at_once) {
    growth(1 * GiB);
    void *a = tagged("w", 2 * MiB), *b = tagged("w", 3 * MiB), *c = tagged("w", 1 * MiB + 512), *d = tagged("w", 4 * MiB);
    CHECK((char *)b == (char *)a + 2 * MiB && (char *)c == (char *)b + 3 * MiB);
    CHECK((char *)d == (char *)c + 1 * MiB + 512);
    CHECK_OK(vram_free(b));                                         /* runs: a; c d */
    fill(a, 2 * MiB, 1);
    fill(c, 1 * MiB + 512, 3);
    fill(d, 4 * MiB, 4);
    vram__backend_counters c0 = sim_counters();
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));
    vram__backend_counters c1 = sim_counters();
    CHECK_U64(c1.host_alloc - c0.host_alloc, ==, 1);
    CHECK_U64(c1.copy_to_host - c0.copy_to_host, ==, 2);
    CHECK_U64(c1.bytes_to_host - c0.bytes_to_host, ==, 2 * MiB + 1 * MiB + 512 + 4 * MiB);
    CHECK_OK(vram_free(c));                                         /* freeing a block asleep */
    CHECK_ALL();
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 6 * MiB);
    CHECK_OK(vram_wake(0, "w"));
    vram__backend_counters c2 = sim_counters();
    CHECK_U64(c2.copy_to_device - c1.copy_to_device, ==, 2);        /* a, then d alone */
    CHECK_U64(c2.bytes_to_device - c1.bytes_to_device, ==, 6 * MiB);
    CHECK_U64(c2.host_free - c1.host_free, ==, 0);                  /* kept for the next sleep */
    CHECK(filled(a, 2 * MiB, 1) && filled(d, 4 * MiB, 4));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(d));
    CHECK_ALL();
}

TEST(sleep_tag_asleep_refuses_its_requests_only) {
    growth(1 * GiB);
    void *a = tagged("kv", 4 * MiB), *p = NULL;
    CHECK_OK(vram_sleep(0, "kv", VRAM_SLEEP_DISCARD));
    uint64_t ooms = INFO(0).num_ooms;
    CHECK_OK(vram_set_tag("kv"));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 1 * MiB, 0));
    CHECK_ERROR_CONTAINS("the memory of the tag 'kv' is asleep (vram_sleep)");
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc_async(&p, 1 * MiB, 0, STREAM_A));
    CHECK(vram_plugin_alloc(1024, 0, STREAM_A) == NULL);
    CHECK_ERROR_CONTAINS("is asleep");
    CHECK_OK(vram_set_tag("other"));                                /* another tag: served */
    CHECK_OK(vram_malloc(&p, 1 * MiB, 0));
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_set_tag(NULL));
    CHECK_OK(vram_malloc(&p, 1 * MiB, 0));                          /* no tag: served */
    CHECK_OK(vram_free(p));
    CHECK_U64(INFO(0).num_ooms, ==, ooms);                          /* nothing was full */
    CHECK_ALL();
    CHECK_OK(vram_wake(0, "kv"));
    CHECK_OK(vram_set_tag("kv"));
    CHECK_OK(vram_malloc(&p, 1 * MiB, 0));                          /* awake: served again */
    CHECK_OK(vram_set_tag(NULL));
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

/* The limit took the memory a tag gave back: its wake is refused with the out-of-memory message and
 * everything stays asleep as it was (nothing mapped, the host copy kept), until there is room. */
TEST(sleep_wake_refused_by_the_limit_keeps_everything_asleep) {
    growth(64 * MiB);
    void *w = tagged("w", 24 * MiB), *u = NULL;
    fill(w, 24 * MiB, 5);
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));
    CHECK_OK(vram_malloc(&u, 48 * MiB, 0));                         /* fits only while w sleeps */
    vram_memory_info before = INFO(0);
    vram__backend_counters c0 = sim_counters();
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_wake(0, "w"));
    CHECK_ERROR_CONTAINS("out of memory on /device:GPU:0: cannot wake the tag 'w'");
    CHECK_ERROR_CONTAINS("the memory limit of 67108864 bytes");
    CHECK_ERROR_CONTAINS("nothing is lost");
    CHECK_ALL();
    vram_memory_info after = INFO(0);
    CHECK_INFO_EQ(before, after);
    CHECK_SIZE(after.asleep_bytes, ==, 24 * MiB);
    CHECK_SIZE(after.asleep_host_bytes, ==, 24 * MiB);
    vram__backend_counters c1 = sim_counters();
    CHECK_U64(c1.map, ==, c0.map);
    CHECK_U64(c1.phys_create, ==, c0.phys_create);
    CHECK_OK(vram_free(u));
    CHECK_SIZE(INFO(0).reserved, ==, 48 * MiB);                     /* cached, until the wake needs it */
    CHECK_OK(vram_wake(0, "w"));
    CHECK_SIZE(INFO(0).reserved, ==, 24 * MiB);
    CHECK(filled(w, 24 * MiB, 5));
    CHECK_OK(vram_free(w));
    CHECK_ALL();
}

/* Another process took the card: the wake's new memory runs out partway, what it mapped goes back,
 * and the blocks stay asleep with their bytes; once the other process is gone the wake succeeds. */
TEST(sleep_wake_refused_by_the_card_undoes_its_mappings) {
    char path[64];
    share_cards(path, sizeof path);
    use_sim("64MiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 64 * MiB));
    CHECK_OK(vram_set_alloc_conf("map_ahead_mb:0"));
    void *w = tagged("w", 24 * MiB);
    fill(w, 24 * MiB, 6);
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));
    int go[2], done[2];
    CHECK(pipe(go) == 0 && pipe(done) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {                        /* another process: the card's memory, straight from its driver */
        const vram__backend *be = &vram__backend_sim;
        uint64_t h = 0;
        be->close();                       /* (its own driver state, not the parent's copy) */
        int ok = be->open() == VRAM_OK && be->phys_create(0, 48 * MiB, &h) == VRAM_OK;
        (void)!write(done[1], &ok, sizeof ok);
        char c;
        (void)!read(go[0], &c, 1);         /* holds it until told */
        _exit(0);
    }
    int ok = 0;
    CHECK(read(done[0], &ok, sizeof ok) == (ssize_t)sizeof ok && ok);
    vram_memory_info before = INFO(0);
    vram__backend_counters c0 = sim_counters();
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_wake(0, "w"));
    CHECK_ERROR_CONTAINS("cannot wake the tag 'w'");
    CHECK_ERROR_CONTAINS("the card itself is full");
    CHECK_ALL();
    vram__backend_counters c1 = sim_counters();
    CHECK_U64(c1.map - c0.map, >, 0);                               /* it had mapped some ... */
    CHECK_U64(c1.map - c0.map, ==, c1.unmap - c0.unmap);            /* ... and gave all of it back */
    CHECK_U64(c1.phys_create - c0.phys_create, ==, c1.phys_release - c0.phys_release);
    vram_memory_info after = INFO(0);
    CHECK_SIZE(after.reserved, ==, before.reserved);
    CHECK_SIZE(after.current, ==, before.current);
    CHECK_SIZE(after.asleep_bytes, ==, 24 * MiB);
    CHECK_SIZE(after.asleep_host_bytes, ==, 24 * MiB);
    CHECK(write(go[1], "x", 1) == 1);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_OK(vram_wake(0, "w"));                                    /* the card has room again */
    CHECK(filled(w, 24 * MiB, 6));
    CHECK_OK(vram_free(w));
    CHECK_ALL();
    unlink(path);
}

/* What another process's cuMemGetInfo reports: the tag's memory leaves the card at the sleep and is
 * taken again at the wake. */
TEST(sleep_another_process_sees_the_memory_come_and_go) {
    char path[64];
    share_cards(path, sizeof path);
    growth(1 * GiB);
    void *w = tagged("w", 32 * MiB), *u = NULL;
    CHECK_OK(vram_malloc(&u, 8 * MiB, 0));
    size_t awake = card_free_elsewhere();
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_DISCARD));
    CHECK_SIZE(card_free_elsewhere(), ==, awake + 32 * MiB);
    CHECK_OK(vram_wake(0, "w"));
    CHECK_SIZE(card_free_elsewhere(), ==, awake);
    CHECK_OK(vram_sleep(0, NULL, VRAM_SLEEP_DISCARD));              /* everything */
    CHECK_SIZE(card_free_elsewhere(), ==, awake + 40 * MiB);
    CHECK_OK(vram_wake(0, NULL));
    CHECK_SIZE(card_free_elsewhere(), ==, awake);
    CHECK_OK(vram_free(w));
    CHECK_OK(vram_free(u));
    CHECK_ALL();
    unlink(path);
}

/* A sleep with no tag: every block of the device (tags' and untagged) and everything the pool caches
 * goes; a request of any kind is refused until the wake; the wake maps what the blocks need. */
TEST(sleep_without_a_tag_sleeps_everything) {
    growth(1 * GiB);
    void *w = tagged("w", 8 * MiB), *u = NULL, *gone = NULL, *p = NULL;
    CHECK_OK(vram_malloc(&u, 6 * MiB, 0));
    CHECK_OK(vram_malloc(&gone, 10 * MiB, 0));
    CHECK_OK(vram_free(gone));                                      /* cached memory */
    CHECK_SIZE(INFO(0).reserved, ==, 24 * MiB);
    size_t card0 = card_free();
    CHECK_OK(vram_sleep(0, NULL, VRAM_SLEEP_DISCARD));
    CHECK_ALL();
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.reserved, ==, 0);
    CHECK_SIZE(info.current, ==, 14 * MiB);
    CHECK_SIZE(info.asleep_bytes, ==, 14 * MiB);
    CHECK_SIZE(card_free(), ==, card0 + 24 * MiB);
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 1 * MiB, 0));
    CHECK_ERROR_CONTAINS("the memory of the blocks without a tag is asleep");
    CHECK_OK(vram_set_tag("w"));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 1 * MiB, 0));
    CHECK_OK(vram_set_tag(NULL));
    CHECK_OK(vram_sleep(0, NULL, VRAM_SLEEP_DISCARD));              /* asleep already: nothing changes */
    CHECK_OK(vram_wake(0, "w"));                                    /* one tag back alone */
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 6 * MiB);
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 1 * MiB, 0));
    CHECK_OK(vram_wake(0, NULL));
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, ==, 14 * MiB);                     /* the blocks' granules, no cache */
    CHECK_OK(vram_malloc(&p, 1 * MiB, 0));
    CHECK_OK(vram_wake(0, NULL));                                   /* nothing asleep: nothing to do */
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_free(w));
    CHECK_OK(vram_free(u));
    CHECK_ALL();
}

/* Blocks asleep may be freed, by any free call: at once, their bytes no longer asleep; the host copy
 * goes when the last one does; their addresses serve requests after the wake. */
TEST(sleep_blocks_asleep_can_be_freed) {
    growth(1 * GiB);
    void *a = tagged("w", 4 * MiB), *b = tagged("w", 4 * MiB), *c = tagged("w", 2 * MiB);
    CHECK_OK(vram_record_stream(c, STREAM_A));                      /* used on another stream */
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_DISCARD));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free_async(b, STREAM_A));                         /* no event: nothing is there */
    CHECK_ALL();
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 2 * MiB);
    CHECK_SIZE(INFO(0).current, ==, 2 * MiB);
    vram_plugin_release(c);
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 0);
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_free(a));           /* freed once */
    CHECK_ALL();
    CHECK_OK(vram_wake(0, "w"));
    CHECK_SIZE(INFO(0).reserved, ==, 0);                            /* nothing left to map */
    void *again = tagged("w", 4 * MiB);
    CHECK_PTR(again, ==, a);
    CHECK_OK(vram_free(again));
    CHECK_ALL();
}

/* The pinned host block of an offload is kept after the wake and used again by the next sleep (no new
 * pinning); a sleep of more bytes than it holds replaces it; vram_trim and the shutdown give it back. */
TEST(sleep_offload_keeps_its_pinned_host_block_for_the_next_sleep) {
    growth(1 * GiB);
    void *a = tagged("w", 6 * MiB), *b = NULL;
    fill(a, 6 * MiB, 1);
    vram__backend_counters c0 = sim_counters();
    for (int round = 0; round < 3; round++) {                       /* an RL loop's sleeps */
        CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));
        CHECK_SIZE(INFO(0).host_kept_bytes, ==, 0);                 /* (in use: asleep_host_bytes) */
        CHECK_SIZE(INFO(0).asleep_host_bytes, ==, 6 * MiB);
        CHECK_OK(vram_wake(0, "w"));
        CHECK_SIZE(INFO(0).host_kept_bytes, ==, 6 * MiB);
        CHECK(filled(a, 6 * MiB, 1));
        CHECK_ALL();
    }
    vram__backend_counters c1 = sim_counters();
    CHECK_U64(c1.host_alloc - c0.host_alloc, ==, 1);
    CHECK_U64(c1.host_free - c0.host_free, ==, 0);
    CHECK_U64(c1.bytes_to_host - c0.bytes_to_host, ==, 3 * 6 * MiB);
    b = tagged("w", 2 * MiB);                                       /* more than the block kept holds */
    fill(b, 2 * MiB, 2);
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));
    vram__backend_counters c2 = sim_counters();
    CHECK_U64(c2.host_alloc - c1.host_alloc, ==, 1);
    CHECK_U64(c2.host_free - c1.host_free, ==, 1);
    CHECK_SIZE(INFO(0).asleep_host_bytes, ==, 8 * MiB);
    CHECK_OK(vram_wake(0, "w"));
    CHECK(filled(a, 6 * MiB, 1) && filled(b, 2 * MiB, 2));
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_DISCARD));               /* a discard leaves it kept */
    CHECK_SIZE(INFO(0).host_kept_bytes, ==, 8 * MiB);
    CHECK_OK(vram_wake(0, "w"));
    CHECK_OK(vram_trim(0, 0));
    CHECK_SIZE(INFO(0).host_kept_bytes, ==, 0);
    CHECK_U64(sim_counters().host_free - c2.host_free, ==, 1);
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));               /* pinned anew, kept again ... */
    CHECK_OK(vram_wake(0, "w"));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_ALL();
    CHECK_OK(vram_shutdown());                                      /* ... and given back at the end */
    vram__backend_counters n = sim_counters();
    CHECK_U64(n.host_alloc, ==, n.host_free);
}

TEST(sleep_offload_host_copy_goes_with_the_last_block) {
    growth(1 * GiB);
    void *a = tagged("w", 4 * MiB), *b = tagged("w", 2 * MiB);
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));
    CHECK_SIZE(INFO(0).asleep_host_bytes, ==, 6 * MiB);
    CHECK_OK(vram_free(a));
    CHECK_SIZE(INFO(0).asleep_host_bytes, ==, 6 * MiB);            /* b's bytes are still in it */
    vram__backend_counters c0 = sim_counters();
    CHECK_OK(vram_free(b));
    CHECK_SIZE(INFO(0).asleep_host_bytes, ==, 0);
    CHECK_U64(sim_counters().host_free - c0.host_free, ==, 1);
    CHECK_OK(vram_wake(0, "w"));
    CHECK_ALL();
}

/* PyTorch's figures while asleep: the blocks are still allocated and active, their segments and
 * reserved bytes gone; vram_memory_info says how much sleeps. */
TEST(sleep_statistics) {
    growth(1 * GiB);
    void *a = tagged("w", 8 * MiB), *u = NULL;
    CHECK_OK(vram_malloc(&u, 2 * MiB, 0));
    vram_allocator_stats st0, st1;
    CHECK_OK(vram_get_allocator_stats(0, &st0));
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_DISCARD));
    CHECK_OK(vram_get_allocator_stats(0, &st1));
    CHECK_INT(st1.allocated_bytes[VRAM_STAT_ALL].current, ==, st0.allocated_bytes[VRAM_STAT_ALL].current);
    CHECK_INT(st1.allocation[VRAM_STAT_ALL].current, ==, 2);
    CHECK_INT(st1.active_bytes[VRAM_STAT_ALL].current, ==, (int64_t)(10 * MiB));
    CHECK_INT(st1.reserved_bytes[VRAM_STAT_ALL].current, ==, (int64_t)(2 * MiB));
    CHECK_INT(st1.segment[VRAM_STAT_ALL].current, <, st0.segment[VRAM_STAT_ALL].current);
    CHECK_INT(st1.inactive_split_bytes[VRAM_STAT_ALL].current, ==, 0);
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.asleep_bytes, ==, 8 * MiB);
    CHECK_SIZE(info.current - info.asleep_bytes, <=, info.reserved);
    CHECK_INFO_SANE(info);
    size_t nsegs = 0, nblocks = 0;                                  /* the memory map: the card's alone */
    vram_segment_info segs[8];
    vram_block_info blocks[8];
    CHECK_OK(vram_get_segments(0, segs, 8, &nsegs, blocks, 8, &nblocks));
    CHECK_SIZE(nblocks, ==, 1);
    CHECK_U64(blocks[0].address, ==, (uint64_t)(uintptr_t)u);
    CHECK_OK(vram_wake(0, "w"));
    CHECK_OK(vram_get_allocator_stats(0, &st1));
    CHECK_INT(st1.reserved_bytes[VRAM_STAT_ALL].current, ==, st0.reserved_bytes[VRAM_STAT_ALL].current);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(u));
    CHECK_ALL();
}

TEST(sleep_refused_under_preallocation) {
    use_sim("16GiB");
    CHECK_OK(vram_set_memory_limit(0, 256 * MiB));
    void *a = tagged("w", 4 * MiB);                                 /* a tag changes no placement here */
    CHECK_STATUS(VRAM_ERR_UNSUPPORTED, vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));
    CHECK_ERROR_CONTAINS("/device:GPU:0 preallocates its memory (memory growth is off)");
    CHECK_ERROR_CONTAINS("turn memory growth on");
    CHECK_STATUS(VRAM_ERR_UNSUPPORTED, vram_sleep(0, NULL, VRAM_SLEEP_DISCARD));
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 0);
    CHECK_SIZE(INFO(0).reserved, ==, 256 * MiB);
    CHECK_OK(vram_wake(0, NULL));                                   /* nothing asleep */
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

TEST(sleep_refused_without_virtual_memory_management) {
    use_sim_growth(256 * MiB, "vmm:false");
    void *a = tagged("w", 4 * MiB);
    CHECK_STATUS(VRAM_ERR_UNSUPPORTED, vram_sleep(0, "w", VRAM_SLEEP_DISCARD));
    CHECK_ERROR_CONTAINS("grows without virtual memory management (allocator option vmm:false");
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 0);
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

TEST(sleep_refused_during_a_capture_and_for_memory_shared) {
    growth(1 * GiB);
    void *a = tagged("w", 4 * MiB), *b = tagged("x", 2 * MiB);
    CHECK_OK(vram_capture_begin(0));
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_sleep(0, "w", VRAM_SLEEP_DISCARD));
    CHECK_ERROR_CONTAINS("a CUDA-graph capture is underway on /device:GPU:0");
    CHECK_OK(vram_capture_end(0));
    unsigned char handle[4096];
    size_t length = 0, offset = 0;
    CHECK_OK(vram_ipc_export(b, handle, sizeof handle, &length, &offset));
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_sleep(0, "x", VRAM_SLEEP_DISCARD));
    CHECK_ERROR_CONTAINS("was shared with another process (vram_ipc_export)");
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_sleep(0, NULL, VRAM_SLEEP_DISCARD));   /* checked before any sleeps */
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 0);
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_DISCARD));               /* another tag's memory sleeps */
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_ipc_export(a, handle, sizeof handle, &length, &offset));
    CHECK_ERROR_CONTAINS("the block is asleep");
    CHECK_OK(vram_wake(0, "w"));
    CHECK_OK(vram_free(b));
    CHECK_OK(vram_trim(0, 0));                                      /* the shared memory goes back ... */
    CHECK_OK(vram_sleep(0, "x", VRAM_SLEEP_DISCARD));               /* ... so x may sleep */
    CHECK_OK(vram_wake(0, "x"));
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

TEST(sleep_bad_arguments) {
    use_sim("2x16GiB");
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_growth(1, 1));
    void *a = tagged("w", 1 * MiB);
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_sleep(0, "w", (vram_sleep_mode)2));
    CHECK_ERROR_CONTAINS("mode 2 is neither VRAM_SLEEP_OFFLOAD (0) nor VRAM_SLEEP_DISCARD (1)");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_sleep(0, "never", VRAM_SLEEP_OFFLOAD));
    CHECK_ERROR_CONTAINS("no allocation was ever made under the tag 'never'");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_wake(0, "never"));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_sleep(1, "w", VRAM_SLEEP_OFFLOAD));
    CHECK_ERROR_CONTAINS("no block of /device:GPU:1 was ever allocated under the tag 'w'");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_sleep(0, "", VRAM_SLEEP_OFFLOAD));
    CHECK_ERROR_CONTAINS("a tag is not empty");
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_sleep(2, "w", VRAM_SLEEP_OFFLOAD));
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_wake(-1, NULL));
    CHECK_OK(vram_sleep(1, NULL, VRAM_SLEEP_OFFLOAD));              /* a device with no block: fine */
    CHECK_OK(vram_wake(1, NULL));
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 0);
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

static void *tag_of_thread(void *arg) {
    const char *tag = (const char *)1;
    vram_status s = vram_get_tag(&tag);
    *(int *)arg = s == VRAM_OK && tag == NULL;
    return NULL;
}

TEST(tag_is_the_threads_and_checked) {
    const char *tag = (const char *)1;
    CHECK_OK(vram_get_tag(&tag));
    CHECK(tag == NULL);
    CHECK_OK(vram_set_tag("weights"));                              /* no runtime needed */
    CHECK(!vram_is_initialized());
    CHECK_OK(vram_get_tag(&tag));
    CHECK_STR_EQ(tag, "weights");
    int other = 0;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, tag_of_thread, &other) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(other);                                                   /* each thread its own tag */
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_tag(""));
    CHECK_ERROR_CONTAINS("vram_set_tag(\"\"): a tag is not empty");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_tag("a\nb"));
    CHECK_ERROR_CONTAINS("vram_set_tag(\"a?b\"): a tag is printable ASCII");
    char longer[80];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_set_tag(longer));
    CHECK_ERROR_CONTAINS("a tag has at most 63 bytes");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_get_tag(NULL));
    CHECK_OK(vram_get_tag(&tag));
    CHECK_STR_EQ(tag, "weights");                                   /* a refused tag changes nothing */
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_sleep(0, "never set", VRAM_SLEEP_DISCARD));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_wake(0, "never set either"));   /* (neither takes a place) */
    char name[16];
    for (int i = 1; i < 32; i++) {                                  /* 32 tags in all */
        snprintf(name, sizeof name, "t%d", i);
        CHECK_OK(vram_set_tag(name));
    }
    CHECK_STATUS(VRAM_ERR_CONFLICT, vram_set_tag("one too many"));
    CHECK_ERROR_CONTAINS("this process has 32 tags already");
    CHECK_OK(vram_set_tag("t5"));                                   /* a known one still is */
    CHECK_OK(vram_set_tag(NULL));
    CHECK_OK(vram_get_tag(&tag));
    CHECK(tag == NULL);
}

/* A private pool (a CUDA graph's) created under a tag sleeps and wakes with it: every granule it had
 * comes back at its address (the graph's replays use its free blocks' addresses too), live blocks
 * with their bytes. */
TEST(sleep_private_pool_of_a_tag_wakes_whole) {
    growth(1 * GiB);
    int pool = -1;
    CHECK_OK(vram_set_tag("graph"));
    CHECK_OK(vram_private_pool_create(0, &pool));
    CHECK_OK(vram_set_tag(NULL));
    void *out = NULL, *scratch = NULL;
    CHECK_OK(vram_private_malloc_async(&scratch, 6 * MiB, 0, pool, STREAM_A));
    CHECK_OK(vram_private_malloc_async(&out, 2 * MiB, 0, pool, STREAM_A));
    CHECK_OK(vram_free(scratch));                                   /* freed during the "capture" */
    fill(out, 2 * MiB, 9);
    void *u = NULL;
    CHECK_OK(vram_malloc(&u, 2 * MiB, 0));
    size_t reserved = INFO(0).reserved;
    CHECK_SIZE(reserved, ==, 10 * MiB);
    CHECK_OK(vram_sleep(0, "graph", VRAM_SLEEP_OFFLOAD));
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, ==, 2 * MiB);
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 2 * MiB);
    CHECK_OK(vram_wake(0, "graph"));
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, ==, reserved);                     /* the scratch granules too */
    CHECK(filled(out, 2 * MiB, 9));
    fill(scratch, 6 * MiB, 10);                                     /* a replay writes there */
    CHECK(filled(scratch, 6 * MiB, 10));
    CHECK_OK(vram_free(out));
    CHECK_OK(vram_free(u));
    CHECK_OK(vram_private_pool_release(0, pool));
    CHECK_ALL();
}

/* Two logical devices on one card: the wake of one takes its bytes from its own limit and from the
 * card's, which the other took meanwhile. */
TEST(sleep_wake_within_the_physical_devices_limit) {
    use_sim("16GiB");
    vram_logical_device_configuration cfg[2] = {{200}, {200}};
    CHECK_OK(vram_set_memory_growth(0, 1));
    CHECK_OK(vram_set_memory_limit(0, 256 * MiB));
    CHECK_OK(vram_set_logical_device_configuration(0, cfg, 2));
    void *w = NULL, *other = NULL;
    CHECK_OK(vram_set_tag("w"));
    CHECK_OK(vram_malloc(&w, 128 * MiB, 0));
    CHECK_OK(vram_set_tag(NULL));
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_DISCARD));
    CHECK_OK(vram_malloc(&other, 180 * MiB, 1));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_wake(0, "w"));
    CHECK_ERROR_CONTAINS("the physical device's limit is reached (vram_set_memory_limit(0, 268435456))");
    CHECK_ALL();
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 128 * MiB);
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_OK(vram_free(other));
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_wake(0, "w"));        /* the other device's cache holds it */
    CHECK_OK(vram_trim(1, 0));
    CHECK_OK(vram_wake(0, "w"));
    CHECK_SIZE(INFO(0).reserved, ==, 128 * MiB);
    CHECK_OK(vram_free(w));
    CHECK_ALL();
}

typedef struct sleeper {
    const char  *tag;
    vram_status  status;
    atomic_int   done;
} sleeper;

static void *sleep_thread(void *arg) {
    sleeper *s = arg;
    s->status = vram_sleep(0, s->tag, VRAM_SLEEP_DISCARD);
    atomic_store(&s->done, 1);
    return NULL;
}

/* The sleep waits for the work queued on the stream the tag's blocks were allocated on. */
TEST(sleep_waits_for_the_streams_of_its_blocks) {
    growth(1 * GiB);
    void *a = NULL;
    CHECK_OK(vram_set_tag("w"));
    CHECK_OK(vram_malloc_async(&a, 4 * MiB, 0, STREAM_A));
    CHECK_OK(vram_set_tag(NULL));
    vram__sim_hold_event_syncs(1);
    sleeper s = {.tag = "w"};
    atomic_init(&s.done, 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, sleep_thread, &s) == 0);
    while (vram__sim_syncs_waiting() == 0) usleep(1000);
    usleep(20000);
    CHECK(!atomic_load(&s.done));                                   /* waiting for STREAM_A */
    vram__sim_stream_complete(STREAM_A);
    CHECK(pthread_join(t, NULL) == 0);
    vram__sim_hold_event_syncs(0);
    CHECK_OK(s.status);
    CHECK_SIZE(INFO(0).asleep_bytes, ==, 4 * MiB);
    CHECK_OK(vram_wake(0, "w"));
    CHECK_OK(vram_free_async(a, STREAM_A));
    vram__sim_stream_complete(STREAM_A);
    CHECK_ALL();
}

static void *free_parked(void *arg) {
    void **p = arg;
    for (int i = 0; i < 4; i++) {
        if (p[i] != NULL) vram_free(p[i]);
    }
    return NULL;
}

/* Several threads (thread caches parking): blocks parked go back at the sleep, and a block asleep is
 * never parked nor handed out from a cache. */
TEST(sleep_thread_caches_never_serve_blocks_asleep) {
    growth(1 * GiB);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, malloc_free_once, NULL) == 0);  /* a second thread: caches park */
    CHECK(pthread_join(t, NULL) == 0);
    void *x = NULL, *live[4] = {0};
    for (int i = 0; i < 4; i++) CHECK_OK(vram_malloc(&live[i], 64 * KiB, 0));
    CHECK_OK(vram_malloc(&x, 64 * KiB, 0));
    CHECK_OK(vram_free(x));                                         /* parked */
    CHECK_OK(vram_sleep(0, NULL, VRAM_SLEEP_DISCARD));
    CHECK_ALL();
    void *p = NULL;
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 64 * KiB, 0));
    CHECK(pthread_create(&t, NULL, free_parked, live) == 0);        /* frees on another thread: not parked */
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_malloc(&p, 64 * KiB, 0));
    CHECK_SIZE(INFO(0).current, ==, 0);
    CHECK_ALL();
    CHECK_OK(vram_wake(0, NULL));
    CHECK_OK(vram_malloc(&p, 64 * KiB, 0));
    CHECK_OK(vram_free(p));
    CHECK_ALL();
}

/* The repeating step's plan ends at a sleep of the device's blocks; the step goes on after the wake. */
TEST(sleep_ends_the_plan) {
    use_sim_growth(1 * GiB, "plan:true,map_ahead_mb:0,small_pool_kb:0");
    void *w = NULL, *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vram_malloc(&w, 8 * MiB, 0));
    for (int step = 1; step <= 8; step++) {
        CHECK_OK(vram_malloc(&a, 16 * MiB, 0));
        CHECK_OK(vram_malloc(&b, 16 * MiB, 0));
        CHECK_OK(vram_free(a));
        CHECK_OK(vram_malloc(&c, 32 * MiB, 0));
        CHECK_OK(vram_free(b));
        CHECK_OK(vram_free(c));
    }
    CHECK_SIZE(INFO(0).plan_bytes, >, 0);                           /* in force */
    uint64_t ends = INFO(0).plan_ends;
    CHECK_OK(vram_sleep(0, NULL, VRAM_SLEEP_DISCARD));
    CHECK_ALL();
    CHECK_SIZE(INFO(0).plan_bytes, ==, 0);
    CHECK_U64(INFO(0).plan_ends, ==, ends + 1);
    CHECK_SIZE(INFO(0).reserved, ==, 0);
    CHECK_OK(vram_wake(0, NULL));
    CHECK_SIZE(INFO(0).reserved, ==, 8 * MiB);
    for (int step = 1; step <= 3; step++) {
        CHECK_OK(vram_malloc(&a, 16 * MiB, 0));
        CHECK_OK(vram_free(a));
    }
    CHECK_OK(vram_free(w));
    CHECK_ALL();
}

/* A sleep of several arenas (no tag: the device's and a tag's) that fails at the second puts the first
 * back as it was: awake, its bytes copied back, nothing asleep. */
TEST(sleep_failed_in_a_later_arena_wakes_the_earlier_ones) {
    growth(1 * GiB);
    void *u = NULL, *w = tagged("w", 2 * MiB), *w2 = NULL, *p = NULL;
    CHECK_OK(vram_malloc(&u, 4 * MiB, 0));
    CHECK_OK(vram_sleep(0, NULL, VRAM_SLEEP_OFFLOAD));              /* each arena pins a host block ... */
    CHECK_OK(vram_wake(0, NULL));                                   /* ... and keeps it */
    w2 = tagged("w", 2 * MiB);                                      /* the tag's kept block is too small now */
    fill(u, 4 * MiB, 1);
    fill(w, 2 * MiB, 2);
    fill(w2, 2 * MiB, 3);
    vram_memory_info before = INFO(0);
    vram__sim_fail_copies(0, 1);                                    /* the tag's new host block is refused */
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_sleep(0, NULL, VRAM_SLEEP_OFFLOAD));
    CHECK_ERROR_CONTAINS("pinned host memory for the 4194304 bytes");
    CHECK_ALL();
    vram_memory_info after = INFO(0);
    CHECK_SIZE(after.asleep_bytes, ==, 0);
    CHECK_SIZE(after.reserved, ==, before.reserved);
    CHECK_SIZE(after.current, ==, before.current);
    CHECK(filled(u, 4 * MiB, 1) && filled(w, 2 * MiB, 2) && filled(w2, 2 * MiB, 3));
    CHECK_OK(vram_malloc(&p, 1 * MiB, 0));                          /* the device's arena serves again */
    CHECK_OK(vram_free(p));
    CHECK_OK(vram_free(u));
    CHECK_OK(vram_free(w));
    CHECK_OK(vram_free(w2));
    CHECK_ALL();
}

/* While a tag sleeps, vram_trim and the idle-release thread give back the other memory and leave the
 * tag as it is: nothing of it mapped, its host copy kept, its bytes back at the wake. */
TEST(sleep_trim_and_idle_release_leave_a_tag_asleep) {
    use_sim_growth(1 * GiB, "map_ahead_mb:0,idle_release_ms:2");
    void *w = tagged("w", 8 * MiB), *u = NULL, *gone = NULL;
    CHECK_OK(vram_malloc(&u, 4 * MiB, 0));
    CHECK_OK(vram_malloc(&gone, 6 * MiB, 0));
    fill(w, 8 * MiB, 3);
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));
    CHECK_OK(vram_free(gone));                                      /* cached, then idle */
    usleep(30000);                                                  /* several idle ticks */
    CHECK_OK(vram_trim(0, 0));
    CHECK_ALL();
    vram_memory_info info = INFO(0);
    CHECK_SIZE(info.reserved, ==, 4 * MiB);
    CHECK_SIZE(info.asleep_bytes, ==, 8 * MiB);
    CHECK_SIZE(info.asleep_host_bytes, ==, 8 * MiB);
    CHECK_OK(vram_wake(0, "w"));
    CHECK(filled(w, 8 * MiB, 3));
    usleep(10000);
    CHECK_ALL();
    CHECK_SIZE(INFO(0).reserved, ==, 12 * MiB);                     /* the blocks' memory stays */
    CHECK(filled(w, 8 * MiB, 3));
    CHECK_OK(vram_free(w));
    CHECK_OK(vram_free(u));
    CHECK_ALL();
}

/* A copy or a host allocation that fails leaves the blocks awake (sleep) or asleep (wake), as they
 * were, with their bytes. */
TEST(sleep_failed_copies_change_nothing) {
    growth(1 * GiB);
    void *a = tagged("w", 4 * MiB), *b = tagged("w", 2 * MiB);
    fill(a, 4 * MiB, 1);
    fill(b, 2 * MiB, 2);
    vram_memory_info before = INFO(0);
    vram__sim_fail_copies(1, 0);
    CHECK_STATUS(VRAM_ERR_DRIVER, vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));
    CHECK_ERROR_CONTAINS("copying the blocks of /device:GPU:0 to host memory");
    CHECK_ERROR_CONTAINS("CUDA_ERROR_LAUNCH_FAILED");
    CHECK_ALL();
    vram_memory_info after = INFO(0);
    CHECK_INFO_EQ(before, after);
    CHECK(filled(a, 4 * MiB, 1) && filled(b, 2 * MiB, 2));
    vram__sim_fail_copies(0, 1);
    CHECK_STATUS(VRAM_ERR_OUT_OF_MEMORY, vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));
    CHECK_ERROR_CONTAINS("pinned host memory for the");
    CHECK_ALL();
    after = INFO(0);
    CHECK_INFO_EQ(before, after);
    vram__backend_counters c0 = sim_counters();
    CHECK_U64(c0.host_alloc, ==, c0.host_free);
    CHECK_OK(vram_sleep(0, "w", VRAM_SLEEP_OFFLOAD));
    vram_memory_info asleep = INFO(0);
    vram__sim_fail_copies(1, 0);
    CHECK_STATUS(VRAM_ERR_DRIVER, vram_wake(0, "w"));
    CHECK_ERROR_CONTAINS("copying the blocks of /device:GPU:0 back from host memory");
    CHECK_ALL();
    after = INFO(0);
    CHECK_SIZE(after.reserved, ==, asleep.reserved);                /* what the wake mapped went back */
    CHECK_SIZE(after.asleep_bytes, ==, asleep.asleep_bytes);
    CHECK_SIZE(after.asleep_host_bytes, ==, asleep.asleep_host_bytes);
    CHECK_OK(vram_wake(0, "w"));
    CHECK(filled(a, 4 * MiB, 1) && filled(b, 2 * MiB, 2));
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_ALL();
}
