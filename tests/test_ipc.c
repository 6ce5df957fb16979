/*
 * test_ipc.c: sharing blocks with other processes (vram_ipc_export / _open / _close) on the
 * simulated card, whose device memory is host memory: what one process writes into a block the
 * other reads, through real processes (fork) and pidfd_getfd.
 */
#include <dirent.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* A growing 1 GiB pool mapping only what blocks need, in extents as large as the runs that need
 * them (up to 4 MiB, limit / 256: a chosen limit would otherwise map one granule per extent). */
static void growth_1gib(void) {
    use_sim_growth(1 * GiB, "map_ahead_mb:0,small_pool_kb:0,extent_mb:4");
}

TEST(ipc_handle_names_the_extents_under_the_block) {
    growth_1gib();
    void *a = NULL, *b = NULL;
    CHECK_OK(vram_malloc(&a, 1 * MiB, 0));            /* granule 0: an extent of 2 MiB */
    CHECK_OK(vram_malloc(&b, 3 * MiB + 1, 0));        /* from 1 MiB on: over it and a 4 MiB extent */
    unsigned char handle[256];
    size_t length = 0, offset = 0;
    CHECK_OK(vram_ipc_export(b, handle, sizeof handle, &length, &offset));
    CHECK_SIZE(length, ==, 32 + 2 * 24);              /* the head and two pieces */
    CHECK_SIZE(offset, ==, 1 * MiB);                  /* where b lies in the 6 MiB the receiver maps */
    size_t again = 0;
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_ipc_export(b, handle, length - 1, &again, &offset));
    CHECK_SIZE(again, ==, length);
    CHECK_ERROR_CONTAINS("needs 80 bytes");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_ipc_export(a, NULL, 0, &again, &offset));   /* the size alone */
    CHECK_SIZE(again, ==, 32 + 24);
    CHECK_OK(vram_free(a));
    CHECK_OK(vram_free(b));
    CHECK_ALL();
}

TEST(ipc_open_in_this_process_shares_the_bytes) {
    growth_1gib();
    void *a = NULL, *there = NULL;
    CHECK_OK(vram_malloc(&a, 4 * MiB, 0));
    memset(a, 0x5a, 4 * MiB);                         /* (simulated device memory is host memory) */
    unsigned char handle[256];
    size_t length = 0, offset = 0;
    CHECK_OK(vram_ipc_export(a, handle, sizeof handle, &length, &offset));
    CHECK(((unsigned char *)a)[4 * MiB - 1] == 0x5a); /* the export kept the bytes */
    CHECK_OK(vram_ipc_open(0, handle, length, &there));
    unsigned char *b = (unsigned char *)there + offset;
    CHECK_PTR(b, !=, a);                              /* another mapping of the same memory */
    CHECK(b[0] == 0x5a && b[4 * MiB - 1] == 0x5a);
    b[7] = 0x11;
    CHECK(((unsigned char *)a)[7] == 0x11);
    CHECK_OK(vram_ipc_close(there));
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_ipc_close(there));
    CHECK_ERROR_CONTAINS("not memory vram_ipc_open mapped");
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

