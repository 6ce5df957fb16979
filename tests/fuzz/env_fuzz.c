/*
 * env_fuzz.c: libFuzzer harness for the runtime's environment (vram__env_read: VRAM_MEMORY_LIMIT,
 * VRAM_MEMORY_LIMIT_<i>, VRAM_MEMORY_FRACTION, VRAM_FORCE_ALLOW_GROWTH, VRAM_MEMBARRIER,
 * VRAM_ALLOC_CONF) and the allocator options parser (vram__alloc_conf_parse, vram_set_alloc_conf).
 * An input is lines; the first byte of a line picks the variable (0 VRAM_MEMORY_LIMIT, 1 _FRACTION,
 * 2 VRAM_ALLOC_CONF, 3 VRAM_FORCE_ALLOW_GROWTH, 4 VRAM_MEMBARRIER, 5 VRAM_MEMORY_LIMIT_<name> with
 * "<name>=<value>" after it), the rest is its value. Checked: a refusal has a message; an accepted
 * limit is never 0 (0 would mean none), a fraction lies in (0, 1]; accepted options parse again to
 * the same, are idempotent on top of themselves, and vram_set_alloc_conf (before the start) agrees
 * with the parser. The variables set are cleared after each input (one process, one thread).
 * Built with the other fuzzers (VRAM_BUILD_FUZZERS=ON with clang):
 *   build-fuzz/env_fuzz -max_total_time=60 tests/fuzz/corpus/env
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/env.h"
#include "vram.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NDEV 4

static const char *const fixed[] = { "VRAM_MEMORY_LIMIT", "VRAM_MEMORY_FRACTION", "VRAM_ALLOC_CONF",
                                     "VRAM_FORCE_ALLOW_GROWTH", "VRAM_MEMBARRIER" };

static void die(const char *what, const char *text) {
    fprintf(stderr, "env_fuzz: %s (%s)\n", what, text ? text : "");
    abort();
}

static void check_conf(const char *conf) {
    vram__alloc_conf a, b, c;
    vram_status s = vram__alloc_conf_parse(conf, "env_fuzz", NULL, &a);
    if (s != VRAM_OK) {
        if (!vram_last_error()[0]) die("options refused without a message", conf);
        if (vram_set_alloc_conf(conf) == VRAM_OK) die("vram_set_alloc_conf accepts what the parser refuses", conf);
        return;
    }
    if (vram__alloc_conf_parse(conf, "env_fuzz", NULL, &b) != VRAM_OK || !vram__alloc_conf_equal(&a, &b))
        die("options parse differently twice", conf);
    if (vram__alloc_conf_parse(conf, "env_fuzz", &a, &c) != VRAM_OK || !vram__alloc_conf_equal(&a, &c))
        die("options on top of themselves change", conf);
    if (vram_set_alloc_conf(conf) != VRAM_OK) die("vram_set_alloc_conf refuses what the parser accepts", conf);
    vram_set_alloc_conf(NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int once;
    if (!once) {
        once = 1;
        for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) unsetenv(fixed[k]);
    }
    if (size > 4096) return 0;
    char *text = malloc(size + 1), *names[16];
    int nnames = 0;
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    const char *conf_line = NULL;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        unsigned pick = (unsigned char)line[0] % 6;
        const char *value = line + 1;
        if (pick < 5) {
            setenv(fixed[pick], value, 1);
            if (pick == 2) conf_line = value;
        } else if (nnames < 16) {
            const char *eq = strchr(value, '=');
            if (!eq || eq - value > 40 || memchr(value, '=', (size_t)(eq - value)) != NULL) continue;
            char name[64];
            snprintf(name, sizeof name, "VRAM_MEMORY_LIMIT_%.*s", (int)(eq - value), value);
            if (setenv(name, eq + 1, 1) == 0) names[nnames++] = strdup(name);
        }
    }
    vram__env env;
    vram_status s = vram__env_read(&env, NDEV);
    if (s != VRAM_OK) {
        if (!vram_last_error()[0]) die("environment refused without a message", text);
    } else {
        if (env.limit_all.set && env.limit_all.bytes == 0) die("VRAM_MEMORY_LIMIT accepted as 0 (no limit)", text);
        for (int i = 0; i < VRAM_MAX_DEVICES; i++) {
            if (env.limit_dev[i].set && env.limit_dev[i].bytes == 0) die("a device limit accepted as 0", text);
            if (env.limit_dev[i].set && i >= NDEV) die("a limit for a device that is not there", text);
        }
        if (env.fraction_set && !(env.fraction > 0.0 && env.fraction <= 1.0)) die("fraction out of (0, 1]", text);
        if (getenv("VRAM_ALLOC_CONF") && !env.alloc_conf_text) die("VRAM_ALLOC_CONF dropped", text);
    }
    if (conf_line) check_conf(getenv("VRAM_ALLOC_CONF"));
    for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) unsetenv(fixed[k]);
    for (int i = 0; i < nnames; i++) {
        unsetenv(names[i]);
        free(names[i]);
    }
    free(text);
    return 0;
}
