/*
 * cli.c: command-line helpers shared by the vram commands (see cli.h).
 */
#include <string.h>

#include "cli.h"

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
