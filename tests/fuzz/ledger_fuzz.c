/*
 * ledger_fuzz.c: libFuzzer harness for the ledger reader (src/common/ledger.c): what vram__ledger_open does with a
 * file any process of the user may have written (header checks, rebuild, the live slots carried over,
 * the slots' liveness and names), and what vram top and a group limit then read. The first input byte
 * picks how the rest becomes the file: 0 the bytes as they are (any size), 1 over a valid fresh
 * ledger from offset 0 (a damaged header, slots), 2 into the slots of a valid header (the header's
 * checksum kept right, so the slots themselves are read). Checked: vram__ledger_open never fails on a
 * private, safe directory; the file is then whole, with a valid header; every slot left live after a
 * reclaim names a running process; names copy out printable and NUL-terminated; a group total never
 * wraps. One private XDG_RUNTIME_DIR per fuzzing process; the files moved aside are removed after
 * each input. One thread.
 * Built with the other fuzzers (VRAM_BUILD_FUZZERS=ON with clang):
 *   build-fuzz/ledger_fuzz -max_total_time=60 tests/fuzz/corpus/ledger
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/ledger.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FILE_SIZE LEDGER_FILE_SIZE

static char dir[PATH_MAX], path[PATH_MAX + 16];

static void die(const char *what) {
    fprintf(stderr, "ledger_fuzz: %s\n", what);
    abort();
}

static char top[64];

static void remove_aside(void);

/* At exit: the private directory goes (what a rebuild moved aside, the files, the directories). */
static void teardown(void) {
    char p[PATH_MAX + 32];
    remove_aside();
    snprintf(p, sizeof p, "%s.lock", path);
    unlink(path);
    unlink(p);
    rmdir(dir);
    rmdir(top);
}

static void setup(void) {
    char tmpl[] = "/tmp/ledger_fuzz.XXXXXX";
    if (!mkdtemp(tmpl)) die("mkdtemp");
    snprintf(top, sizeof top, "%s", tmpl);
    atexit(teardown);
    setenv("XDG_RUNTIME_DIR", tmpl, 1);
    snprintf(dir, sizeof dir, "%s/vram", tmpl);
    snprintf(path, sizeof path, "%s/ledger", dir);
    ledger l;
    char err[512];
    if (vram__ledger_open(&l, err, sizeof err) != 0) die(err);   /* makes the directory and a fresh file */
    vram__ledger_close(&l);
}

static void write_file(const uint8_t *data, size_t size) {
    unsigned mode = size ? data[0] % 3 : 0;
    if (size) data++, size--;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) die("open");
    if (mode == 0) {
        if (size && write(fd, data, size) != (ssize_t)size) die("write");
    } else {
        ledger_header h;
        vram__ledger_header_init(&h);
        if (ftruncate(fd, (off_t)FILE_SIZE) != 0 || pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) die("init");
        off_t at = mode == 1 ? 0 : (off_t)sizeof h;
        if (size > FILE_SIZE - (size_t)at) size = FILE_SIZE - (size_t)at;
        if (size && pwrite(fd, data, size, at) != (ssize_t)size) die("pwrite");
    }
    close(fd);
}

static void remove_aside(void) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "ledger.bad.", 11) != 0) continue;
        char p[PATH_MAX + 300];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready;
    if (!ready) {
        setup();
        ready = 1;
    }
    if (size > FILE_SIZE + 1) return 0;
    write_file(data, size);
    ledger l;
    char err[512];
    if (vram__ledger_open(&l, err, sizeof err) != 0) die(err);
    struct stat st;
    if (fstat(l.fd, &st) != 0 || (size_t)st.st_size != FILE_SIZE) die("the ledger is not whole after opening");
    if (l.hdr->magic != LEDGER_MAGIC || l.hdr->version != LEDGER_VERSION || l.hdr->nslots != LEDGER_SLOTS ||
        l.hdr->checksum != vram__ledger_checksum(l.hdr))
        die("the ledger's header is not valid after opening");
    vram__ledger_lock(&l);
    vram__ledger_reclaim_locked(&l);
    for (uint32_t i = 0; i < LEDGER_SLOTS; i++) {
        const ledger_slot *s = &l.slots[i];
        if (s->state == 0) continue;
        if (!vram__ledger_slot_alive(s)) die("a slot left after a reclaim is not alive");
        char name[LEDGER_UUID_LEN];
        vram__ledger_copy_name(name, sizeof name, s->uuid, sizeof s->uuid);
        for (const char *c = name; *c; c++)
            if (*c < 0x20 || *c >= 0x7f) die("a name copied out unprintable");
        char group[LEDGER_NAME_LEN], uuid[LEDGER_UUID_LEN];
        vram__ledger_copy_name(group, sizeof group, s->group, sizeof s->group);
        vram__ledger_copy_name(uuid, sizeof uuid, s->uuid, sizeof s->uuid);
        (void)vram__ledger_group_total_locked(&l, group, uuid);
        /* the limits that move, read from whatever the file holds: the limit in force never above
         * the ceilings a set limit is held to, and a rebalance under any budget never wraps */
        uint64_t lim = vram__ledger_slot_limit(s), set = s->limit_set;
        if (set && !s->group_cap && s->limit_max && lim > s->limit_max) die("a set limit above its ceiling");
        if (s->group_cap && lim > s->group_cap) die("a limit above its group cap");
        if (group[0] && strlen(group) == strnlen(s->group, sizeof s->group)) {
            int opportunistic = 0;
            uint64_t budget = s->group_limit ? s->group_limit : 1;
            (void)vram__ledger_group_rebalance_locked(&l, group, uuid, budget, &opportunistic);
            if (s->priority == LEDGER_PRIORITY_OPPORTUNISTIC && s->group_cap > budget) die("a cap above the budget");
        }
    }
    /* a slot of this process's own (as the preload library claims them) fits and is found */
    uint64_t start = 0;
    if (vram__ledger_start_time((int)getpid(), &start) != 0) die("start time");
    ledger_slot *mine = vram__ledger_claim_locked(&l, (int)getpid(), start, 0, "GPU-fuzz", "g", "fuzz", 1, 2);
    if (mine) {
        mine->in_use = UINT64_MAX - 1;
        if (vram__ledger_find_locked(&l, (int)getpid(), start, 0) != mine) die("a claimed slot is not found");
        if (vram__ledger_group_total_locked(&l, "g", "GPU-fuzz") < UINT64_MAX - 1) die("a group total wrapped");
        /* a guaranteed member holding nearly everything: every opportunistic member of "g" on the card is
         * capped at 1 byte (never 0, which would read as none) */
        int opportunistic = 0;
        if (vram__ledger_group_rebalance_locked(&l, "g", "GPU-fuzz", 1ull << 30, &opportunistic) < UINT64_MAX - 1)
            die("a guaranteed total wrapped");
        for (uint32_t i = 0; i < LEDGER_SLOTS; i++) {
            const ledger_slot *s = &l.slots[i];
            if (s->state == LEDGER_SLOT_LIVE && s->priority == LEDGER_PRIORITY_OPPORTUNISTIC &&
                strncmp(s->group, "g", sizeof s->group) == 0 && strncmp(s->uuid, "GPU-fuzz", sizeof s->uuid) == 0 &&
                s->group_cap != 1)
                die("an opportunistic member not capped under a full budget");
        }
        vram__ledger_release_locked(mine, (int)getpid(), start);
    }
    vram__ledger_unlock(&l);
    vram__ledger_close(&l);
    remove_aside();
    return 0;
}
