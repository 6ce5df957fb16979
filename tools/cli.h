/*
 * cli.h: what the vram commands share for reading their command lines.
 */
#ifndef VRAM_TOOLS_CLI_H
#define VRAM_TOOLS_CLI_H

/* The value of option `name` at argv[*i], given as "NAME VALUE" (then *i moves to the value) or
 * "NAME=VALUE"; NULL when argv[*i] is not that option, or with *missing set when it is but has
 * no value. */
const char *cli_option_value(int argc, char **argv, int *i, const char *name, int *missing);

#endif /* VRAM_TOOLS_CLI_H */
