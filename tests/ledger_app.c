/*
 * ledger_app.c: a libvram program driven line by line, for tests/ledger_lib_test.sh (the library in the
 * ledger: `vram limit PID` and groups reaching a program that allocates through libvram). Its
 * configuration is the environment's (VRAM_BACKEND=sim, VRAM_SIM_SHARED, VRAM_LIMIT, VRAM_ALLOC_CONF, ...);
 * commands on stdin, one answer line each on stdout:
 *   start       the runtime started (vram_get_memory_info)  -> start=OK | start=ERR <message>
 *   alloc MIB   vram_malloc of MIB MiB on logical device 0 -> alloc=OK | alloc=ERR <message>
 *   free        vram_free of the newest block kept          -> free=OK | free=ERR <message> | free=NONE
 *   trim        vram_trim(0, 0): the cached memory back to the card -> trim=OK | trim=ERR <message>
 *   info        -> current= reserved= limit= live_limit= over_limit= overflow= overflows=  (bytes, counts)
 *   quit        frees every block and shuts the runtime down -> quit=OK | quit=ERR <message>
 * No state but the blocks it keeps; one thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram.h"

int main(void) {
    static void *blocks[4096];
    int n = 0;
    char line[256];
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin) != NULL) {
        vram_status s = VRAM_OK;
        if (strncmp(line, "start", 5) == 0) {
            vram_memory_info info;
            s = vram_get_memory_info(0, &info);
            printf("start=%s%s\n", s == VRAM_OK ? "OK" : "ERR ", s == VRAM_OK ? "" : vram_last_error());
        } else if (strncmp(line, "alloc ", 6) == 0) {
            size_t mib = strtoull(line + 6, NULL, 10);
            void *p = NULL;
            s = n < 4096 ? vram_malloc(&p, mib << 20, 0) : VRAM_ERR_INTERNAL;
            if (s == VRAM_OK) blocks[n++] = p;
            printf("alloc=%s%s\n", s == VRAM_OK ? "OK" : "ERR ", s == VRAM_OK ? "" : vram_last_error());
        } else if (strncmp(line, "free", 4) == 0) {
            if (n == 0) {
                printf("free=NONE\n");
                continue;
            }
            s = vram_free(blocks[--n]);
            printf("free=%s%s\n", s == VRAM_OK ? "OK" : "ERR ", s == VRAM_OK ? "" : vram_last_error());
        } else if (strncmp(line, "trim", 4) == 0) {
            s = vram_trim(0, 0);
            printf("trim=%s%s\n", s == VRAM_OK ? "OK" : "ERR ", s == VRAM_OK ? "" : vram_last_error());
        } else if (strncmp(line, "info", 4) == 0) {
            vram_memory_info i;
            s = vram_get_memory_info(0, &i);
            if (s != VRAM_OK) {
                printf("info=ERR %s\n", vram_last_error());
                continue;
            }
            printf("current=%zu reserved=%zu limit=%zu live_limit=%zu over_limit=%zu overflow=%zu overflows=%llu\n",
                   i.current, i.reserved, i.limit, i.live_limit, i.over_limit, i.overflow_bytes,
                   (unsigned long long)i.num_overflows);
        } else if (strncmp(line, "quit", 4) == 0) {
            while (n > 0 && s == VRAM_OK) s = vram_free(blocks[--n]);
            if (s == VRAM_OK) s = vram_shutdown();
            printf("quit=%s%s\n", s == VRAM_OK ? "OK" : "ERR ", s == VRAM_OK ? "" : vram_last_error());
            return s == VRAM_OK ? 0 : 1;
        } else {
            printf("unknown=%s", line);
        }
    }
    return 0;
}
