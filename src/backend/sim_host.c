/*
 * sim_host.c: the simulated backend's pinned host memory (host_alloc / host_free: heap blocks it
 * keeps a record of), the copies between host memory and device memory (the card's memory is host
 * address space, so a copy is a memcpy, made only when the device range is mapped and the host range
 * lies in one host_alloc block, as the driver's copies fault otherwise), and the cards shared with
 * other processes (VRAM_SIM_SHARED=FILE, the fake driver's FAKE_CUDA_SHARED for the simulated card:
 * each process's bytes per card in an entry of FILE, the entry of a process that is gone counting nothing,
 * so that one process sees in mem_info, and meets in its allocations, the memory the others hold).
 *
 * Invariants: every host block is in vram__sim_st.hosts with its size; with VRAM_SIM_SHARED this process's
 * entry holds exactly vram__sim_st.dev[d].used for each visible device's card. Entry points take vram__sim_lock;
 * the entries are read and written under the file's flock (taken under vram__sim_lock, never the other way).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/sim_internal.h"

/* ---- pinned host memory ---------------------------------------------------------------------- */

static vram_status sim_host_alloc_locked(int dev, size_t size, void **host) {
    char call[64];
    snprintf(call, sizeof call, "cuMemHostAlloc(%zu bytes)", size);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (size == 0 || host == NULL)
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, size ? "NULL host" : "size 0");
    if (vram__sim_st.host_failures > 0) {
        vram__sim_st.host_failures--;
        return vram__sim_fail(VRAM_ERR_OUT_OF_MEMORY, call, dev, SIM_EOOM, "injected by vram__sim_fail_copies");
    }
    sim_host *h = malloc(sizeof *h);
    void *p = h != NULL ? malloc(size) : NULL;
    if (p == NULL || vram__sim_tab_reserve(&vram__sim_st.hosts) != 0) {
        free(p);
        free(h);
        return vram__sim_host_oom(call, dev);
    }
    h->size = size;
    vram__sim_tab_put(&vram__sim_st.hosts, (uint64_t)(uintptr_t)p, h);
    SIM_COUNT(host_alloc);
    *host = p;
    return VRAM_OK;
}

vram_status vram__sim_host_alloc(int dev, size_t size, void **host) {
    SIM_LOCKED(sim_host_alloc_locked(dev, size, host));
}

static vram_status sim_host_free_locked(int dev, void *host) {
    char call[64];
    snprintf(call, sizeof call, "cuMemFreeHost(%p)", host);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    sim_host *h = vram__sim_tab_get(&vram__sim_st.hosts, (uint64_t)(uintptr_t)host);
    if (h == NULL) return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, "not a block cuMemHostAlloc returned");
    vram__sim_tab_del(&vram__sim_st.hosts, (uint64_t)(uintptr_t)host);
    free(h);
    free(host);
    SIM_COUNT(host_free);
    return VRAM_OK;
}

vram_status vram__sim_host_free(int dev, void *host) {
    SIM_LOCKED(sim_host_free_locked(dev, host));
}

/* Whether [p, p + size) lies in one host block. */
static int sim_host_range(const void *p, size_t size) {
    uintptr_t a = (uintptr_t)p;
    for (size_t i = 0; i < vram__sim_st.hosts.cap; i++) {
        const sim_host *h = vram__sim_st.hosts.buckets[i].val;
        uintptr_t base = (uintptr_t)vram__sim_st.hosts.buckets[i].key;
        if (h != NULL && a >= base && a - base <= h->size && size <= h->size - (a - base)) return 1;
    }
    return 0;
}

/* A copy of `size` bytes between host block `host` and device range `dptr`, `to_host` saying which
 * way: the ranges checked, then a memcpy. */
static vram_status sim_copy_locked(int dev, void *host, uint64_t dptr, size_t size, int to_host) {
    char call[96];
    snprintf(call, sizeof call, "%s(0x%llx, %zu bytes)", to_host ? "cuMemcpyDtoH" : "cuMemcpyHtoD",
             (unsigned long long)dptr, size);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (vram__sim_st.copy_failures > 0) {
        vram__sim_st.copy_failures--;
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_ELAUNCH, "injected by vram__sim_fail_copies");
    }
    if (size == 0 || host == NULL || !sim_host_range(host, size))
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "simulated: the host range is not in one block of cuMemHostAlloc");
    if (!vram__sim_device_range(dev, dptr, size))
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL,
                        "the device range is not device memory of this device (unmapped, or not vram's)");
    if (to_host) {
        memcpy(host, (const void *)(uintptr_t)dptr, size);
        SIM_COUNT(copy_to_host);
        vram__backend_count_n(&vram__sim_count, bytes_to_host, size);
    } else {
        memcpy((void *)(uintptr_t)dptr, host, size);
        SIM_COUNT(copy_to_device);
        vram__backend_count_n(&vram__sim_count, bytes_to_device, size);
    }
    return VRAM_OK;
}

