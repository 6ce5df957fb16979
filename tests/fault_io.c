/*
 * fault_io.c: a fault injector for the trace reader of `vram replay` / `vram report`, loaded with
 * LD_PRELOAD (tests/cli_test.sh). It makes the two failures a reader meets in the field happen on
 * demand:
 *   FAULT_IO_REALLOC_ABOVE=N   realloc() of more than N bytes fails with ENOMEM, as on a heap that
 *                              is exhausted (getline grows its buffer with realloc: a line longer
 *                              than N bytes cannot be read);
 *   FAULT_IO_READ_FD=FD        read() on descriptor FD fails with EIO once FAULT_IO_READ_OK calls
 *   FAULT_IO_READ_OK=K         (default 1) have succeeded on it, as on a failing disk or terminal.
 * Unset variables inject nothing. Built without the sanitizers (tests/CMakeLists.txt), so that it can
 * be loaded into the sanitizer builds' vram (with ASAN_OPTIONS=verify_asan_link_order=0) and into the
 * gzip that vram starts. No locks: the read counter is atomic, the rest is read-only after the first
 * call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    long n = strtol(v, &end, 10);
    return *end ? dflt : n;
}

void *realloc(void *p, size_t n) {
    static void *(*real)(void *, size_t);
    if (!real) real = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    long above = env_long("FAULT_IO_REALLOC_ABOVE", -1);
    if (above >= 0 && n > (size_t)above) {
        errno = ENOMEM;
        return NULL;
    }
    return real(p, n);
}

ssize_t read(int fd, void *buf, size_t n) {
    static ssize_t (*real)(int, void *, size_t);
    static atomic_long done;
    if (!real) real = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
    if (fd == env_long("FAULT_IO_READ_FD", -1) &&
        atomic_fetch_add(&done, 1) >= env_long("FAULT_IO_READ_OK", 1)) {
        errno = EIO;
        return -1;
    }
    return real(fd, buf, n);
}
