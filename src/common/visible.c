/*
 * visible.c: splitting and classifying CUDA_VISIBLE_DEVICES (see visible.h). No state.
 */
#include "common/visible.h"

#include <limits.h>
#include <string.h>
#include <strings.h>

static int visible_uuid_char(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '/';
}

void vram__visible_classify(vram_visible_entry *e) {
    const char *b = e->text, *end = e->text + e->len;
    int digits = e->len > 0;
    unsigned long long n = 0;
    for (const char *c = b; c < end && digits; c++) {
        digits = *c >= '0' && *c <= '9';
        unsigned d = (unsigned)(*c - '0');
        n = n > (ULLONG_MAX - d) / 10 ? ULLONG_MAX : n * 10 + d;
    }
    e->kind = VRAM_VISIBLE_OTHER;
    e->index = 0;
    e->well_formed = 0;
    if (digits) {
        e->kind = VRAM_VISIBLE_INDEX;
        e->index = n;
        e->well_formed = 1;
        return;
    }
    if (e->len < 4) return;
    if (strncasecmp(b, "GPU-", 4) == 0) e->kind = VRAM_VISIBLE_GPU;
    else if (strncasecmp(b, "MIG-", 4) == 0) e->kind = VRAM_VISIBLE_MIG;
    else return;
    int ok = e->len > 4 && (strncmp(b, "GPU-", 4) == 0 || strncmp(b, "MIG-", 4) == 0);
    for (const char *c = b + 4; c < end && ok; c++) ok = visible_uuid_char(*c);
    e->well_formed = ok;
}

int vram__visible_next(const char **cursor, vram_visible_entry *e) {
    const char *p = *cursor;
    if (p == NULL) return 0;
    size_t len = strcspn(p, ",");
    e->text = p;
    e->len = len;
    vram__visible_classify(e);
    *cursor = p[len] == ',' ? p + len + 1 : NULL;
    return 1;
}

int vram__visible_valid(const char *list) {
    vram_visible_entry e;
    for (const char *p = list; vram__visible_next(&p, &e);)
        if (!e.well_formed) return 0;
    return 1;
}
