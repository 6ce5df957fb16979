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

/* The first sentence of a library message without its parenthesized details (the no-GPU reason
 * "no NVIDIA driver: libcuda.so.1 not found (dlerror...). Is this...? ... To run without a GPU set
 * VRAM_BACKEND=sim." becomes "no NVIDIA driver: libcuda.so.1 not found"), for one-line messages. */
void cli_short_reason(const char *msg, char *out, size_t len);

/* What the tools say after a no-GPU reason. */
#define CLI_NO_GPU_HINT "set VRAM_BACKEND=sim to use a simulated GPU (in a container, start it with GPU access: docker --gpus all)"

#endif /* VRAM_TOOLS_CLI_H */
