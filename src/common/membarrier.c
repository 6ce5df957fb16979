/*
 * membarrier.c: the process-wide fence of asymmetric synchronization (see membarrier.h).
 */
#include "common/membarrier.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#endif

static atomic_int ready;

int vram__membarrier_register(void) {
#if defined(__linux__) && defined(SYS_membarrier)
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) ||
        !(cmds & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) ||
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) != 0) {
        return 0;
    }
    atomic_store(&ready, 1);
    return 1;
#else
    return 0;
#endif
}

int vram__membarrier_ready(void) {
    return atomic_load_explicit(&ready, memory_order_acquire);
}

void vram__membarrier_fence(void) {
#if defined(__linux__) && defined(SYS_membarrier)
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) != 0 &&
        (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) != 0 ||
         syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) != 0)) {
        fprintf(stderr, "vram: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after it was registered; "
                        "set VRAM_MEMBARRIER=0 to run without it\n");
        abort();
    }
#endif
}
