/*
 * cli.c: command-line helpers shared by the vram commands (see cli.h).
 */
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
