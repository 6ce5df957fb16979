/*
 * api.c: the public configuration functions of vram.h: argument checks, the physical devices and
 * their visibility, growth and limits, logical devices, the allocator options, and their freeze at
 * start (TensorFlow's messages); the start and the shutdown. The calls on a started runtime's
 * memory (allocation, private pools, IPC, statistics) are in api_memory.c.
 *
 * Invariant: after the start a call that would change what is in force fails with
 * VRAM_ERR_ALREADY_INITIALIZED and TensorFlow's sentence; one that sets what is in force is VRAM_OK.
 * Lock: every configuration call takes the runtime's write lock (vram__rt_write_lock) and releases
 * it through unlock_with; queries of the configuration read under it too.
 */
#include <stdlib.h>
#include <string.h>

#include "pool/ipc.h"
#include "runtime/runtime.h"

#define rt vram__rt

static const char MSG_VISIBLE[] = "Visible devices cannot be modified after being initialized";
static const char MSG_PHYSICAL[] = "Physical devices cannot be modified after being initialized";
static const char MSG_VIRTUAL[] = "Virtual devices cannot be modified after being initialized";
static const char MSG_ALLOC_CONF[] = "Allocator options cannot be modified after being initialized";

static vram_status check_list_args(const void *out, int capacity, const int *count, const char *fn) {
    if (count == NULL || capacity < 0 || (out == NULL && capacity > 0)) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "%s: count must not be NULL, capacity must be >= 0, and "
                          "out may be NULL only when capacity is 0", fn);
    }
    return VRAM_OK;
}

/* Discovers devices and checks that `i` is one; with the write lock held. */
static vram_status physical_wlocked(int i) {
    vram_status s = vram__rt_discover_wlocked();
    if (s != VRAM_OK) return s;
    if (i < 0 || i >= rt.ndev) {
        return vram__fail(VRAM_ERR_UNRECOGNIZED_DEVICE, "Unrecognized device: %d (physical devices are 0..%d)",
                          i, rt.ndev - 1);
    }
    return VRAM_OK;
}

/* The logical devices the start would make: one per visible card, or its configurations' number;
 * with card `card` configured into n (card < 0: none changed) and the visibility `visible` (NULL: what
 * is set). Refused by name above VRAM_MAX_LOGICAL, at the call that would exceed it. */
static vram_status check_logical_total_wlocked(int card, int n, const unsigned char *visible, const char *fn) {
    int total = 0;
    for (int j = 0; j < rt.ndev; j++) {
        int shown = visible != NULL ? visible[j] : !rt.visible_set || rt.visible[j];
        int configs = j == card ? n : rt.config[j].nconfigs;
        if (shown) total += configs > 0 ? configs : 1;
    }
    if (total <= VRAM_MAX_LOGICAL) return VRAM_OK;
    return vram__fail(VRAM_ERR_CONFLICT, "%s: the visible cards would have %d logical devices; vram has at most %d "
                      "logical devices", fn, total, VRAM_MAX_LOGICAL);
}

static vram_status unlock_with(vram_status s) {
    vram__rt_write_unlock();
    return s;
}

/* ---- physical devices and visibility --------------------------------------------------------- */

vram_status vram_list_physical_devices(vram_physical_device *out, int capacity, int *count) {
    vram_status s = check_list_args(out, capacity, count, "vram_list_physical_devices");
    if (s != VRAM_OK) return s;
    vram__rt_write_lock();
    s = vram__rt_discover_wlocked();
    *count = s == VRAM_OK ? rt.ndev : 0;
    for (int i = 0; s == VRAM_OK && i < rt.ndev && i < capacity; i++) out[i] = rt.devices[i];
    return unlock_with(s);
}

vram_status vram_set_visible_devices(const int *physical_indices, int n) {
    if (n < 0 || (n > 0 && physical_indices == NULL)) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_set_visible_devices: n must be >= 0 and the "
                          "indices non-NULL when n > 0");
    }
    unsigned char mask[VRAM_MAX_DEVICES] = {0};
    vram__rt_write_lock();
    for (int k = 0; k < n; k++) {
        vram_status s = physical_wlocked(physical_indices[k]);
        if (s != VRAM_OK) return unlock_with(s);
        if (mask[physical_indices[k]]) {
            return unlock_with(vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_set_visible_devices: device %d "
                                          "is listed twice", physical_indices[k]));
        }
        mask[physical_indices[k]] = 1;
    }
    vram_status s = vram__rt_discover_wlocked();
    if (s != VRAM_OK) return unlock_with(s);
    if (atomic_load(&rt.initialized)) {
        int same = memcmp(mask, rt.visible_in_force, sizeof mask) == 0;
        return unlock_with(same ? VRAM_OK : vram__fail(VRAM_ERR_ALREADY_INITIALIZED, "%s", MSG_VISIBLE));
    }
    s = check_logical_total_wlocked(-1, 0, mask, "vram_set_visible_devices");
    if (s != VRAM_OK) return unlock_with(s);
    memcpy(rt.visible, mask, sizeof mask);
    rt.visible_set = 1;
    return unlock_with(VRAM_OK);
}

