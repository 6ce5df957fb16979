/*
 * env.c: reads and validates the VRAM_* environment variables (see env.h and README.md), and parses
 * allocator option strings by the table VRAM_ALLOC_CONF_OPTIONS (env.h), whose keys and value forms
 * it also gives out (vram_alloc_conf_option, public). No state of its own, no locks.
 */
#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/env.h"

extern char **environ;

vram_status vram__env_backend(const vram__backend **out) {
    const char *v = getenv("VRAM_BACKEND");
    if (v == NULL || strcmp(v, "cuda") == 0) {
        *out = &vram__backend_cuda;
    } else if (strcmp(v, "sim") == 0) {
        *out = &vram__backend_sim;
    } else {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_BACKEND='%s' is not valid: use 'cuda' (the default) "
                          "or 'sim' (a simulated GPU)", v);
    }
    return VRAM_OK;
}

static vram_status read_size(const char *name, const char *value, vram__env_size *out) {
    if (vram_parse_size(value, &out->bytes) != VRAM_OK) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s='%s' is not a valid size: use bytes or a number with "
                          "K, M, G or T (powers of 1024), e.g. %s=6GiB", name, value, name);
    }
    if (out->bytes == 0) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s='%s': a limit must be larger than zero (unset the "
                          "variable for no limit)", name, value);
    }
    out->set = 1;
    snprintf(out->text, sizeof out->text, "%.40s=%.40s", name, value);
    return VRAM_OK;
}

/* Two names of one setting both set to values that mean different things (vram__getenv_either). */
static vram_status names_disagree(const char *name, const char *value, const char *old, const char *old_value) {
    return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s='%s' and %s='%s' disagree: they name one setting (%s is its "
                      "older name); unset one of them", name, value, old, old_value, old);
}

/* VRAM_GROWTH, else VRAM_FORCE_ALLOW_GROWTH (its older name). */
static vram_status read_growth(vram__env *env) {
    const char *used = NULL, *other = NULL;
    const char *v = vram__getenv_either("VRAM_GROWTH", "VRAM_FORCE_ALLOW_GROWTH", &used, &other);
    env->force_growth = -1;
    if (v == NULL) return VRAM_OK;
    if (vram__parse_bool(v, &env->force_growth) != 0) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s='%s' is not valid: use 'true' or 'false'", used, v);
    }
    int old = 0;
    if (other != NULL && (vram__parse_bool(other, &old) != 0 || old != env->force_growth)) {
        return names_disagree(used, v, "VRAM_FORCE_ALLOW_GROWTH", other);
    }
    return VRAM_OK;
}

/* A card's limit or every card's: `name` (VRAM_LIMIT, VRAM_LIMIT_<i>), else `old` (VRAM_MEMORY_LIMIT,
 * VRAM_MEMORY_LIMIT_<i>); both set, they must be the same size. */
static vram_status read_limit(const char *name, const char *old, vram__env_size *out) {
    const char *used = NULL, *other = NULL;
    const char *v = vram__getenv_either(name, old, &used, &other);
    if (v == NULL) return VRAM_OK;
    vram_status s = read_size(used, v, out);
    if (s != VRAM_OK || other == NULL) return s;
    vram__env_size o;
    s = read_size(old, other, &o);
    if (s == VRAM_OK && o.bytes != out->bytes) s = names_disagree(name, v, old, other);
    return s;
}

static vram_status read_fraction(vram__env *env) {
    const char *v = getenv("VRAM_MEMORY_FRACTION");
    if (v == NULL) return VRAM_OK;
    char *end = NULL;
    errno = 0;
    double f = vram__strtod_c(v, &end);
    while (end != NULL && isspace((unsigned char)*end)) end++;
    if (errno != 0 || end == v || *end != '\0' || !(f > 0.0 && f <= 1.0)) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_MEMORY_FRACTION='%s' is not valid: use a fraction of "
                          "each card's memory, 0 < f <= 1 (e.g. 0.5)", v);
    }
    env->fraction_set = 1;
    env->fraction = f;
    snprintf(env->fraction_text, sizeof env->fraction_text, "VRAM_MEMORY_FRACTION=%.40s", v);
    return VRAM_OK;
}

