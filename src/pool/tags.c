/*
 * tags.c: the process-wide table of tags, the names a program gives its allocations with
 * vram_set_tag (pool.h). A tag is numbered from 1 in the order it was first set and kept until the
 * process ends, so that a thread's record holds a number, a pool looks its tag's arena up by number,
 * and a name handed out (vram_get_tag) stays valid.
 *
 * Invariants: names[0 .. count) are distinct, valid names; an entry is written once, before count
 * covers it (release), so readers that load count (acquire) read its name without the lock.
 * Lock: tags_lock serialises interning only.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "pool/pool.h"

static pthread_mutex_t tags_lock = PTHREAD_MUTEX_INITIALIZER;
static char            names[VRAM_POOL_MAX_TAGS][VRAM_POOL_TAG_MAX + 1];
static atomic_uint     count;

/* Why `name` is no tag, or NULL: empty, too long, or a byte that is not printable ASCII (a tag is
 * printed in messages and `vram` output). */
static const char *malformed(const char *name) {
    size_t n = strnlen(name, VRAM_POOL_TAG_MAX + 1);
    if (n == 0) return "a tag is not empty";
    if (n > VRAM_POOL_TAG_MAX) return "a tag has at most 63 bytes";
    for (size_t i = 0; i < n; i++) {
        if (name[i] < 0x20 || name[i] > 0x7e) return "a tag is printable ASCII (no control character)";
    }
    return NULL;
}

/* The number of a valid name among the first n tags, or 0. */
static unsigned lookup(const char *name, unsigned n) {
    for (unsigned i = 0; i < n; i++) {
        if (strcmp(names[i], name) == 0) return i + 1;
    }
    return 0;
}

unsigned vram__tag_find(const char *name) {
    if (name == NULL || malformed(name) != NULL) return 0;
    return lookup(name, atomic_load_explicit(&count, memory_order_acquire));
}

vram_status vram__tag_check(const char *call, const char *name) {
    const char *why = malformed(name);
    if (why == NULL) return VRAM_OK;
    char shown[VRAM_POOL_TAG_MAX + 1];
    size_t k = 0;
    for (const char *c = name; *c != '\0' && k < 24; c++) shown[k++] = *c >= 0x20 && *c <= 0x7e ? *c : '?';
    shown[k] = '\0';
    return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s(\"%s%s\"): %s", call, shown, strlen(name) > k ? "..." : "", why);
}

vram_status vram__tag_intern(const char *call, const char *name, unsigned *id) {
    vram_status bad = vram__tag_check(call, name);
    if (bad != VRAM_OK) return bad;
    unsigned found = vram__tag_find(name);
    if (found != 0) {
        *id = found;
        return VRAM_OK;
    }
    vram_status s = VRAM_OK;
    pthread_mutex_lock(&tags_lock);
    unsigned n = atomic_load_explicit(&count, memory_order_relaxed);
    found = lookup(name, n);                       /* (another thread may have interned it meanwhile) */
    if (found == 0 && n == VRAM_POOL_MAX_TAGS) {
        s = vram__fail(VRAM_ERR_CONFLICT, "%s(\"%s\"): this process has %d tags already, the most there can be",
                       call, name, VRAM_POOL_MAX_TAGS);
    } else if (found == 0) {
        memcpy(names[n], name, strlen(name) + 1);
        atomic_store_explicit(&count, n + 1, memory_order_release);
        found = n + 1;
    }
    pthread_mutex_unlock(&tags_lock);
    if (s == VRAM_OK) *id = found;
    return s;
}

const char *vram__tag_name(unsigned id) {
    if (id == 0 || id > atomic_load_explicit(&count, memory_order_acquire)) return NULL;
    return names[id - 1];
}
