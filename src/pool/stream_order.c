/*
 * stream_order.c: the stream ordering of one arena. Owns the pending list (stream-ordered frees
 * whose stream may still use their memory), their events, the deferred list (blocks freed while
 * still used on other streams: vram_record_stream), the solo state (one stream) and what an arena
 * leaves undone while a CUDA-graph capture is underway.
 *
 * Invariants: a PENDING chunk is in the pending list, and counts in `order.unrecorded` while it has no
 * event; only its own stream takes it before its event completed. A deferred block is USED, out of
 * the pointer table and of the counts, in the deferred list, until every event of its uses
 * completed. While a capture is underway no event is recorded, queried or waited for here. The
 * arena's lock guards all of it (functions ending in _locked; vram__free_deferred_unlock gives it back).
 */
#include <stdlib.h>
#include <string.h>

#include "pool/pointer_table.h"
#include "pool/split_merge.h"
#include "pool/stats.h"
#include "pool/stream_order.h"

/* ---- pending (stream-ordered) frees ---------------------------------------------------------- */

void vram__event_release(pool_arena *p, pool_event *e) {
    if (e != NULL && --e->refs == 0) {
        p->cfg.backend->event_destroy(p->cfg.dev, e->event);
        free(e);
    }
}


/* Moves a PENDING chunk whose event completed into the free bins. */
void vram__pending_settle_locked(pool_arena *p, pool_chunk *c) {
    POOL_ASSERT_LOCKED(p);
    pending_unlink_locked(p, c);
    vram__event_release(p, c->event);
    c->event = NULL;
    c->stream = NULL;
    vram__chunk_make_free_locked(p, c, 1);
}

#define PENDING_STREAMS_TRACKED 16
#define PENDING_RECORD_BATCH 32     /* unrecorded frees that make the pool record their events */

/* Frees whose caller promised a long-lived stream (vram__free_async_owned_stream) carry no event
 * yet: their stream may reuse them at once without one. Here one event per stream is recorded for
 * all of them at once (it comes after every use of their blocks on the stream, so it is as good
 * as one recorded at each free), so that other streams and plain allocations can have them once it
 * completes. A stream whose event cannot be recorded keeps its frees unrecorded until the next try. */
void vram__pending_record_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    const vram__backend *be = p->cfg.backend;
    if (capture_underway(p)) return;               /* recorded once the capture has ended */
    void *stream[PENDING_STREAMS_TRACKED];
    pool_event *event[PENDING_STREAMS_TRACKED];
    int nstreams = 0;
    for (pool_chunk *c = p->order.pending; c != NULL && p->order.unrecorded > 0; c = c->pend_next) {
        if (c->event != NULL) continue;
        int k = 0;
        while (k < nstreams && stream[k] != c->stream) k++;
        if (k == nstreams) {
            if (nstreams == PENDING_STREAMS_TRACKED) continue;      /* the next call records it */
            pool_event *e = malloc(sizeof *e);
            if (e != NULL && be->event_record(p->cfg.dev, c->stream, &e->event) != VRAM_OK) {
                free(e);
                e = NULL;
            }
            if (e != NULL) e->refs = 0;
            stream[nstreams] = c->stream;
            event[nstreams++] = e;
        }
        if (event[k] == NULL) continue;
        c->event = event[k];
        c->event->refs++;
        p->order.unrecorded--;
    }
}

/* Settles every pending free whose event has completed; with `wait`, waits for all of them.
 * Without waiting, the list is walked from the oldest free, and once a stream's event is found
 * not completed, that stream's newer frees are not asked about (a stream completes its work in
 * order): a call costs about one event query per stream, not one per pending free. */
void vram__pending_reap_locked(pool_arena *p, int wait) {
    POOL_ASSERT_LOCKED(p);
    const vram__backend *be = p->cfg.backend;
    if (capture_underway(p)) return;
    if (p->order.unrecorded > 0 && (wait || p->order.unrecorded >= PENDING_RECORD_BATCH)) vram__pending_record_locked(p);
    while (wait && p->order.unrecorded > 0) {   /* a call records PENDING_STREAMS_TRACKED streams at most */
        size_t before = p->order.unrecorded;
        vram__pending_record_locked(p);
        if (p->order.unrecorded == before) break;   /* a stream whose event cannot be recorded */
    }
    void *blocked[PENDING_STREAMS_TRACKED];
    int nblocked = 0;
    for (pool_chunk *c = p->order.pending_tail; c != NULL;) {
        pool_chunk *older_first_next = c->pend_prev;
        int done = 0, skip = c->event == NULL;
        for (int i = 0; !wait && i < nblocked && !skip; i++) skip = blocked[i] == c->stream;
        if (!skip) {
            if (be->event_query(p->cfg.dev, c->event->event, &done) != VRAM_OK) done = 0;
            if (!done && wait && be->event_sync(p->cfg.dev, c->event->event) == VRAM_OK) done = 1;
            if (!done && nblocked < PENDING_STREAMS_TRACKED) blocked[nblocked++] = c->stream;
        }
        if (done) vram__pending_settle_locked(p, c);
        c = older_first_next;
    }
}