/* VRAM_LIMIT_<i>=SIZE (VRAM_LIMIT_MAX aside: a ceiling, read_ledger) and VRAM_MEMORY_LIMIT_<i>=SIZE for
 * every i in the environment: each must name a card; both names of one card, the same size. */
static vram_status read_device_limits(vram__env *env, int ndev) {
    static const char *const prefixes[] = { "VRAM_LIMIT_", "VRAM_MEMORY_LIMIT_" };
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        for (int k = 0; k < 2; k++) {
            size_t plen = strlen(prefixes[k]);
            if (strncmp(*e, prefixes[k], plen) != 0 || (k == 0 && strncmp(*e, "VRAM_LIMIT_MAX=", 15) == 0)) continue;
            const char *idx = *e + plen;
            const char *eq = strchr(idx, '=');
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(eq ? eq - *e : (long)strlen(*e)), *e);
            char *end = NULL;
            long i = isdigit((unsigned char)idx[0]) ? strtol(idx, &end, 10) : -1;   /* (no sign, no space) */
            if (eq == NULL || end != eq || end == idx || i < 0 || i >= ndev) {
                return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s: there is no physical device %.*s (%d visible to "
                                  "the driver); the variable must be %s<index>", name,
                                  (int)(eq ? eq - idx : (long)strlen(idx)), idx, ndev, prefixes[k]);
            }
            if (k == 1) continue;   /* read with its card's VRAM_LIMIT_<i> below */
            char old[64];
            snprintf(old, sizeof old, "VRAM_MEMORY_LIMIT_%ld", i);
            vram_status s = read_limit(name, old, &env->limit_dev[i]);
            if (s != VRAM_OK) return s;
        }
    }
    for (char **e = environ; e != NULL && *e != NULL; e++) {   /* an older name alone */
        if (strncmp(*e, "VRAM_MEMORY_LIMIT_", 18) != 0) continue;
        long i = strtol(*e + 18, NULL, 10);                     /* (checked above) */
        if (env->limit_dev[i].set) continue;
        char name[64];
        snprintf(name, sizeof name, "VRAM_MEMORY_LIMIT_%ld", i);
        vram_status s = read_size(name, strchr(*e, '=') + 1, &env->limit_dev[i]);
        if (s != VRAM_OK) return s;
    }
    return VRAM_OK;
}

static vram_status conf_value_error(const char *origin, const char *key, const char *value, const char *want) {
    return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s: '%s:%s' is not valid: %s", origin, key, value, want);
}

/* A whole number in [min, max], decimal digits alone (no sign, no space): 0 on success. */
static int parse_whole(const char *value, unsigned long long min, unsigned long long max, unsigned long long *out) {
    char *end = NULL;
    errno = 0;
    if (!isdigit((unsigned char)value[0])) return -1;
    unsigned long long n = strtoull(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || n < min || n > max) return -1;
    *out = n;
    return 0;
}

/* One option of VRAM_ALLOC_CONF_OPTIONS (env.h): its key, kind, range and what a bad value is told;
 * set stores a parsed value in its field, same compares the field of two sets. */
enum { CONF_BOOL, CONF_WHOLE, CONF_PLACE };
static const struct conf_option {
    const char        *key;
    int                kind;
    unsigned long long min, max;
    const char        *want;
} conf_options[] = {
#define CONF_OPTION(key, kind, type, def, min, max, want) {#key, CONF_##kind, min, max, want},
    VRAM_ALLOC_CONF_OPTIONS(CONF_OPTION)
#undef CONF_OPTION
};
enum { CONF_OPTIONS = (int)(sizeof conf_options / sizeof conf_options[0]) };

int vram_alloc_conf_option(int i, const char **key, const char **value) {
    if (i < 0 || i >= CONF_OPTIONS) return 0;
    if (key != NULL) *key = conf_options[i].key;
    if (value != NULL) {
        *value = conf_options[i].kind == CONF_BOOL ? "true|false" : conf_options[i].kind == CONF_PLACE ? "none|host"
                                                                                                      : "N";
    }
    return 1;
}

