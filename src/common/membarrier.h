/*
 * membarrier.h: the process-wide fence of asymmetric synchronization (membarrier.c). A thread on a
 * hot path writes a flag and reads another with a compiler barrier only; the rare thread on the
 * other side runs membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), a full fence on every running
 * thread of the process, between its own write and read. Used by the runtime's reader marks
 * (runtime.c) and the arena lock's bias (pool/lock.c). State: one flag, set once registration
 * succeeded (it holds for the process and its forks); no locks.
 */
#ifndef VRAM_COMMON_MEMBARRIER_H
#define VRAM_COMMON_MEMBARRIER_H

/* Registers the process for expedited private membarrier: 1 when the kernel has it (then
 * vram__membarrier_ready() is 1 from now on), 0 when not. */
int  vram__membarrier_register(void);
int  vram__membarrier_ready(void);
/* The fence on every running thread of the process (registered only). Should the kernel refuse it
 * after the registration, registers again and retries, and failing that aborts: a thread's flag
 * could be missed. */
void vram__membarrier_fence(void);

#endif /* VRAM_COMMON_MEMBARRIER_H */