vram_status vram_get_visible_devices(int *physical_indices, int capacity, int *count) {
    vram_status s = check_list_args(physical_indices, capacity, count, "vram_get_visible_devices");
    if (s != VRAM_OK) return s;
    vram__rt_write_lock();
    s = vram__rt_discover_wlocked();
    if (s != VRAM_OK) {
        *count = 0;
        return unlock_with(s);
    }
    int started = atomic_load(&rt.initialized), n = 0;
    for (int i = 0; i < rt.ndev; i++) {
        if (started ? rt.visible_in_force[i] : (!rt.visible_set || rt.visible[i])) {
            if (n < capacity) physical_indices[n] = i;
            n++;
        }
    }
    *count = n;
    return unlock_with(VRAM_OK);
}

/* ---- growth and limits ----------------------------------------------------------------------- */

vram_status vram_set_memory_growth(int physical_index, int enable) {
    enable = enable != 0;
    vram__rt_write_lock();
    vram_status s = physical_wlocked(physical_index);
    if (s != VRAM_OK) return unlock_with(s);
    if (atomic_load(&rt.initialized)) {
        int same = rt.growth_in_force[physical_index] == enable;
        return unlock_with(same ? VRAM_OK : vram__fail(VRAM_ERR_ALREADY_INITIALIZED, "%s", MSG_PHYSICAL));
    }
    rt.config[physical_index].growth = enable;
    rt.config[physical_index].growth_set = 1;
    return unlock_with(VRAM_OK);
}

vram_status vram_get_memory_growth(int physical_index, int *enabled) {
    if (enabled == NULL) return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_get_memory_growth: enabled is NULL");
    vram__rt_write_lock();
    vram_status s = physical_wlocked(physical_index);
    if (s == VRAM_OK) *enabled = rt.config[physical_index].growth_set ? rt.config[physical_index].growth : -1;
    return unlock_with(s);
}

vram_status vram_set_memory_limit(int physical_index, size_t limit_bytes) {
    vram__rt_write_lock();
    vram_status s = physical_wlocked(physical_index);
    if (s != VRAM_OK) return unlock_with(s);
    if (atomic_load(&rt.initialized)) {
        int same = limit_bytes == rt.limit_in_force[physical_index];   /* (what is in force, as for every setting) */
        return unlock_with(same ? VRAM_OK : vram__fail(VRAM_ERR_ALREADY_INITIALIZED, "%s", MSG_PHYSICAL));
    }
    size_t total = rt.devices[physical_index].total_bytes;
    if (limit_bytes > total) {
        return unlock_with(vram__fail(VRAM_ERR_CONFLICT, "vram_set_memory_limit: %zu bytes is more than the "
                                      "%zu bytes of %s", limit_bytes, total, rt.devices[physical_index].name));
    }
    rt.config[physical_index].limit = limit_bytes;
    return unlock_with(VRAM_OK);
}

vram_status vram_get_memory_limit(int physical_index, size_t *limit_bytes) {
    if (limit_bytes == NULL) return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_get_memory_limit: limit_bytes is NULL");
    vram__rt_write_lock();
    vram_status s = physical_wlocked(physical_index);
    if (s == VRAM_OK) *limit_bytes = rt.config[physical_index].limit;
    return unlock_with(s);
}

/* ---- logical devices ------------------------------------------------------------------------- */

static int same_configs(const rt_physical_config *c, const vram_logical_device_configuration *configs, int n) {
    if (c->nconfigs != n) return 0;
    for (int k = 0; k < n; k++) {
        if (c->configs[k].memory_limit_mb != configs[k].memory_limit_mb) return 0;
    }
    return 1;
}

