/*
 * sim_env.c: the simulated backend's environment, read by open(): VRAM_SIM_DEVICES (the cards:
 * "[COUNT x]SIZE[@MAJOR.MINOR]" entries, comma separated, the compute capability 9.0 unless given),
 * VRAM_SIM_FAIL_ALLOC_AFTER and CUDA_VISIBLE_DEVICES (which cards, renumbered), and the UUID of a
 * card. CUDA_VISIBLE_DEVICES is split and its entries classified by common/visible.c, as the shim and
 * `vram run --devices` read it. Pure parsers into a sim_config: no state, no lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/sim_internal.h"
#include "common/visible.h"

/* ---- the environment ------------------------------------------------------------------------ */

static void sim_trim(const char **b, const char **e) {
    while (*b < *e && (**b == ' ' || **b == '\t')) (*b)++;
    while (*e > *b && ((*e)[-1] == ' ' || (*e)[-1] == '\t')) (*e)--;
}

/* [b, e) is 1 to 18 decimal digits. */
static int sim_digits(const char *b, const char *e, unsigned long long *value) {
    unsigned long long v = 0;
    if (e <= b || e - b > 18) return -1;
    for (const char *p = b; p < e; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (unsigned long long)(*p - '0');
    }
    *value = v;
    return 0;
}

static vram_status sim_devices_malformed(const char *text, const char *why) {
    if (why == NULL)
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_SIM_DEVICES='%s' is malformed: "
                          SIM_DEVICES_HINT, text);
    return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_SIM_DEVICES='%s' is malformed: "
                      SIM_DEVICES_HINT " (%s)", text, why);
}

/* "MAJOR.MINOR" in [b, e): a compute capability, MAJOR 1 to 99 (one or two digits), MINOR one digit. */
static int sim_parse_capability(const char *b, const char *e, int *major, int *minor) {
    const char *dot = memchr(b, '.', (size_t)(e - b));
    unsigned long long maj = 0, min = 0;
    sim_trim(&b, &e);
    if (dot == NULL || dot - b > 2 || e - dot != 2 || sim_digits(b, dot, &maj) != 0 ||
        sim_digits(dot + 1, e, &min) != 0 || maj == 0)
        return -1;
    *major = (int)maj;
    *minor = (int)min;
    return 0;
}

/* "[<count>x]<size>[@<major>.<minor>]" in [b, e); on failure *why may name the reason. */
static int sim_parse_entry(const char *b, const char *e, int *count, size_t *size, int *major,
                           int *minor, const char **why) {
    char buf[64];
    const char *x = b, *at = memchr(b, '@', (size_t)(e - b));
    unsigned long long n = 1;
    *major = SIM_DEFAULT_MAJOR;
    *minor = SIM_DEFAULT_MINOR;
    if (at != NULL) {
        if (sim_parse_capability(at + 1, e, major, minor) != 0) {
            *why = "a compute capability is MAJOR.MINOR after '@', e.g. 16GiB@8.6";
            return -1;
        }
        e = at;
    }
    sim_trim(&b, &e);
    while (x < e && *x != 'x' && *x != 'X') x++;
    if (x < e) {
        const char *cb = b, *ce = x;
        sim_trim(&cb, &ce);
        if (sim_digits(cb, ce, &n) != 0) return -1;
        if (n == 0) *why = "0 cards";
        if (n > SIM_MAX_CARDS) *why = "at most 64 cards";
        if (n == 0 || n > SIM_MAX_CARDS) return -1;
        b = x + 1;
    }
    if (e <= b || (size_t)(e - b) >= sizeof buf) return -1;
    memcpy(buf, b, (size_t)(e - b));
    buf[e - b] = '\0';
    if (vram_parse_size(buf, size) != VRAM_OK) return -1;
    if (*size == 0) *why = "a card of 0 bytes";
    *count = (int)n;
    return *size == 0 ? -1 : 0;
}

vram_status vram__sim_parse_devices(const char *text, sim_config *cfg) {
    cfg->ncards = 0;
    if (text == NULL) {
        cfg->ncards = 1;
        cfg->card_size[0] = SIM_DEFAULT_CARD;
        cfg->card_major[0] = SIM_DEFAULT_MAJOR;
        cfg->card_minor[0] = SIM_DEFAULT_MINOR;
        return VRAM_OK;
    }
    for (const char *p = text;;) {
        const char *e = p + strcspn(p, ","), *why = NULL;
        int count = 0, major = 0, minor = 0;
        size_t size = 0;
        if (sim_parse_entry(p, e, &count, &size, &major, &minor, &why) != 0)
            return sim_devices_malformed(text, why);
        if (cfg->ncards + count > SIM_MAX_CARDS)
            return sim_devices_malformed(text, "at most 64 cards");
        for (int i = 0; i < count; i++, cfg->ncards++) {
            cfg->card_size[cfg->ncards] = size;
            cfg->card_major[cfg->ncards] = major;
            cfg->card_minor[cfg->ncards] = minor;
        }
        if (*e == '\0') return VRAM_OK;
        p = e + 1;
    }
}