vram_status vram__sim_copy_to_host(int dev, void *dst, uint64_t src, size_t size) {
    SIM_LOCKED(sim_copy_locked(dev, dst, src, size, 1));
}

vram_status vram__sim_copy_to_device(int dev, uint64_t dst, const void *src, size_t size) {
    SIM_LOCKED(sim_copy_locked(dev, (void *)(uintptr_t)src, dst, size, 0));
}

/* ---- the cards shared with other processes (VRAM_SIM_SHARED) --------------------------------- */

#define SIM_SHARE_BYTES (SIM_SHARE_ENTRIES * sizeof(sim_share_entry))

static int sim_pid_alive(int pid) {
    return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

vram_status vram__sim_share_open(void) {
    const char *path = getenv("VRAM_SIM_SHARED");
    if (path == NULL || *path == '\0') return VRAM_OK;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_SIM_SHARED='%s': cannot open it: %s", path,
                          strerror(errno));
    }
    const char *why = NULL;
    sim_share_entry *t = NULL;
    int me = -1;
    flock(fd, LOCK_EX);
    off_t end = lseek(fd, 0, SEEK_END);
    if (end != 0 && end != (off_t)SIM_SHARE_BYTES) why = "it is not a file of VRAM_SIM_SHARED (another size)";
    else if (end == 0 && ftruncate(fd, (off_t)SIM_SHARE_BYTES) != 0) why = strerror(errno);
    if (why == NULL) {
        void *m = mmap(NULL, SIM_SHARE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) why = strerror(errno);
        else t = m;
    }
    for (int i = 0; t != NULL && i < SIM_SHARE_ENTRIES && me < 0; i++) {
        if (t[i].pid == 0 || t[i].pid == (int)getpid() || !sim_pid_alive(t[i].pid)) me = i;
    }
    if (t != NULL && me < 0) why = "all its entries are taken by live processes";
    if (me >= 0) {
        memset(&t[me], 0, sizeof t[me]);
        t[me].pid = (int)getpid();
    }
    flock(fd, LOCK_UN);
    if (why != NULL) {
        if (t != NULL) munmap(t, SIM_SHARE_BYTES);
        close(fd);
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "VRAM_SIM_SHARED='%s': %s", path, why);
    }
    vram__sim_st.share = t;
    vram__sim_st.share_fd = fd;
    vram__sim_st.share_me = me;
    return VRAM_OK;
}

void vram__sim_share_close(void) {
    if (vram__sim_st.share == NULL) return;
    flock(vram__sim_st.share_fd, LOCK_EX);                 /* (a forked child's copy leaves its parent's entry) */
    if (vram__sim_st.share[vram__sim_st.share_me].pid == (int32_t)getpid()) {
        memset(&vram__sim_st.share[vram__sim_st.share_me], 0, sizeof vram__sim_st.share[vram__sim_st.share_me]);
    }
    flock(vram__sim_st.share_fd, LOCK_UN);
    munmap(vram__sim_st.share, SIM_SHARE_BYTES);
    close(vram__sim_st.share_fd);
    vram__sim_st.share = NULL;
    vram__sim_st.share_fd = -1;
}

void vram__sim_share_lock(void) {
    if (vram__sim_st.share != NULL) flock(vram__sim_st.share_fd, LOCK_EX);
}

void vram__sim_share_unlock(void) {
    if (vram__sim_st.share != NULL) flock(vram__sim_st.share_fd, LOCK_UN);
}

void vram__sim_share_write(int dev) {
    if (vram__sim_st.share != NULL) vram__sim_st.share[vram__sim_st.share_me].used[vram__sim_st.dev[dev].card] = vram__sim_st.dev[dev].used;
}

size_t vram__sim_card_held(int dev) {
    if (vram__sim_st.share == NULL) return vram__sim_st.dev[dev].used;
    size_t sum = 0;                 /* every live process's entry, this one's included (it equals used) */
    for (int i = 0; i < SIM_SHARE_ENTRIES; i++) {
        const sim_share_entry *t = &vram__sim_st.share[i];
        if (t->pid != 0 && sim_pid_alive(t->pid)) sum += t->used[vram__sim_st.dev[dev].card];
    }
    return sum;
}