static vram_status check_configs(int i, const vram_logical_device_configuration *configs, int n) {
    size_t sum = 0, total = rt.devices[i].total_bytes;
    for (int k = 0; k < n; k++) {
        size_t mb = configs[k].memory_limit_mb;
        if (mb == 0) {
            return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "Setting memory limit is required for GPU virtual "
                              "devices (configuration %d of device %d has memory_limit_mb 0)", k, i);
        }
        if (mb > SIZE_MAX / VRAM_MIB || !vram__add_ok(sum, mb * VRAM_MIB, &sum) || sum > total) {
            return vram__fail(VRAM_ERR_CONFLICT, "the logical device configurations of device %d add up to more "
                              "than its %zu bytes", i, total);
        }
    }
    return VRAM_OK;
}

vram_status vram_set_logical_device_configuration(int physical_index,
        const vram_logical_device_configuration *configs, int n) {
    if (n < 0 || (n > 0 && configs == NULL)) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_set_logical_device_configuration: n must be >= 0 "
                          "and configs non-NULL when n > 0");
    }
    vram__rt_write_lock();
    vram_status s = physical_wlocked(physical_index);
    if (s != VRAM_OK) return unlock_with(s);
    rt_physical_config *c = &rt.config[physical_index];
    if (atomic_load(&rt.initialized)) {
        return unlock_with(same_configs(c, configs, n) ? VRAM_OK
                           : vram__fail(VRAM_ERR_ALREADY_INITIALIZED, "%s", MSG_VIRTUAL));
    }
    s = check_configs(physical_index, configs, n);
    if (s == VRAM_OK) s = check_logical_total_wlocked(physical_index, n, NULL, "vram_set_logical_device_configuration");
    if (s != VRAM_OK) return unlock_with(s);
    vram_logical_device_configuration *copy = NULL;
    if (n > 0 && (copy = malloc((size_t)n * sizeof *copy)) == NULL) {
        return unlock_with(vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for %d configurations", n));
    }
    if (n > 0) memcpy(copy, configs, (size_t)n * sizeof *copy);
    free(c->configs);
    c->configs = copy;
    c->nconfigs = n;
    return unlock_with(VRAM_OK);
}

vram_status vram_get_logical_device_configuration(int physical_index,
        vram_logical_device_configuration *out, int capacity, int *count) {
    vram_status s = check_list_args(out, capacity, count, "vram_get_logical_device_configuration");
    if (s != VRAM_OK) return s;
    vram__rt_write_lock();
    s = physical_wlocked(physical_index);
    if (s != VRAM_OK) return unlock_with(s);
    const rt_physical_config *c = &rt.config[physical_index];
    for (int k = 0; k < c->nconfigs && k < capacity; k++) out[k] = c->configs[k];
    *count = c->nconfigs;
    return unlock_with(VRAM_OK);
}

vram_status vram_list_logical_devices(vram_logical_device *out, int capacity, int *count) {
    vram__thread *me = vram__rt_self();
    vram_status s = check_list_args(out, capacity, count, "vram_list_logical_devices");
    if (s == VRAM_OK) s = vram__rt_enter_started(me);
    if (s != VRAM_OK) return s;
    for (int k = 0; k < rt.nlogical && k < capacity; k++) out[k] = rt.logical[k].info;
    *count = rt.nlogical;
    vram__rt_leave(me);
    return VRAM_OK;
}

/* ---- allocator options ------------------------------------------------------------------------ */

vram_status vram_set_alloc_conf(const char *conf) {
    vram__alloc_conf parsed;
    vram_status s = vram__alloc_conf_parse(conf, "vram_set_alloc_conf", NULL, &parsed);
    if (s != VRAM_OK) return s;
    vram__rt_write_lock();
    if (atomic_load(&rt.initialized)) {
        int same = vram__alloc_conf_equal(&parsed, &rt.alloc_conf_in_force);
        return unlock_with(same ? VRAM_OK : vram__fail(VRAM_ERR_ALREADY_INITIALIZED, "%s", MSG_ALLOC_CONF));
    }
    rt.alloc_conf = parsed;
    return unlock_with(VRAM_OK);
}
/* ---- start and shutdown ---------------------------------------------------------------------- */

vram_status vram_init(void) {
    if (atomic_load(&rt.initialized)) return VRAM_OK;
    vram__rt_write_lock();
    return unlock_with(vram__rt_start_wlocked());
}

int vram_is_initialized(void) {
    return atomic_load(&rt.initialized);
}

vram_status vram_shutdown(void) {
    vram__rt_write_lock();
    return unlock_with(vram__rt_stop_wlocked());
}