vram_status vram__sim_parse_fail_after(const char *text, sim_config *cfg) {
    cfg->fail_set = 0;
    if (text == NULL) return VRAM_OK;
    const char *b = text, *e = text + strlen(text);
    sim_trim(&b, &e);
    if (sim_digits(b, e, &cfg->fail_after) != 0)
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_SIM_FAIL_ALLOC_AFTER='%s' is malformed: "
                          "expected how many allocations succeed before every later one fails, "
                          "e.g. 3", text);
    cfg->fail_set = 1;
    return VRAM_OK;
}

static uint64_t sim_splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", a function of the card's original index alone. */
void vram__sim_uuid(int card, char *buf, size_t len) {
    uint64_t hi = sim_splitmix(0x7672616d2d73696dULL + (uint64_t)card);   /* "vram-sim" */
    uint64_t lo = sim_splitmix(hi);
    snprintf(buf, len, "GPU-%08x-%04x-%04x-%04x-%012llx", (unsigned)(hi >> 32),
             (unsigned)(hi >> 16) & 0xffffu, (unsigned)hi & 0xffffu, (unsigned)(lo >> 48),
             (unsigned long long)(lo & 0xffffffffffffULL));
}

/* The card a "GPU-" UUID prefix names, or -1 when none or several match. */
static int sim_uuid_card(const char *b, size_t len, int ncards) {
    int found = -1;
    for (int c = 0; c < ncards; c++) {
        char uuid[48];
        vram__sim_uuid(c, uuid, sizeof uuid);
        if (len > strlen(uuid) || strncasecmp(uuid, b, len) != 0) continue;
        if (found >= 0) return -1;
        found = c;
    }
    return found;
}

/* The card one CUDA_VISIBLE_DEVICES entry names (split and classified by common/visible.c, then
 * trimmed of blanks), or -1 (which ends the list): an index of 1 to 18 digits below ncards, or an
 * upper-case "GPU-" UUID or prefix of one that names exactly one card. */
static int sim_visible_card(vram_visible_entry *v, int ncards) {
    const char *b = v->text, *e = v->text + v->len;
    sim_trim(&b, &e);
    if (b != v->text || e != v->text + v->len) {
        v->text = b;
        v->len = (size_t)(e - b);
        vram__visible_classify(v);
    }
    if (v->kind == VRAM_VISIBLE_INDEX)
        return v->len <= 18 && v->index < (unsigned long long)ncards ? (int)v->index : -1;
    if (v->kind != VRAM_VISIBLE_GPU || strncmp(v->text, "GPU-", 4) != 0) return -1;
    return sim_uuid_card(v->text, v->len, ncards);
}

static int sim_listed(const sim_config *cfg, int card) {
    for (int i = 0; i < cfg->ndev; i++)
        if (cfg->dev_card[i] == card) return 1;
    return 0;
}

/* As the driver: unset shows all; else the listed cards in order, up to the first invalid or
 * repeated entry; "" or a leading -1 shows none. */
vram_status vram__sim_parse_visible(const char *text, sim_config *cfg) {
    cfg->ndev = 0;
    for (int i = 0; text == NULL && i < cfg->ncards; i++) cfg->dev_card[cfg->ndev++] = i;
    vram_visible_entry v;
    for (const char *p = text; vram__visible_next(&p, &v);) {
        int card = sim_visible_card(&v, cfg->ncards);
        if (card < 0 || sim_listed(cfg, card)) break;
        cfg->dev_card[cfg->ndev++] = card;
    }
    if (cfg->ndev > 0) return VRAM_OK;
    const char *devices = getenv("VRAM_SIM_DEVICES");
    return vram__fail(VRAM_ERR_NO_DEVICE, "no simulated GPU is visible: "
                      "CUDA_VISIBLE_DEVICES=\"%s\" hides every simulated card (there %s %d: "
                      "VRAM_SIM_DEVICES=%s); unset it or list card indices from 0 to %d or "
                      "GPU- UUIDs", text, cfg->ncards == 1 ? "is" : "are", cfg->ncards,
                      devices ? devices : "1x16GiB, the default", cfg->ncards - 1);
}
