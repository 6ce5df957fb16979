/*
 * visible.h: CUDA_VISIBLE_DEVICES as the driver reads it, one entry at a time: the list is split at
 * commas and each entry classified (an index, a "GPU-" UUID or prefix of one, a "MIG-" instance,
 * something else). What an entry then names (which card, whether the list ends there) is the
 * caller's: `vram run --devices` checks that every entry is well formed (vram__visible_valid), the
 * preload shim maps entries to NVML's cards before CUDA is loaded (shim/nvml.c), the simulated
 * backend picks its cards by them (backend/sim_env.c). Shared by the library (its simulated
 * backend and CLI) and the shim (compiled into both, hidden); no state, no locks.
 */
#ifndef VRAM_COMMON_VISIBLE_H
#define VRAM_COMMON_VISIBLE_H

#include <stddef.h>

typedef enum vram_visible_kind {
    VRAM_VISIBLE_OTHER = 0,   /* empty, or neither an index nor a UUID */
    VRAM_VISIBLE_INDEX,       /* decimal digits only: a card index (value in `index`) */
    VRAM_VISIBLE_GPU,         /* starts with "GPU-" (any case): a card's UUID or a prefix of one */
    VRAM_VISIBLE_MIG          /* starts with "MIG-" (any case): a MIG instance */
} vram_visible_kind;

typedef struct vram_visible_entry {
    const char *text;          /* the entry, not NUL-terminated: [text, text + len) */
    size_t len;
    vram_visible_kind kind;
    unsigned long long index;  /* VRAM_VISIBLE_INDEX: its value (ULLONG_MAX when it overflows) */
    int well_formed;           /* an index, or "GPU-"/"MIG-" (upper case) and 1+ of [0-9A-Za-z/-] */
} vram_visible_entry;

/* The next entry of the list at *cursor (start it at the variable's value; NULL is the end):
 * 1 with *e filled and *cursor moved past it, 0 at the end. "a,,b" has an empty middle entry and
 * "a," an empty last one; "" is one empty entry. */
int vram__visible_next(const char **cursor, vram_visible_entry *e);

/* Classifies the entry [e->text, e->text + e->len) again (kind, index, well_formed), for a caller
 * that changed its span (the simulated backend trims blanks off it). */
void vram__visible_classify(vram_visible_entry *e);

/* 1 when every entry of `list` is well formed (none empty), else 0. */
int vram__visible_valid(const char *list);

#endif /* VRAM_COMMON_VISIBLE_H */
