/*
 * ipc.h: the handle that shares a block with another process (vram_ipc_export / vram_ipc_open),
 * written by the exporting pool (arena.c, vmm.c) and read by the importing process (ipc.c).
 *
 * Layout (host byte order: both processes run on one machine): an ipc_head, then for a block of
 * growth's reserved range `n` ipc_pieces (the physical extents under the block, as file descriptors
 * of the exporting process, which a receiver takes with pidfd_getfd), or for a plain region the
 * driver's 64-byte IPC handle of the region. The receiver maps the pieces at their offsets in a
 * range of `span` bytes of its own; the block lies at the offset vram_ipc_export returned.
 */
#ifndef VRAM_POOL_IPC_H
#define VRAM_POOL_IPC_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#define IPC_MAGIC "vramipc1"
#define IPC_PLAIN_BYTES 64
enum { IPC_VMM = 1, IPC_PLAIN = 2 };

typedef struct ipc_head {
    char     magic[8];
    uint32_t kind;         /* IPC_VMM or IPC_PLAIN */
    int32_t  pid;          /* the exporting process */
    uint64_t span;         /* bytes the receiver maps */
    uint32_t n;            /* IPC_VMM: pieces that follow */
    uint32_t reserved;
} ipc_head;

typedef struct ipc_piece {
    int32_t  fd;           /* in the exporting process */
    uint32_t reserved;
    uint64_t offset, size; /* within the span */
} ipc_piece;

/* ipc.c: maps another process's handle on backend device `dev` (*ptr: the start of the span) and
 * unmaps it again; every failure says why and leaves nothing mapped. */
vram_status vram__ipc_open(const vram__backend *be, int dev, const void *handle, size_t length, void **ptr);
vram_status vram__ipc_close(const vram__backend *be, void *ptr);
/* ipc.c: room for `need` more file descriptors in this process (an exporter's new pieces): the soft
 * RLIMIT_NOFILE raised (to twice itself at least, at most the hard limit) when open descriptors, the
 * new ones and a spare of 64 would pass it; VRAM_ERR_CONFLICT saying so when the hard limit is too
 * low. Unknown counts (no /proc) pass: the driver's refusal then says why. */
vram_status vram__ipc_fd_room(size_t need);

#endif /* VRAM_POOL_IPC_H */