/* Whether the PENDING chunk n may take in its unlinked neighbour c, just freed without an event on
 * the same stream: both become free for that stream at once and get one event when recorded.
 * `edge` is the address between them: never a zone's edge. */
static int pending_joins(const pool_arena *p, const pool_chunk *n, const pool_chunk *c, uint64_t edge) {
    return n != NULL && n->state == CHUNK_PENDING && n->event == NULL && c->event == NULL &&
           n->stream == c->stream && !pool_zone_edge(p, edge);
}

/* c (PENDING, not linked yet) merged with its pending neighbours of the same stream, so that the
 * stream can reuse their memory whole, as PyTorch's allocator can; returns the chunk to link. */
pool_chunk *vram__pending_merge_locked(pool_arena *p, pool_chunk *c) {
    POOL_ASSERT_LOCKED(p);
    pool_chunk *next = c->next, *prev = c->prev;
    if (next != NULL && pending_joins(p, next, c, next->addr)) {
        pending_unlink_locked(p, next);
        c->size += next->size;
        chunk_unlink_locked(p, next);
    }
    if (pending_joins(p, prev, c, c->addr)) {
        pending_unlink_locked(p, prev);
        prev->size += c->size;
        chunk_unlink_locked(p, c);
        c = prev;
    }
    return c;
}

/* Best fit among PENDING chunks freed on `stream` (which that stream may reuse at once). */
pool_chunk *vram__pending_best_fit_locked(pool_arena *p, void *stream, size_t size) {
    POOL_ASSERT_LOCKED(p);
    pool_chunk *best = NULL;
    for (pool_chunk *c = p->order.pending; c != NULL; c = c->pend_next) {
        if (c->stream == stream && c->size >= size && (best == NULL || c->size < best->size)) best = c;
    }
    return best;
}

/* ---- blocks used on other streams (vram_record_stream) ---------------------------------------- *
 *
 * A block is stream-ordered on the stream it was allocated on (or not at all, from vram_malloc).
 * When the program also uses it on another stream (PyTorch's tensor.record_stream: a NCCL stream,
 * a copy stream), its memory may be handed out again only once that stream's work queued before
 * the free has completed. Such a block keeps the streams in c->uses; its free records an event on
 * each of them (and on the free's own stream, for a stream-ordered free), takes the block out of
 * the pointer table and the counts, and leaves it USED in the deferred list, until every event
 * completed: then it goes to the free bins for everyone. Nothing waits for those streams but an
 * allocation that would otherwise fail, as in PyTorch's allocator; the list is looked at (without
 * waiting) before each search, one pointer test when it is empty. */

vram_status vram__uses_add_locked(pool_chunk *c, void *stream) {
    pool_uses *u = c->uses;
    for (int i = 0; u != NULL && i < u->n; i++) {      /* (its own stream too: it may be freed on another) */
        if (u->use[i].stream == stream) return VRAM_OK;
    }
    if (u == NULL || u->n + 1 >= u->cap) {             /* room for it, and for the free's stream */
        int cap = u != NULL ? u->cap * 2 : 4;
        pool_uses *g = realloc(u, sizeof *g + (size_t)cap * sizeof g->use[0]);
        if (g == NULL) return vram__fail(VRAM_ERR_OUT_OF_MEMORY, "host memory for a block's streams");
        if (u == NULL) memset(g, 0, sizeof *g);
        g->cap = cap;
        c->uses = u = g;
    }
    u->use[u->n++].stream = stream;
    return VRAM_OK;
}

/* Whether block c is used on a stream other than `stream` (a stream-ordered free's own, whose
 * order covers a use there). */
int vram__uses_beyond(const pool_uses *u, void *stream) {
    for (int i = 0; i < u->n; i++) {
        if (u->use[i].stream != stream) return 1;
    }
    return 0;
}

/* The program frees c, which has uses: on `stream` when `how` is stream-ordered (an event there,
 * unless that stream is a use already); `asked`: the free call the program made (for the message). c is still in the
 * pointer table, and leaves it only once every event is recorded: on failure nothing changed, c is
 * live as before. Gives the arena lock back: out of line and called last, so that the common free
 * does not pay for this path. */
VRAM_NOINLINE vram_status vram__free_deferred_unlock(pool_arena *p, pool_chunk *c, vram__free_kind how, void *stream,
                                               vram__free_kind asked) {
    const vram__backend *be = p->cfg.backend;
    pool_uses *u = c->uses;
    int n = u->n;
    int listed = 0;
    for (int i = 0; i < n; i++) listed |= u->use[i].stream == stream;
    if (how != VRAM_POOL_FREE_NOW && !listed) u->use[n++].stream = stream;   /* (cap > u->n: there is room) */
    int later = capture_underway(p);               /* its events are recorded after the capture */
    for (int i = 0; i < n && !later; i++) {
        vram_status s = be->event_record(p->cfg.dev, u->use[i].stream, &u->use[i].event);
        if (s != VRAM_OK) {
            while (i-- > 0) be->event_destroy(p->cfg.dev, u->use[i].event);
            pool_lock_give(&p->lock);
            return vram__fail_wrap(s, "%s(%p): an event on a stream the block is used on",
                                   vram__pool_free_name(asked), (void *)(uintptr_t)c->addr);
        }
    }
    ptr_table_take(p, c->addr);
    u->nevents = n;
    u->done = 0;
    u->unrecorded = later;
    u->next = NULL;                                    /* last in the list: oldest free first */
    if (p->order.deferred_tail != NULL) p->order.deferred_tail->uses->next = c; else p->order.deferred = c;
    p->order.deferred_tail = c;
    p->order.deferred_count++;
    note_used_locked(p, c, 0);
    vram__note_deferred_locked(p, c, 1);
    pool_lock_give(&p->lock);
    return VRAM_OK;
}

