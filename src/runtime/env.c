/*
 * env.c: reads and validates the VRAM_* environment variables (see env.h and README.md).
 */
#include <ctype.h>
#include <errno.h>
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

static vram_status read_growth(vram__env *env) {
    const char *v = getenv("VRAM_FORCE_ALLOW_GROWTH");
    env->force_growth = -1;
    if (v == NULL) return VRAM_OK;
    if (vram__parse_bool(v, &env->force_growth) != 0) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_FORCE_ALLOW_GROWTH='%s' is not valid: use 'true' or "
                          "'false'", v);
    }
    return VRAM_OK;
}

static vram_status read_fraction(vram__env *env) {
    const char *v = getenv("VRAM_MEMORY_FRACTION");
    if (v == NULL) return VRAM_OK;
    char *end = NULL;
    errno = 0;
    double f = strtod(v, &end);
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

/* VRAM_MEMORY_LIMIT_<i>=SIZE for every i in the environment. */
static vram_status read_device_limits(vram__env *env, int ndev) {
    static const char prefix[] = "VRAM_MEMORY_LIMIT_";
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, prefix, sizeof prefix - 1) != 0) continue;
        const char *idx = *e + sizeof prefix - 1;
        const char *eq = strchr(idx, '=');
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(eq ? eq - *e : (long)strlen(*e)), *e);
        char *end = NULL;
        long i = strtol(idx, &end, 10);
        if (eq == NULL || end != eq || end == idx || i < 0 || i >= ndev) {
            return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s: there is no physical device %.*s (%d visible to "
                              "the driver); the variable must be VRAM_MEMORY_LIMIT_<index>", name,
                              (int)(eq ? eq - idx : (long)strlen(idx)), idx, ndev);
        }
        vram_status s = read_size(name, eq + 1, &env->limit_dev[i]);
        if (s != VRAM_OK) return s;
    }
    return VRAM_OK;
}

vram_status vram__env_read(vram__env *env, int ndev) {
    memset(env, 0, sizeof *env);
    vram_status s = read_growth(env);
    if (s == VRAM_OK && getenv("VRAM_MEMORY_LIMIT") != NULL) {
        s = read_size("VRAM_MEMORY_LIMIT", getenv("VRAM_MEMORY_LIMIT"), &env->limit_all);
    }
    if (s == VRAM_OK) s = read_fraction(env);
    if (s == VRAM_OK) s = read_device_limits(env, ndev);
    return s;
}
