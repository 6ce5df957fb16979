/*
 * truncate_on_lock.c: a fault injector for the ledger's readers, loaded with LD_PRELOAD into
 * `vram top`. The Nth flock(fd, LOCK_EX) of the process (TRUNCATE_ON_LOCK_N, default 2: the first is
 * vram__ledger_open's, the second the lock under which top reads the slots) truncates the file
 * TRUNCATE_ON_LOCK_PATH to 0 bytes once the lock is held, as another process of the user may do at any
 * moment: the reader then finds its mapping past the file's end. Owns nothing else; no locks of its own
 * (the counter is only touched by the program's own, serialised, ledger calls).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

int flock(int fd, int op) {
    static int calls;
    int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");
    int r = real ? real(fd, op) : -1;
    const char *path = getenv("TRUNCATE_ON_LOCK_PATH"), *n = getenv("TRUNCATE_ON_LOCK_N");
    if (r == 0 && (op & LOCK_EX) && path && ++calls == (n ? atoi(n) : 2) && truncate(path, 0) != 0) {
        /* nothing to truncate: the reader is simply not faulted */
    }
    return r;
}
