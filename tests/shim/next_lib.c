/*
 * next_lib.c: a library that defines rand() (as interposers do) and looks up the next rand with
 * dlsym(RTLD_NEXT, ...). Loaded after libvram_preload.so, it must get libc's rand, not its own:
 * that holds only if the preload library's dlsym forwards with the caller's return address.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <stdlib.h>

int next_lib_rtld_next_ok(void);

int rand(void) { return 4; }

int next_lib_rtld_next_ok(void) {
    void *next = dlsym(RTLD_NEXT, "rand");
    return next != NULL && next != (void *)rand;
}