TEST(ipc_open_in_another_process) {
    growth_1gib();
    void *a = NULL;
    CHECK_OK(vram_malloc(&a, 6 * MiB, 0));
    memset(a, 0x3c, 6 * MiB);
    unsigned char handle[256];
    size_t length = 0, offset = 0;
    CHECK_OK(vram_ipc_export(a, handle, sizeof handle, &length, &offset));
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {                                 /* the receiver: reads, then writes */
        void *there = NULL;
        if (vram_ipc_open(0, handle, length, &there) != VRAM_OK) _exit(2);
        unsigned char *b = (unsigned char *)there + offset;
        int ok = b[0] == 0x3c && b[6 * MiB - 1] == 0x3c;
        b[100] = 0x77;
        _exit(ok && vram_ipc_close(there) == VRAM_OK ? 0 : 3);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK_INT(WIFEXITED(status) ? WEXITSTATUS(status) : -1, ==, 0);
    CHECK(((unsigned char *)a)[100] == 0x77);         /* what the other process wrote */
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

static size_t fds_open(void) {
    DIR *d = opendir("/proc/self/fd");
    size_t n = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    if (d != NULL) closedir(d);
    return n - 1;
}

/* An exporter keeps a file descriptor per piece (one-granule extents, the default with the plan: a
 * 64 MiB block is 32 pieces). In a child (its limits are its own): with the soft RLIMIT_NOFILE 8 above
 * what is open, the export raises it (to open + 32 + 64 at least) and succeeds, where it ran out of
 * descriptors before; with the hard limit 8 above what is open, a second block's export is refused,
 * naming the descriptors, and opens none. */
TEST(ipc_export_makes_room_for_its_descriptors) {
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        use_sim_growth(1 * GiB, "map_ahead_mb:0,small_pool_kb:0");
        void *a = NULL, *b = NULL;
        unsigned char handle[2048];
        size_t length = 0, offset = 0;
        if (vram_malloc(&a, 64 * MiB, 0) != VRAM_OK || vram_malloc(&b, 64 * MiB, 0) != VRAM_OK) _exit(2);
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        size_t open = fds_open();
        rl.rlim_cur = open + 8;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(3);
        if (vram_ipc_export(a, handle, sizeof handle, &length, &offset) != VRAM_OK) _exit(4);
        if (length != 32 + 32 * 24) _exit(5);
        getrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < open + 32 + 64 || fds_open() < open + 32) _exit(6);   /* (the simulated driver */
                                                                                /* keeps one more a piece) */
        rl.rlim_cur = rl.rlim_max = fds_open() + 8;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(7);
        size_t before = fds_open();
        if (vram_ipc_export(b, handle, sizeof handle, &length, &offset) != VRAM_ERR_CONFLICT) _exit(8);
        if (strstr(vram_last_error(), "needs 32 more file descriptors") == NULL) _exit(9);
        if (fds_open() != before) _exit(10);
        _exit(vram_free(a) == VRAM_OK && vram_free(b) == VRAM_OK ? 0 : 11);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK_INT(WIFEXITED(status) ? WEXITSTATUS(status) : -1, ==, 0);
}

TEST(ipc_refusals) {
    growth_1gib();
    unsigned char handle[256] = {0};
    size_t length = 0, offset = 0;
    void *a = NULL, *p = NULL;
    int local = 0;
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_ipc_export(&local, handle, sizeof handle, &length, &offset));
    CHECK_ERROR_CONTAINS("not allocated by vram");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_ipc_export(NULL, handle, sizeof handle, &length, &offset));
    CHECK_OK(vram_malloc(&a, 2 * MiB, 0));
    CHECK_STATUS(VRAM_ERR_INVALID_POINTER, vram_ipc_export((char *)a + 256, handle, sizeof handle, &length, &offset));
    CHECK_ERROR_CONTAINS("not a live block");
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_ipc_open(0, handle, 80, &p));   /* zeros */
    CHECK_ERROR_CONTAINS("not a handle of vram_ipc_export");
    CHECK_OK(vram_ipc_export(a, handle, sizeof handle, &length, &offset));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_ipc_open(0, handle, length + 1, &p));   /* a wrong length */
    CHECK_STATUS(VRAM_ERR_UNRECOGNIZED_DEVICE, vram_ipc_open(3, handle, length, &p));
    CHECK_STATUS(VRAM_ERR_INVALID_ARGUMENT, vram_ipc_open(0, NULL, length, &p));
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}

TEST(ipc_plain_memory_on_the_simulated_card) {
    use_sim("16GiB");
    vram_logical_device_configuration cfg = {64};     /* one plain region */
    CHECK_OK(vram_set_logical_device_configuration(0, &cfg, 1));
    void *a = NULL;
    unsigned char handle[256];
    size_t length = 0, offset = 0;
    CHECK_OK(vram_malloc(&a, 1 * MiB, 0));
    CHECK_STATUS(VRAM_ERR_UNSUPPORTED, vram_ipc_export(a, handle, sizeof handle, &length, &offset));
    CHECK_ERROR_CONTAINS("cuIpcGetMemHandle");        /* the driver's call, by name */
    CHECK_OK(vram_free(a));
    CHECK_ALL();
}
