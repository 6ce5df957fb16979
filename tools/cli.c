/*
 * cli.c: command-line helpers shared by the vram commands (see cli.h).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "vram.h"

int cli_size(const char *value, size_t *bytes) {
    return vram_parse_size(value, bytes) == VRAM_OK && *bytes > 0 ? 0 : -1;
}

const char *cli_option_value(int argc, char **argv, int *i, const char *name, int *missing) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    *missing = 0;
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != '\0') return NULL;
    if (*i + 1 < argc) return argv[++*i];
    *missing = 1;
    return NULL;
}

void cli_short_reason(const char *msg, char *out, size_t len) {
    size_t o = 0;
    int depth = 0;
    if (len == 0) return;
    for (const char *c = msg ? msg : ""; *c && o + 1 < len; c++) {
        if (*c == '(') { depth++; continue; }
        if (*c == ')') { if (depth) depth--; continue; }
        if (depth) continue;
        if (*c == '.' && (c[1] == ' ' || c[1] == '\0')) break;   /* the end of the first sentence */
        out[o++] = *c;
    }
    while (o > 0 && out[o - 1] == ' ') o--;                     /* "found (detail)." leaves "found " */
    out[o] = '\0';
}
