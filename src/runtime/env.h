/*
 * env.h: the runtime's environment variables, read when the runtime starts (and VRAM_BACKEND when
 * devices are first listed). A malformed value is an error naming the variable and the value;
 * nothing is ever silently ignored.
 */
#ifndef VRAM_RUNTIME_ENV_H
#define VRAM_RUNTIME_ENV_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "common/ledger.h"
#include "pool/pool.h"

#define VRAM_MAX_DEVICES 64

typedef struct vram__env_size {
    int    set;
    size_t bytes;
    char   text[96];     /* "VRAM_MEMORY_LIMIT=6GiB", for messages */
} vram__env_size;

/* Allocator options (vram_set_alloc_conf / VRAM_ALLOC_CONF), one line each:
 *   X(key, kind, type, default, min, max, want)
 * key names the option and its field in vram__alloc_conf; kind is BOOL (true|false, ...: min and max
 * unused), WHOLE (decimal digits alone, in [min, max]) or PLACE (none or host: 0 or 1); want is what a bad value is told (a printf
 * format given max). The struct, its defaults, the parser, the equality check, the list of known
 * keys in the unknown-option message and vram_alloc_conf_option (from which `vram --help` lists the
 * keys) come from it, in this order. What each option means for the pool: runtime.c's pool
 * configuration; for users: vram_set_alloc_conf in vram.h and README.md (checked to name every key
 * by the test env_alloc_conf_options_documented). */
#define VRAM_ALLOC_CONF_OPTIONS(X)                                                                  \
    /* -1 auto (use it where supported), 0 off, 1 on */                                             \
    X(vmm, BOOL, int, -1, 0, 1, "use true or false")                                                \
    /* growth gives idle extents back rather than raise its high-water mark */                     \
    X(hold_peak, BOOL, int, 0, 0, 1, "use true or false")                                           \
    /* 0: keep cached memory */                                                                     \
    X(idle_release_ms, WHOLE, uint64_t, 0, 0, ULLONG_MAX,                                           \
      "use a whole number of milliseconds (0 keeps memory)")                                       \
    /* largest physical extent growth maps at once (0: the default) */                             \
    X(extent_mb, WHOLE, size_t, 0, 1, 1u << 20,                                                     \
      "use a whole number of MiB from 1 (rounded up to the device's granularity, 2 MiB on an H200)") \
    /* hold_peak for requests of at least this many MiB only (0: none) */                          \
    X(hold_large_mb, WHOLE, size_t, 0, 0, 1u << 20, "use a whole number of MiB (0: never for a size alone)") \
    /* growth maps up to this much beyond a block (reserved / 16 at most) */                       \
    X(map_ahead_mb, WHOLE, size_t, 64, 0, 1u << 20, "use a whole number of MiB (0: map only what blocks need)") \
    /* growth by mapping: requests up to this many KiB get a zone of their own */                  \
    X(small_pool_kb, WHOLE, size_t, 256, 0, 1u << 20,                                               \
      "use a whole number of KiB up to 1048576 (0: small requests share the large ones' range)")  \
    /* MiB of freed blocks one thread cache parks; -1: limit / 256, at most 64 MiB */              \
    X(thread_cache_mb, WHOLE, long long, -1, 0, 1u << 20, "use a whole number of MiB (0: no thread caches)") \
    /* most arenas a growth pool spreads its threads over */                                       \
    X(arenas, WHOLE, int, VRAM_POOL_MAX_ARENAS, 1, VRAM_POOL_MAX_ARENAS,                            \
      "use a whole number from 1 (every thread in one arena) to %llu")                             \
    /* growth by mapping: find the repeating step and place it from its plan (on by default) */     \
    X(plan, BOOL, int, 1, 0, 1, "use true or false")                                                \
    /* where a request the device cannot serve goes: none (it fails) or host memory mapped for the  \
       device (1) */                                                                                \
    X(overflow, PLACE, int, 0, 0, 1, "use host (overflow to host memory) or none")                  \
    /* MiB of host memory the overflow may hold at once; -1: the logical device's limit */          \
    X(overflow_max_mb, WHOLE, long long, -1, 0, 1u << 30, "use a whole number of MiB (0: no overflow at all)")

typedef struct vram__alloc_conf {
#define VRAM_ALLOC_CONF_FIELD_(key, kind, type, def, min, max, want) type key;
    VRAM_ALLOC_CONF_OPTIONS(VRAM_ALLOC_CONF_FIELD_)
#undef VRAM_ALLOC_CONF_FIELD_
} vram__alloc_conf;

#define VRAM_ALLOC_CONF_DEFAULT_(key, kind, type, def, min, max, want) .key = (def),
#define VRAM_ALLOC_CONF_INIT {VRAM_ALLOC_CONF_OPTIONS(VRAM_ALLOC_CONF_DEFAULT_)}
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
    /* the ledger (runtime/limits.c: whether and how the process is listed; what `vram run` and the Slurm
     * plugin set, read as the preload library reads them) */
    char           group[LEDGER_NAME_LEN];       /* VRAM_GROUP, "" none */
    vram__env_size group_limit;                  /* VRAM_GROUP_LIMIT */
    vram__env_size limit_max;                    /* VRAM_LIMIT_MAX: the most a limit set from outside may be */
    vram__env_size group_limit_max;              /* VRAM_GROUP_LIMIT_MAX */
    int            priority;                     /* VRAM_PRIORITY: LEDGER_PRIORITY_* */
    int            ledger_dir_set;               /* VRAM_LEDGER_DIR is set */
    /* overflow to host memory as `vram run --overflow` sets it: the allocator options overflow and
     * overflow_max_mb under VRAM_ALLOC_CONF's (runtime.c, apply_alloc_conf_wlocked) */
    int            overflow;                     /* VRAM_OVERFLOW: -1 unset, 0 none, 1 host */
    long long      overflow_max_mb;              /* VRAM_OVERFLOW_MAX in MiB (rounded up), -1 unset */
} vram__env;

/* VRAM_BACKEND: cuda (default) or sim. */
vram_status vram__env_backend(const vram__backend **out);
/* Everything else; `ndev` bounds VRAM_MEMORY_LIMIT_<i>. */
vram_status vram__env_read(vram__env *env, int ndev);
/* VRAM_MEMBARRIER: 1 unless it is false ("0", "false", ...) or malformed (vram__env_read refuses a
 * malformed one at start; until then, without membarrier is the safe side). */
int         vram__env_membarrier(void);

#endif /* VRAM_RUNTIME_ENV_H */
