/*
 * size_fuzz.c: libFuzzer harness for vram_parse_size (sizes come from users: environment variables,
 * the CLI, Python). A parsed size must print back to a value that parses to the same bytes.
 * Built with the other fuzzers (VRAM_BUILD_FUZZERS=ON with clang); run build-fuzz/size_fuzz -max_total_time=60.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vram.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char text[256];
    if (size >= sizeof text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    size_t bytes = 0, again = 0;
    if (vram_parse_size(text, &bytes) != VRAM_OK) return 0;
    char printed[32];
    snprintf(printed, sizeof printed, "%zu", bytes);
    if (vram_parse_size(printed, &again) != VRAM_OK || again != bytes) abort();
    return 0;
}
