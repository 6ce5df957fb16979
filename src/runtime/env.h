/*
 * env.h: the runtime's environment variables, read when the runtime starts (and VRAM_BACKEND when
 * devices are first listed). A malformed value is an error naming the variable and the value;
 * nothing is ever silently ignored.
 */
#ifndef VRAM_RUNTIME_ENV_H
#define VRAM_RUNTIME_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "pool/pool.h"

#define VRAM_MAX_DEVICES 64

typedef struct vram__env_size {
    int    set;
    size_t bytes;
    char   text[96];     /* "VRAM_MEMORY_LIMIT=6GiB", for messages */
} vram__env_size;

/* Allocator options (vram_set_alloc_conf / VRAM_ALLOC_CONF). */
typedef struct vram__alloc_conf {
    int      vmm;               /* -1 auto (use it where supported), 0 off, 1 on */
    uint64_t idle_release_ms;   /* 0: keep cached memory */
    size_t   extent_mb;         /* largest physical extent growth maps at once (0: the default) */
    int      hold_peak;         /* growth gives idle extents back rather than raise its high-water mark */
    size_t   hold_large_mb;     /* ... for requests of at least this many MiB only (0: none) */
    size_t   map_ahead_mb;      /* growth maps up to this much beyond a block (reserved / 16 at most) */
    long long thread_cache_mb;  /* MiB of freed blocks one thread cache parks; -1: limit / 256, at most 64 MiB */
    int      arenas;            /* most arenas a growth pool spreads its threads over */
    size_t   small_pool_kb;     /* growth by mapping: requests up to this many KiB get a zone of their own */
} vram__alloc_conf;

#define VRAM_ALLOC_CONF_INIT {.vmm = -1, .map_ahead_mb = 64, .thread_cache_mb = -1, \
                              .arenas = VRAM_POOL_MAX_ARENAS, .small_pool_kb = 256}
#define VRAM_ALLOC_CONF_DEFAULT ((vram__alloc_conf)VRAM_ALLOC_CONF_INIT)

/* Parses "vmm:false,idle_release_ms:500" on top of `base` (NULL: the defaults): keys the string
 * names replace base's; `origin` names the source in messages. */
vram_status vram__alloc_conf_parse(const char *text, const char *origin, const vram__alloc_conf *base,
                                   vram__alloc_conf *out);
/* Whether two option sets mean the same (auto vmm counts as on). */
int         vram__alloc_conf_equal(const vram__alloc_conf *a, const vram__alloc_conf *b);

typedef struct vram__env {
    int            force_growth;                 /* -1 unset, else 0/1 (VRAM_FORCE_ALLOW_GROWTH) */
    vram__env_size limit_all;                    /* VRAM_MEMORY_LIMIT */
    vram__env_size limit_dev[VRAM_MAX_DEVICES];  /* VRAM_MEMORY_LIMIT_<i> */
    int            fraction_set;                 /* VRAM_MEMORY_FRACTION */
    double         fraction;
    char           fraction_text[96];
    const char      *alloc_conf_text;            /* VRAM_ALLOC_CONF (validated), or NULL */
} vram__env;

/* VRAM_BACKEND: cuda (default) or sim. */
vram_status vram__env_backend(const vram__backend **out);
/* Everything else; `ndev` bounds VRAM_MEMORY_LIMIT_<i>. */
vram_status vram__env_read(vram__env *env, int ndev);
/* VRAM_MEMBARRIER: 1 unless it is false ("0", "false", ...) or malformed (vram__env_read refuses a
 * malformed one at start; until then, without membarrier is the safe side). */
int         vram__env_membarrier(void);

#endif /* VRAM_RUNTIME_ENV_H */
