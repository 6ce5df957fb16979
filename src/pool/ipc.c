/*
 * ipc.c: memory another process shared with this one (vram_ipc_open / vram_ipc_close): its handle
 * (ipc.h) mapped into an address range of this process, and unmapped again.
 *
 * A handle of growth's memory names file descriptors of the exporting process: each is taken with
 * pidfd_getfd (Linux 5.6; the same user, or the right to ptrace the exporter), imported as a
 * physical handle of this process and mapped at its offset in a range reserved here, whole or not
 * at all. A plain region's handle goes to the driver's IPC (cuIpcOpenMemHandle).
 *
 * The exporter keeps a file descriptor per piece it shared (one per 2 MiB under one-granule extents,
 * the default): vram__ipc_fd_room raises the soft RLIMIT_NOFILE, as far as the hard one allows, before
 * an export would run out of descriptors, or refuses it saying so.
 *
 * Owns the list of open imports; one mutex guards it (opening and closing are rare). The memory
 * stays valid in this process until vram_ipc_close, whatever the exporter does meanwhile with its
 * block (the driver keeps imported physical memory alive), which is why PyTorch's exporter keeps
 * its block until the receivers are done.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pool/ipc.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

typedef struct ipc_import {
    struct ipc_import *next;
    int                dev, kind;
    uint64_t           base;
    size_t             span, n;
    struct {
        uint64_t handle;            /* imported here */
        uint64_t offset;
        size_t   size;
    } piece[];                      /* IPC_VMM: the pieces, as mapped in [base, base + span) */
} ipc_import;

static pthread_mutex_t ipc_lock = PTHREAD_MUTEX_INITIALIZER;
static ipc_import     *ipc_open_list;

#define IPC_FD_SPARE 64   /* descriptors left free beyond an export's, for the program's own */

/* The descriptors this process has open (the kernel hands out the lowest free number, so an export
 * runs out when this count reaches the soft limit), or SIZE_MAX when /proc cannot say. */
static size_t open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) return SIZE_MAX;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    closedir(d);
    return n > 0 ? n - 1 : 0;   /* (less the directory's own) */
}

vram_status vram__ipc_fd_room(size_t need) {
    struct rlimit rl;
    size_t open = need > 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? open_fds()
                                                                                                 : SIZE_MAX;
    if (open == SIZE_MAX || open + need + IPC_FD_SPARE <= rl.rlim_cur) return VRAM_OK;   /* (or the driver says) */
    rlim_t want = (rlim_t)(open + need + IPC_FD_SPARE), more = 2 * rl.rlim_cur > want ? 2 * rl.rlim_cur : want;
    if (rl.rlim_max != RLIM_INFINITY && want > rl.rlim_max) {
        return vram__fail(VRAM_ERR_CONFLICT, "vram_ipc_export: the block needs %zu more file descriptors (one per "
                          "physical piece under it) and this process has %zu open under a hard limit of %llu "
                          "(RLIMIT_NOFILE): raise it (ulimit -Hn), or map larger pieces (VRAM_ALLOC_CONF=plan:false "
                          "without a limit, or extent_mb:N)", need, open, (unsigned long long)rl.rlim_max);
    }
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && more > rl.rlim_max ? rl.rlim_max : more;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return vram__fail(VRAM_ERR_CONFLICT, "vram_ipc_export: the block needs %zu more file descriptors and "
                          "setrlimit(RLIMIT_NOFILE, %llu) failed: %s", need, (unsigned long long)rl.rlim_cur,
                          strerror(errno));
    }
    return VRAM_OK;
}

/* Descriptor `fd` of process `pid` as one of this process (the caller closes it), or -1 with errno. */
static int ipc_take_fd(int pidfd, int pid, int fd) {
    if (pid == (int)getpid()) return dup(fd);
    return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
}

/* The first failure of a sequence of driver calls, with its message (a later failure, often its
 * consequence, would say another call). */
static void ipc_first(vram_status *s, vram_status r, char *why, size_t len) {
    if (*s != VRAM_OK || r == VRAM_OK) return;
    *s = r;
    snprintf(why, len, "%s", vram_last_error());
}

/* Unmaps pieces [0, mapped) and releases handles [0, imported) of `im`, then its range; the first
 * failure is the result, with its message (the rest is still undone). */
static vram_status ipc_undo(const vram__backend *be, ipc_import *im, size_t mapped, size_t imported) {
    vram_status s = VRAM_OK;
    char why[1024] = "";
    for (size_t k = 0; k < mapped; k++)
        ipc_first(&s, be->unmap(im->dev, im->base + im->piece[k].offset, im->piece[k].size), why, sizeof why);
    for (size_t k = 0; k < imported; k++)
        ipc_first(&s, be->phys_release(im->dev, im->piece[k].handle), why, sizeof why);
    if (im->base != 0) ipc_first(&s, be->va_free(im->dev, im->base, im->span), why, sizeof why);
    return s == VRAM_OK ? VRAM_OK : vram__fail(s, "%s", why);
}