static void conf_set(vram__alloc_conf *c, int opt, unsigned long long n) {
    int i = 0;
#define CONF_SET(key, kind, type, def, min, max, want) if (opt == i++) { c->key = (type)n; return; }
    VRAM_ALLOC_CONF_OPTIONS(CONF_SET)
#undef CONF_SET
}

/* A true boolean option compares as on or off (auto vmm, -1, counts as on); a number as itself. */
#define CONF_SAME_BOOL(x, y) (((x) != 0) == ((y) != 0))
#define CONF_SAME_WHOLE(x, y) ((x) == (y))
#define CONF_SAME_PLACE(x, y) ((x) == (y))

/* A PLACE value: none 0, host 1 (as written, no other spelling). */
static int parse_place(const char *value, unsigned long long *out) {
    if (strcmp(value, "none") != 0 && strcmp(value, "host") != 0) return -1;
    *out = strcmp(value, "host") == 0;
    return 0;
}

/* One key:value pair of an allocator option string. */
static vram_status conf_apply(const char *key, const char *value, const char *origin, vram__alloc_conf *c) {
    for (int opt = 0; opt < CONF_OPTIONS; opt++) {
        const struct conf_option *o = &conf_options[opt];
        unsigned long long n = 0;
        if (strcmp(key, o->key) != 0) continue;
        int on = 0;
        if (o->kind == CONF_BOOL    ? vram__parse_bool(value, &on) != 0
            : o->kind == CONF_PLACE ? parse_place(value, &n) != 0
                                    : parse_whole(value, o->min, o->max, &n) != 0) {
            char want[160];
            snprintf(want, sizeof want, o->want, o->max);
            return conf_value_error(origin, key, value, want);
        }
        conf_set(c, opt, o->kind == CONF_BOOL ? (unsigned long long)on : n);
        return VRAM_OK;
    }
    char known[256] = "";
    for (int opt = 0; opt < CONF_OPTIONS; opt++) {
        size_t at = strlen(known);
        snprintf(known + at, sizeof known - at, "%s%s", opt ? ", " : "", conf_options[opt].key);
    }
    return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s: unknown option '%s' in '%s:%s' (known: %s)", origin, key, key,
                      value, known);
}

int vram__alloc_conf_equal(const vram__alloc_conf *a, const vram__alloc_conf *b) {
#define CONF_SAME(key, kind, type, def, min, max, want) CONF_SAME_##kind(a->key, b->key) &&
    return VRAM_ALLOC_CONF_OPTIONS(CONF_SAME) 1;
#undef CONF_SAME
}

vram_status vram__alloc_conf_parse(const char *text, const char *origin, const vram__alloc_conf *base,
                                   vram__alloc_conf *out) {
    vram__alloc_conf c = base ? *base : VRAM_ALLOC_CONF_DEFAULT;
    char buf[512];
    if (text != NULL && strlen(text) >= sizeof buf) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s: the option string is too long", origin);
    }
    snprintf(buf, sizeof buf, "%s", text ? text : "");
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*item)) item++;
        if (*item == '\0') continue;
        char *colon = strchr(item, ':');
        if (colon == NULL) {
            return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s: '%s' is not key:value (e.g. vmm:false)", origin, item);
        }
        *colon = '\0';
        char *value = colon + 1;
        for (char *t = colon - 1; t >= item && isspace((unsigned char)*t); t--) *t = '\0';
        while (isspace((unsigned char)*value)) value++;
        for (char *t = value + strlen(value); t > value && isspace((unsigned char)t[-1]); t--) t[-1] = '\0';
        vram_status s = conf_apply(item, value, origin, &c);
        if (s != VRAM_OK) return s;
    }
    *out = c;
    return VRAM_OK;
}

/* What `vram run` and the Slurm plugin give a process for the ledger (runtime/limits.c), checked as the
 * preload library checks them (env.h). */
