/*
 * common.h: what every layer of libvram shares: the status table, the thread-local error
 * message, size parsing and formatting. Internal names use the `vram__` prefix; nothing here is
 * exported from the shared library.
 */
#ifndef VRAM_COMMON_H
#define VRAM_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "vram.h"

#define VRAM_MIB ((size_t)1 << 20)
#define VRAM_GIB ((size_t)1 << 30)

/* Room for a description of where a limit came from ("VRAM_MEMORY_LIMIT=6GiB", ...). */
#define VRAM_SOURCE_LEN 160

#if defined(__GNUC__)
#define VRAM_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define VRAM_NOINLINE __attribute__((noinline))
#else
#define VRAM_PRINTF(f, a)
#define VRAM_NOINLINE
#endif

/* Sets this thread's last-error message and returns `s`, so that failures read
 * `return vram__fail(VRAM_ERR_..., "...", ...);`. */
vram_status vram__fail(vram_status s, const char *fmt, ...) VRAM_PRINTF(2, 3);
vram_status vram__vfail(vram_status s, const char *fmt, va_list ap);

/* Prepends "<prefix>: " to this thread's current message (keeping the cause) and returns s. */
vram_status vram__fail_wrap(vram_status s, const char *fmt, ...) VRAM_PRINTF(2, 3);

/* Formats bytes for messages: "13.59 GiB (14592024576 bytes)" style, short form "13.59 GiB". */
void vram__format_bytes(char *buf, size_t len, size_t bytes);

/* A setting of the environment with two names, one vocabulary for the library, the preload library and
 * `vram run`: `name`, the one read first (VRAM_LIMIT, VRAM_LIMIT_<i>, VRAM_GROWTH), and `old`, the older
 * name the library used alone, still read (VRAM_MEMORY_LIMIT, VRAM_MEMORY_LIMIT_<i>,
 * VRAM_FORCE_ALLOW_GROWTH). Returns the value of `name` when it is set (empty included: a malformed
 * value is the caller's to refuse), else `old`'s,
 * else NULL; *used: the name of the value returned; *other: `old`'s value when both are set (the
 * caller refuses the pair when the two mean different things), else NULL. */
const char *vram__getenv_either(const char *name, const char *old, const char **used, const char **other);

/* Parses a boolean environment value: true/false/1/0/yes/no/on/off. 0 on success. */
int vram__parse_bool(const char *text, int *value);
/* Parses a duration: a number (a decimal point allowed) and a unit, ms, s, m, h or d (none:
 * seconds): "30", "90s", "1.5h", "500ms". 0 with *ns set (more than 0, at most a year), else -1. */
int vram__parse_duration(const char *text, uint64_t *ns);
/* strtod in the "C" locale whatever the program's (a decimal point, never a comma): sizes and
 * fractions mean the same in every locale. */
double vram__strtod_c(const char *text, char **end);

/* Size arithmetic that cannot overflow: 0 when a + b would, else 1. */
static inline int vram__add_ok(size_t a, size_t b, size_t *sum) {
    if (a > SIZE_MAX - b) return 0;
    *sum = a + b;
    return 1;
}

static inline size_t vram__round_up(size_t x, size_t unit) {  /* unit is a power of two */
    return (x + unit - 1) & ~(unit - 1);
}

#endif /* VRAM_COMMON_H */
