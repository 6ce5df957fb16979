/*
 * stream_order.h: the stream ordering of one arena (stream_order.c): frees that wait for a stream
 * (pending), blocks used on several streams (deferred), one stream (solo) and CUDA-graph captures
 * (captures). What the hand-out and free paths test on every call is here, inline or as helpers
 * of the header (POOL_HELPER, arena.h); the pending list's links are split_merge.h's (the chunk
 * lists below). Arena lock held for everything but capture_underway and arena_still, which read
 * atomics.
 */
#ifndef VRAM_POOL_STREAM_ORDER_H
#define VRAM_POOL_STREAM_ORDER_H

#include "pool/arena.h"

/* ---- captures ------------------------------------------------------------------------------ *
 *
 * While a stream of the device is captured into a CUDA graph, the work queued on it is recorded,
 * not run: an event recorded there is a node of the graph, querying or waiting for it invalidates
 * the capture, and giving memory back (unmapping, freeing) is what a capture forbids. So while a
 * capture is underway (vram_capture_begin .. vram_capture_end, counted in the shared state) no
 * arena records, queries or waits for an event, and none gives memory back or moves it, as
 * PyTorch's allocator defers its events until no capture is underway: a stream-ordered free is
 * reused by its own stream at once, by other streams only once the capture has ended and its
 * event (recorded then) has completed; a block used on several streams waits the same way. */
static inline int capture_underway(const pool_arena *p) {
    return p->shared != NULL && atomic_load_explicit(&p->shared->captures, memory_order_acquire) > 0;
}

/* Whether the arena's memory must stay where it is: a private pool in use, or a capture underway. */
static inline int arena_still(const pool_arena *p) {
    return p->pinned || capture_underway(p);
}


/* ---- pending (stream-ordered) frees (their list's links: split_merge.h) ---------------------- */

/* An event record's reference dropped (the event destroyed with the last one). */
void vram__event_release(pool_arena *p, pool_event *e);
/* Moves a PENDING chunk whose event completed into the free bins. */
void vram__pending_settle_locked(pool_arena *p, pool_chunk *c);
/* Records one event per stream for the frees that carry none yet (owned-stream frees). */
void vram__pending_record_locked(pool_arena *p);
/* Settles every pending free whose event has completed; with `wait`, waits for all of them. */
void vram__pending_reap_locked(pool_arena *p, int wait);
/* c (PENDING, not linked yet) merged with its pending neighbours of the same stream; returns the
 * chunk to link. */
pool_chunk *vram__pending_merge_locked(pool_arena *p, pool_chunk *c);
/* Best fit among PENDING chunks freed on `stream` (which that stream may reuse at once). */
pool_chunk *vram__pending_best_fit_locked(pool_arena *p, void *stream, size_t size);

/* ---- blocks used on other streams (deferred) ------------------------------------------------- */

/* Whether block c is used on a stream other than `stream`. */
int vram__uses_beyond(const pool_uses *u, void *stream);
/* The program frees c, which has uses (see stream_order.c); gives the arena lock back. `how`:
 * VRAM_POOL_FREE_NOW or a stream-ordered kind on `stream`; `asked`: the free call the program made. */
VRAM_NOINLINE vram_status vram__free_deferred_unlock(pool_arena *p, pool_chunk *c, vram__free_kind how, void *stream,
                                               vram__free_kind asked);
/* Gives the deferred blocks whose events have all completed to the free bins; with `wait`, waits. */
VRAM_NOINLINE void vram__deferred_reap_locked(pool_arena *p, int wait);

/* ---- one stream (solo) ----------------------------------------------------------------------- */

enum { SOLO_NONE, SOLO_ON, SOLO_OFF };

/* Waits until the solo stream has done everything queued before now; 0, or -1 when the driver
 * refused (or a capture is underway). */
int vram__solo_fence_locked(pool_arena *p);

/* A request (async: stream-ordered, on `stream`) is about to be served. */
POOL_HELPER void solo_note_request_locked(pool_arena *p, int async, void *stream) {
    POOL_ASSERT_LOCKED(p);
    if (p->solo.state == SOLO_NONE && async) {
        p->solo.state = SOLO_ON;
        p->solo.stream = stream;
    } else if (p->solo.state == SOLO_ON && (!async || stream != p->solo.stream)) {
        (void)vram__solo_fence_locked(p);        /* a driver that cannot wait has failed the stream anyway */
        p->solo.state = SOLO_OFF;
    }
}

#endif /* VRAM_POOL_STREAM_ORDER_H */
