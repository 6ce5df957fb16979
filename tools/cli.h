/*
 * cli.h: what the vram commands share for reading their command lines.
 */
#ifndef VRAM_TOOLS_CLI_H
#define VRAM_TOOLS_CLI_H

/* The value of option `name` at argv[*i], given as "NAME VALUE" (then *i moves to the value) or
 * "NAME=VALUE"; NULL when argv[*i] is not that option, or with *missing set when it is but has
 * no value. */
const char *cli_option_value(int argc, char **argv, int *i, const char *name, int *missing);

#include <stddef.h>

/* A SIZE option's value ("512M", "6GiB", "1.5G") into *bytes: 0 when it is one and more than 0, else
 * -1 (say "bad size '%s' (" CLI_SIZE_HINT ")"). */
int cli_size(const char *value, size_t *bytes);
#define CLI_SIZE_HINT "try 512M, 6GiB, 1.5G; more than 0"

#endif /* VRAM_TOOLS_CLI_H */