static vram_status ipc_map_pieces(const vram__backend *be, ipc_import *im, int pid, const ipc_piece *pieces) {
    int pidfd = pid == (int)getpid() ? -1 : (int)syscall(SYS_pidfd_open, pid, 0);
    if (pid != (int)getpid() && pidfd < 0) {
        return vram__fail(VRAM_ERR_DRIVER, "vram_ipc_open: pidfd_open(%d): %s (the exporting process must still "
                          "run)", pid, strerror(errno));
    }
    size_t imported = 0, mapped = 0;
    vram_status s = VRAM_OK;
    for (; imported < im->n && s == VRAM_OK; imported++) {
        int fd = ipc_take_fd(pidfd, pid, pieces[imported].fd);
        if (fd < 0) {
            s = vram__fail(VRAM_ERR_DRIVER, "vram_ipc_open: pidfd_getfd(process %d, fd %d): %s (needs the same user "
                           "or the right to ptrace it)", pid, pieces[imported].fd, strerror(errno));
            break;
        }
        im->piece[imported].offset = pieces[imported].offset;
        im->piece[imported].size = pieces[imported].size;
        s = be->phys_import(im->dev, fd, pieces[imported].size, &im->piece[imported].handle);
        close(fd);
        if (s != VRAM_OK) break;
    }
    if (s == VRAM_OK) s = be->va_reserve(im->dev, im->span, &im->base);
    for (; s == VRAM_OK && mapped < im->n; mapped++) {
        s = be->map(im->dev, im->base + pieces[mapped].offset, pieces[mapped].size, im->piece[mapped].handle);
        if (s != VRAM_OK) break;
    }
    if (s != VRAM_OK) {                   /* the first failure is the message, whatever the undoing says */
        char why[1024];
        snprintf(why, sizeof why, "%s", vram_last_error());
        (void)ipc_undo(be, im, mapped, imported);
        vram__fail(s, "%s", why);
    }
    if (pidfd >= 0) close(pidfd);
    return s;
}

vram_status vram__ipc_open(const vram__backend *be, int dev, const void *handle, size_t length, void **ptr) {
    ipc_head head;
    if (handle == NULL || ptr == NULL || length < sizeof head) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_ipc_open: handle and ptr must not be NULL, and the handle "
                          "holds at least %zu bytes", sizeof head);
    }
    memcpy(&head, handle, sizeof head);
    const unsigned char *body = (const unsigned char *)handle + sizeof head;
    size_t want = head.kind == IPC_VMM ? sizeof head + (size_t)head.n * sizeof(ipc_piece)
                : head.kind == IPC_PLAIN ? sizeof head + IPC_PLAIN_BYTES : 0;
    if (memcmp(head.magic, IPC_MAGIC, sizeof head.magic) != 0 || want != length || head.span == 0 ||
        (head.kind == IPC_VMM && head.n == 0)) {
        return vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_ipc_open: not a handle of vram_ipc_export (%zu bytes)",
                          length);
    }
    size_t n = head.kind == IPC_VMM ? head.n : 0;
    ipc_import *im = calloc(1, sizeof *im + n * sizeof im->piece[0]);
    if (im == NULL) return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for an IPC import");
    im->dev = dev;
    im->kind = (int)head.kind;
    im->span = head.span;
    im->n = n;
    vram_status s;
    if (head.kind == IPC_PLAIN) {
        s = be->ipc_open(dev, body, &im->base);
    } else {
        ipc_piece *pieces = malloc(n * sizeof *pieces);
        s = pieces != NULL ? VRAM_OK : vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for an IPC import");
        if (s == VRAM_OK) {
            memcpy(pieces, body, n * sizeof *pieces);
            for (size_t k = 0; k < n && s == VRAM_OK; k++) {
                if (pieces[k].size == 0 || pieces[k].offset > head.span || pieces[k].size > head.span - pieces[k].offset)
                    s = vram__fail(VRAM_ERR_INVALID_ARGUMENT, "vram_ipc_open: a piece lies outside the handle's span");
            }
        }
        if (s == VRAM_OK) s = ipc_map_pieces(be, im, head.pid, pieces);
        free(pieces);
    }
    if (s != VRAM_OK) {
        free(im);
        return s;
    }
    pthread_mutex_lock(&ipc_lock);
    im->next = ipc_open_list;
    ipc_open_list = im;
    pthread_mutex_unlock(&ipc_lock);
    *ptr = (void *)(uintptr_t)im->base;
    return VRAM_OK;
}

vram_status vram__ipc_close(const vram__backend *be, void *ptr) {
    pthread_mutex_lock(&ipc_lock);
    ipc_import **link = &ipc_open_list;
    while (*link != NULL && (*link)->base != (uint64_t)(uintptr_t)ptr) link = &(*link)->next;
    ipc_import *im = *link;
    if (im != NULL) *link = im->next;
    pthread_mutex_unlock(&ipc_lock);
    if (im == NULL) {
        return vram__fail(VRAM_ERR_INVALID_POINTER, "vram_ipc_close(%p): not memory vram_ipc_open mapped", ptr);
    }
    vram_status s = im->kind == IPC_PLAIN ? be->ipc_close(im->dev, im->base) : ipc_undo(be, im, im->n, im->n);
    free(im);
    return s;
}
