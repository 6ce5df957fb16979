/*
 * status.c: the status names and default messages (from VRAM_STATUS_MAP in vram.h), the
 * thread-local last-error message, and the small parsers and formatters every layer uses.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <locale.h>
#include <pthread.h>

#include "common/common.h"

/* (the table, VRAM_STATUS_MAP, is in include/vram.h) */
const char *vram_status_name(vram_status s) {
    switch (s) {
#define VRAM_NAME_CASE(name, value, msg) case VRAM_##name: return "VRAM_" #name;
        VRAM_STATUS_MAP(VRAM_NAME_CASE)
#undef VRAM_NAME_CASE
    }
    return "VRAM_ERR_UNKNOWN";
}

static const char *status_message(vram_status s) {
    switch (s) {
#define VRAM_MSG_CASE(name, value, msg) case VRAM_##name: return msg;
        VRAM_STATUS_MAP(VRAM_MSG_CASE)
#undef VRAM_MSG_CASE
    }
    return "unknown status";
}

const char *vram_version_string(void) {
    return "0.1.0";
}

static _Thread_local char last_error[2048];

const char *vram_last_error(void) {
    return last_error;
}

vram_status vram__vfail(vram_status s, const char *fmt, va_list ap) {
    if (fmt == NULL) {
        snprintf(last_error, sizeof last_error, "%s", status_message(s));
    } else {
        vsnprintf(last_error, sizeof last_error, fmt, ap);
    }
    return s;
}

vram_status vram__fail(vram_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vram__vfail(s, fmt, ap);
    va_end(ap);
    return s;
}

vram_status vram__fail_wrap(vram_status s, const char *fmt, ...) {
    char cause[sizeof last_error];
    char prefix[512];
    va_list ap;
    memcpy(cause, last_error, sizeof cause);
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    int n = snprintf(last_error, sizeof last_error, "%s: ", prefix);
    if (n > 0 && (size_t)n < sizeof last_error) {
        memcpy(last_error + n, cause, sizeof last_error - (size_t)n - 1);
        last_error[sizeof last_error - 1] = '\0';
    }
    return s;
}

void vram__format_bytes(char *buf, size_t len, size_t bytes) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) {
        snprintf(buf, len, "%zu B", bytes);
    } else {
        snprintf(buf, len, "%.2f %s", v, units[u]);
    }
}

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void c_locale_make(void) {
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

double vram__strtod_c(const char *text, char **end) {
    pthread_once(&c_locale_once, c_locale_make);
    /* (newlocale of "C" cannot fail but for host memory; the program's locale is then the fallback) */
    return c_locale != (locale_t)0 ? strtod_l(text, end, c_locale) : strtod(text, end);
}

const char *vram__getenv_either(const char *name, const char *old, const char **used, const char **other) {
    const char *v = getenv(name), *o = getenv(old);
    *used = v != NULL ? name : o != NULL ? old : NULL;
    *other = v != NULL ? o : NULL;
    return v != NULL ? v : o;
}

int vram__parse_bool(const char *text, int *value) {
    static const char *yes[] = {"true", "1", "yes", "on"};
    static const char *no[] = {"false", "0", "no", "off"};
    if (text == NULL) return -1;
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(text, yes[i]) == 0) { *value = 1; return 0; }
        if (strcasecmp(text, no[i]) == 0) { *value = 0; return 0; }
    }
    return -1;
}

int vram__parse_duration(const char *text, uint64_t *ns) {
    static const struct { const char *unit; double ns; } units[] = {
        { "", 1e9 }, { "ms", 1e6 }, { "s", 1e9 }, { "m", 60e9 }, { "h", 3600e9 }, { "d", 86400e9 },
    };
    if (text == NULL || !(isdigit((unsigned char)*text) || *text == '.')) return -1;
    char *end = NULL;
    double v = vram__strtod_c(text, &end);
    if (end == text || !isfinite(v) || v <= 0) return -1;
    for (const char *c = text; c < end; c++)   /* digits and one point only: no sign, hex or exponent */
        if (!isdigit((unsigned char)*c) && *c != '.') return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].unit) != 0) continue;
        double t = v * units[i].ns;
        if (t < 1e6 || t > 366.0 * 86400e9) return -1;   /* at least a millisecond, at most a year */
        *ns = (uint64_t)t;
        return 0;
    }
    return -1;
}

/* The unit at *end (none; B; K, M, G or T, each with an optional i and an optional B after it): its
 * power of two, with *end moved past it; -1 for an unknown unit. */
static int size_unit(const char **end) {
    const char *e = *end;
    int shift = 0;
    switch (toupper((unsigned char)*e)) {
    case '\0': break;
    case 'B': if (e[1] == '\0') { e++; } break;
    case 'K': shift = 10; e++; break;
    case 'M': shift = 20; e++; break;
    case 'G': shift = 30; e++; break;
    case 'T': shift = 40; e++; break;
    default: return -1;
    }
    if (shift != 0) {
        if (*e == 'i' || *e == 'I') {
            e++;
            if (*e != 'B' && *e != 'b') return -1;
        }
        if (*e == 'B' || *e == 'b') e++;
    }
    *end = e;
    return shift;
}

/* "512", "4K", "4KB", "4KiB", "1.5G", "2 TiB"; units are powers of 1024. */
vram_status vram_parse_size(const char *text, size_t *bytes) {
    if (text == NULL || bytes == NULL) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_parse_size: text and bytes must not be NULL");
    }
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    if (!isdigit((unsigned char)*p) && *p != '.') {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "malformed size '%s': expected a number with an "
                          "optional unit K, M, G or T (e.g. 6GiB)", text);
    }
    /* Decimal digits with at most one '.', nothing else (no sign, hex or exponent). */
    const char *end = p;
    int dots = 0, digits = 0;
    for (; isdigit((unsigned char)*end) || (*end == '.' && dots == 0); end++) {
        if (*end == '.') dots++; else digits++;
    }
    if (digits == 0) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "malformed size '%s'", text);
    }
    int whole = dots == 0;
    double number = vram__strtod_c(p, NULL);
    while (isspace((unsigned char)*end)) end++;
    int shift = size_unit(&end);
    if (shift < 0) return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "malformed size '%s': unknown unit", text);
    while (isspace((unsigned char)*end)) end++;
    if (*end != '\0') {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "malformed size '%s': unexpected '%s'", text, end);
    }
    if (whole) {
        errno = 0;
        unsigned long long n = strtoull(p, NULL, 10);
        if (errno == ERANGE || (shift > 0 && n > (SIZE_MAX >> shift))) {
            return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "size '%s' is too large", text);
        }
        *bytes = (size_t)n << shift;
        return VRAM_OK;
    }
    double v = ldexp(number, shift);
    if (v >= 18446744073709551616.0) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "size '%s' is too large", text);
    }
    *bytes = (size_t)v;
    return VRAM_OK;
}