static vram_status read_ledger(vram__env *env) {
    const char *v = getenv("VRAM_GROUP");
    vram_status s = VRAM_OK;
    if (v != NULL && v[0] != '\0') {
        if (!vram__ledger_valid_group(v)) {
            return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_GROUP='%s' is not valid: use 1 to %d of A-Z a-z 0-9 . _ -",
                              v, LEDGER_NAME_LEN - 1);
        }
        snprintf(env->group, sizeof env->group, "%s", v);
    }
    static const struct { const char *name; size_t offset; } sizes[] = {
        { "VRAM_GROUP_LIMIT", offsetof(vram__env, group_limit) },
        { "VRAM_LIMIT_MAX", offsetof(vram__env, limit_max) },
        { "VRAM_GROUP_LIMIT_MAX", offsetof(vram__env, group_limit_max) },
    };
    for (size_t k = 0; s == VRAM_OK && k < sizeof sizes / sizeof sizes[0]; k++) {
        if ((v = getenv(sizes[k].name)) != NULL && v[0] != '\0')
            s = read_size(sizes[k].name, v, (vram__env_size *)((char *)env + sizes[k].offset));
    }
    v = getenv("VRAM_PRIORITY");
    if (s == VRAM_OK && v != NULL && v[0] != '\0') {
        if (strcmp(v, "guaranteed") == 0) {
            env->priority = LEDGER_PRIORITY_GUARANTEED;
        } else if (strcmp(v, "opportunistic") == 0) {
            env->priority = LEDGER_PRIORITY_OPPORTUNISTIC;
        } else {
            s = vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_PRIORITY='%s' is not valid: use 'guaranteed' or "
                           "'opportunistic'", v);
        }
    }
    v = getenv("VRAM_LEDGER_DIR");
    env->ledger_dir_set = v != NULL && v[0] != '\0';
    env->overflow = -1;
    env->overflow_max_mb = -1;
    v = getenv("VRAM_OVERFLOW");
    if (s == VRAM_OK && v != NULL) {
        if (strcmp(v, "host") == 0 || strcmp(v, "none") == 0) {
            env->overflow = v[0] == 'h';
        } else {
            s = vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_OVERFLOW='%s' is not valid: use 'host' (overflow to host "
                           "memory) or 'none'", v);
        }
    }
    v = getenv("VRAM_OVERFLOW_MAX");
    size_t bytes = 0;
    if (s == VRAM_OK && v != NULL) {
        if (vram_parse_size(v, &bytes) != VRAM_OK) {
            s = vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_OVERFLOW_MAX='%s' is not a valid size: use bytes or a "
                           "number with K, M, G or T (0: no overflow at all)", v);
        } else {
            env->overflow_max_mb = (long long)((bytes + VRAM_MIB - 1) / VRAM_MIB);
        }
    }
    return s;
}

/* VRAM_MEMBARRIER into *on (1 when unset); -1 when it is malformed. */
static int read_membarrier(int *on) {
    const char *v = getenv("VRAM_MEMBARRIER");
    *on = 1;
    return v == NULL ? 0 : vram__parse_bool(v, on);
}

int vram__env_membarrier(void) {
    int on;
    return read_membarrier(&on) == 0 && on;
}

vram_status vram__env_read(vram__env *env, int ndev) {
    memset(env, 0, sizeof *env);
    vram_status s = read_growth(env);
    int on;
    if (s == VRAM_OK && read_membarrier(&on) != 0) {
        s = vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_MEMBARRIER='%s' is not valid: use 'true' or 'false' "
                       "(false: every call fences itself instead of membarrier)", getenv("VRAM_MEMBARRIER"));
    }
    if (s == VRAM_OK) s = read_limit("VRAM_LIMIT", "VRAM_MEMORY_LIMIT", &env->limit_all);
    if (s == VRAM_OK) s = read_fraction(env);
    if (s == VRAM_OK) s = read_device_limits(env, ndev);
    if (s == VRAM_OK) s = read_ledger(env);
    const char *conf = getenv("VRAM_ALLOC_CONF");
    vram__alloc_conf checked;
    if (s == VRAM_OK && conf != NULL) {
        s = vram__alloc_conf_parse(conf, "VRAM_ALLOC_CONF", NULL, &checked);
        env->alloc_conf_text = conf;
    }
    return s;
}