/* The events of a block freed while a capture was underway, recorded now on each stream it was
 * used on; -1 (none kept) when one cannot be recorded: the next reap tries again. */
static int deferred_record_locked(pool_arena *p, pool_uses *u) {
    POOL_ASSERT_LOCKED(p);
    const vram__backend *be = p->cfg.backend;
    for (int i = 0; i < u->nevents; i++) {
        if (be->event_record(p->cfg.dev, u->use[i].stream, &u->use[i].event) != VRAM_OK) {
            while (i-- > 0) be->event_destroy(p->cfg.dev, u->use[i].event);
            return -1;
        }
    }
    u->unrecorded = 0;
    return 0;
}

/* Gives the deferred blocks whose events have all completed to the free bins; with `wait`, waits
 * for them (a block whose event cannot be waited for stays). Without waiting, the list is walked
 * from the oldest free, and once a stream's event is found not completed, no later event on that
 * stream is asked about (a stream completes its work in order): about one query per stream a
 * call, however many blocks wait, as vram__pending_reap_locked does. */
VRAM_NOINLINE void vram__deferred_reap_locked(pool_arena *p, int wait) {
    POOL_ASSERT_LOCKED(p);
    const vram__backend *be = p->cfg.backend;
    if (capture_underway(p)) return;
    void *blocked[PENDING_STREAMS_TRACKED];
    int nblocked = 0;
    pool_chunk *prev = NULL;
    for (pool_chunk *c = p->order.deferred; c != NULL;) {
        pool_uses *u = c->uses;
        pool_chunk *next = u->next;
        if (u->unrecorded && deferred_record_locked(p, u) != 0) {   /* freed during a capture */
            prev = c;
            c = next;
            continue;
        }
        while (u->done < u->nevents) {
            void *stream = u->use[u->done].stream;
            int done = 0, skip = 0;
            for (int k = 0; !wait && k < nblocked && !skip; k++) skip = blocked[k] == stream;
            if (skip) break;
            if (be->event_query(p->cfg.dev, u->use[u->done].event, &done) != VRAM_OK) done = 0;
            if (!done && wait && be->event_sync(p->cfg.dev, u->use[u->done].event) == VRAM_OK) done = 1;
            if (!done) {
                if (nblocked < PENDING_STREAMS_TRACKED) blocked[nblocked++] = stream;
                break;
            }
            be->event_destroy(p->cfg.dev, u->use[u->done++].event);
        }
        if (u->done < u->nevents) {
            prev = c;
            c = next;
            continue;
        }
        if (prev != NULL) prev->uses->next = next; else p->order.deferred = next;
        if (p->order.deferred_tail == c) p->order.deferred_tail = prev;
        p->order.deferred_count--;
        vram__note_deferred_locked(p, c, 0);
        free(u);
        c->uses = NULL;
        vram__chunk_make_free_locked(p, c, 1);
        c = next;
    }
}

/* ---- one stream ----------------------------------------------------------------------------- *
 *
 * PyTorch runs most programs on one stream, and its own allocator hands a block freed on a stream
 * back to that stream at once, merged with its free neighbours. So does an arena whose
 * stream-ordered requests have all come on one stream S ("solo"): an owned-stream free on S goes
 * straight to the free bins, since everything that can take it from there is ordered after the
 * free on S. Three things are not, and each waits for S first (one event, recorded and waited
 * for, only if a block was freed that way since the last wait): giving memory back to the driver
 * (trim, idle release, unmapping under the limit, destruction), which S's queued work may still
 * touch; and the first request that is plain or on another stream, after which the arena is no
 * longer solo and frees go through events as before (SOLO_OFF, for good). */

/* Waits until S has done everything queued before now; 0, or -1 when the driver refused. */
int vram__solo_fence_locked(pool_arena *p) {
    POOL_ASSERT_LOCKED(p);
    if (p->solo.state != SOLO_ON || p->solo.unfenced == 0) return 0;
    if (capture_underway(p)) return -1;            /* no wait while a capture is underway */
    const vram__backend *be = p->cfg.backend;
    void *ev = NULL;
    if (be->event_record(p->cfg.dev, p->solo.stream, &ev) != VRAM_OK) return -1;
    vram_status s = be->event_sync(p->cfg.dev, ev);
    be->event_destroy(p->cfg.dev, ev);
    if (s != VRAM_OK) return -1;
    p->solo.unfenced = 0;
    return 0;
}
