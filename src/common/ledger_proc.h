/*
 * ledger_proc.h: what ledger.c calls of ledger_proc.c beyond ledger.h (the ledger's own files;
 * nothing else includes this). Both touch a file's slots under the ledger lock only.
 */
#ifndef VRAM_SHIM_LEDGER_PROC_H
#define VRAM_SHIM_LEDGER_PROC_H

#include <stdint.h>

#include "ledger.h"

/* The live slot of (pid, start_time, device) among `slots` (LEDGER_SLOTS of them), or NULL. */
ledger_slot *vram__ledger_slot_find(ledger_slot *slots, int pid, uint64_t start_time, int device);

/* Into the file at fd (fresh, rebuilt or replaced): the live slots of the file moved aside (old_fd,
 * or -1) and those running processes still map or shadow; the number carried over. */
int vram__ledger_carry_slots(ledger *l, int fd, int old_fd);

#endif /* VRAM_SHIM_LEDGER_PROC_H */
