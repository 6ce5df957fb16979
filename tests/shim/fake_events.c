/*
 * fake_events.c: the fake driver's streams and events (fake_cuda.c says what the fake models).
 *
 * The fake runs no kernels. By default a stream's work is done as soon as it is queued: an event is
 * complete once recorded. With FAKE_CUDA_STREAMS=lazy (what the library's tests on the CUDA backend
 * use: the simulated backend's model) the work of every stream stays pending until a wait reaches it
 * (cuEventSynchronize: up to the event; cuStreamSynchronize, cuCtxSynchronize: all of it; the wait
 * itself returns at once) or a test completes it (fake_cuda_stream_complete), as kernels that run for
 * as long as nobody waits. After fake_cuda_hold_waits(1) a wait does not finish the work itself: it
 * blocks until fake_cuda_stream_complete reaches what it waits for (fake_cuda_waiting says how many
 * are blocked), as the driver waits for a GPU still busy; fake_cuda_hold_waits(0) lets them all go.
 * Streams: the default streams (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) and those of
 * cuStreamCreate, which belong to the context current when they were made, or any other value a
 * program passes: the fake does not police stream handles (a real driver's answer to a bad one is
 * undefined) and takes it as a stream of the current context. A stream is known by its value alone
 * (the NULL stream of every context is one).
 *
 *   cuEventCreate       needs a current context (the event's); flags CU_EVENT_DEFAULT,
 *                       CU_EVENT_BLOCKING_SYNC, CU_EVENT_DISABLE_TIMING, CU_EVENT_INTERPROCESS (the
 *                       last with DISABLE_TIMING only)
 *   cuEventRecord       captures the stream's work so far; the event's context must be the stream's
 *                       (else CUDA_ERROR_INVALID_HANDLE)
 *   cuEventQuery        CUDA_SUCCESS when the captured work is done (or the event was never
 *                       recorded), else CUDA_ERROR_NOT_READY
 *   cuEventSynchronize  waits until it is done; cuStreamSynchronize and cuCtxSynchronize (every
 *                       stream) likewise; cuStreamQuery asks as cuEventQuery does
 *   cuEventDestroy(_v2) an unknown or destroyed event is CUDA_ERROR_INVALID_HANDLE
 *   cuStreamDestroy_v2  a stream of cuStreamCreate (its pending work still completes)
 *
 * Invariants: an event's seq is at most its stream's `recorded`; done <= recorded, and done ==
 * recorded after every record unless the streams are lazy. Locks: fake_ev_mu guards streams, events
 * and the waits and is never held with fake_mu (the context is looked up before it is taken);
 * blocked waits sleep on fake_ev_done, which fake_cuda_stream_complete and fake_cuda_hold_waits
 * broadcast.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

#define FAKE_EVENT_FLAGS 0xfu   /* DEFAULT 0, BLOCKING_SYNC 1, DISABLE_TIMING 2, INTERPROCESS 4 */

typedef struct fake_stream {
    uintptr_t id;                 /* the CUstream value */
    int created;                  /* by cuStreamCreate (and not destroyed) */
    int dev;                      /* created: its context's device */
    unsigned long long recorded;  /* records so far */
    unsigned long long done;      /* records whose work is done */
} fake_stream;

typedef struct fake_event {
    uintptr_t id;
    int dev;                      /* its context's device */
    uintptr_t stream;             /* 0 with recorded 0 */
    int recorded;
    unsigned long long seq;
} fake_event;

static pthread_mutex_t fake_ev_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fake_ev_done = PTHREAD_COND_INITIALIZER;
static fake_stream *fake_streams;
static fake_event *fake_events;
static size_t fake_nstreams, fake_streams_cap, fake_nevents, fake_events_cap;
static uintptr_t fake_next_stream = 1, fake_next_event = 1;
static int fake_hold, fake_waiting;   /* fake_cuda_hold_waits; waits blocked now */

static fake_stream *fake_stream_find_unsafe(uintptr_t id) {
    for (size_t i = 0; i < fake_nstreams; i++)
        if (fake_streams[i].id == id) return &fake_streams[i];
    return NULL;
}

/* The record of stream `id`, made on first use; NULL when memory is short. */
static fake_stream *fake_stream_get_unsafe(uintptr_t id) {
    fake_stream *s = fake_stream_find_unsafe(id);
    if (s) return s;
    if (fake_reserve((void **)&fake_streams, &fake_streams_cap, fake_nstreams, 1, sizeof *fake_streams) != 0)
        return NULL;
    s = &fake_streams[fake_nstreams++];
    memset(s, 0, sizeof *s);
    s->id = id;
    s->dev = -1;
    return s;
}

static fake_event *fake_event_find_unsafe(uintptr_t id) {
    for (size_t i = 0; i < fake_nevents; i++)
        if (fake_events[i].id == id) return &fake_events[i];
    return NULL;
}

static int fake_lazy(void) {
    const char *v = getenv("FAKE_CUDA_STREAMS");
    return v && strcmp(v, "lazy") == 0;
}

static int fake_event_done_unsafe(const fake_event *e) {
    if (!e->recorded) return 1;
    const fake_stream *s = fake_stream_find_unsafe(e->stream);
    return !s || e->seq <= s->done;
}

/* ---- streams ------------------------------------------------------------------------------------- */

SHIM_EXPORT int fake_cuda_stream_complete(void *stream) {
    pthread_mutex_lock(&fake_ev_mu);
    fake_stream *s = fake_stream_get_unsafe((uintptr_t)stream);
    if (s) s->done = s->recorded;
    pthread_cond_broadcast(&fake_ev_done);
    pthread_mutex_unlock(&fake_ev_mu);
    return s ? 0 : -1;
}

SHIM_EXPORT void fake_cuda_hold_waits(int on) {
    pthread_mutex_lock(&fake_ev_mu);
    fake_hold = on != 0;
    pthread_cond_broadcast(&fake_ev_done);
    pthread_mutex_unlock(&fake_ev_mu);
}

SHIM_EXPORT int fake_cuda_waiting(void) {
    pthread_mutex_lock(&fake_ev_mu);
    int n = fake_waiting;
    pthread_mutex_unlock(&fake_ev_mu);
    return n;
}

/* A blocked wait (caller holds fake_ev_mu). */
static void fake_wait_unsafe(void) {
    fake_waiting++;
    pthread_cond_wait(&fake_ev_done, &fake_ev_mu);
    fake_waiting--;
}

CUresult impl_cuStreamCreate(CUstream *stream, unsigned int flags) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    if (!stream || (flags & ~1u)) return CUDA_ERROR_INVALID_VALUE;   /* CU_STREAM_DEFAULT, CU_STREAM_NON_BLOCKING */
    pthread_mutex_lock(&fake_ev_mu);
    uintptr_t id = 0xfa4e000000000000ull | (unsigned long long)FAKE_OBJ_STREAM << 40 | fake_next_stream++;
    fake_stream *s = fake_stream_get_unsafe(id);
    if (!s) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        s->created = 1;
        s->dev = dev;
        *stream = (CUstream)id;
    }
    pthread_mutex_unlock(&fake_ev_mu);
    return r;
}

CUresult impl_cuStreamDestroy_v2(CUstream stream) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&fake_ev_mu);
    fake_stream *s = fake_stream_find_unsafe((uintptr_t)stream);
    if (!s || !s->created) r = CUDA_ERROR_INVALID_HANDLE;
    else s->created = 0;   /* the record stays: events recorded on it still complete with it */
    pthread_mutex_unlock(&fake_ev_mu);
    return r;
}

CUresult impl_cuStreamQuery(CUstream stream) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&fake_ev_mu);
    const fake_stream *s = fake_stream_find_unsafe((uintptr_t)stream);
    CUresult r = s && s->done < s->recorded ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
    pthread_mutex_unlock(&fake_ev_mu);
    return r;
}

static CUresult fake_stream_sync(CUstream stream) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&fake_ev_mu);
    for (;;) {
        fake_stream *s = fake_stream_find_unsafe((uintptr_t)stream);
        if (s && !fake_hold) s->done = s->recorded;   /* lazy work finishes when waited for */
        if (!s || s->done >= s->recorded) break;
        fake_wait_unsafe();
    }
    pthread_mutex_unlock(&fake_ev_mu);
    return CUDA_SUCCESS;
}

/* CUDA 13's version: the context given (NULL: the current one); the fake waits for every stream. */
CUresult impl_cuCtxSynchronize_v2(CUcontext ctx) {
    (void)ctx;
    return impl_cuCtxSynchronize();
}

CUresult impl_cuStreamSynchronize(CUstream stream) { return fake_stream_sync(stream); }
CUresult impl_cuStreamSynchronize_ptsz(CUstream stream) { return fake_stream_sync(stream); }

/* Waits for the work of every stream (the fake does not tell contexts' streams apart here). */
CUresult impl_cuCtxSynchronize(void) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&fake_ev_mu);
    for (;;) {
        int pending = 0;
        for (size_t i = 0; i < fake_nstreams && !fake_hold; i++) fake_streams[i].done = fake_streams[i].recorded;
        for (size_t i = 0; i < fake_nstreams && !pending; i++) pending = fake_streams[i].done < fake_streams[i].recorded;
        if (!pending) break;
        fake_wait_unsafe();
    }
    pthread_mutex_unlock(&fake_ev_mu);
    return CUDA_SUCCESS;
}

/* ---- events -------------------------------------------------------------------------------------- */

CUresult impl_cuEventCreate(CUevent *event, unsigned int flags) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    if (!event || (flags & ~FAKE_EVENT_FLAGS) || ((flags & 4u) && !(flags & 2u))) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fake_ev_mu);
    if (fake_reserve((void **)&fake_events, &fake_events_cap, fake_nevents, 1, sizeof *fake_events) != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        fake_event *e = &fake_events[fake_nevents++];
        memset(e, 0, sizeof *e);
        e->id = 0xfa4e000000000000ull | (unsigned long long)FAKE_OBJ_EVENT << 40 | fake_next_event++;
        e->dev = dev;
        *event = (CUevent)e->id;
    }
    pthread_mutex_unlock(&fake_ev_mu);
    return r;
}

CUresult impl_cuEventRecord(CUevent event, CUstream stream) {
    int dev = -1;
    CUresult r = fake_current_device(&dev);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&fake_ev_mu);
    fake_event *e = fake_event_find_unsafe((uintptr_t)event);
    fake_stream *s = e ? fake_stream_get_unsafe((uintptr_t)stream) : NULL;
    if (!e) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else if (!s) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (e->dev != (s->created ? s->dev : dev)) {
        r = CUDA_ERROR_INVALID_HANDLE;   /* the event and the stream are of different contexts */
    } else {
        s->recorded++;
        if (!fake_lazy()) s->done = s->recorded;
        e->stream = s->id;
        e->recorded = 1;
        e->seq = s->recorded;
    }
    pthread_mutex_unlock(&fake_ev_mu);
    return r;
}

CUresult impl_cuEventQuery(CUevent event) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&fake_ev_mu);
    const fake_event *e = fake_event_find_unsafe((uintptr_t)event);
    CUresult r = !e ? CUDA_ERROR_INVALID_HANDLE : fake_event_done_unsafe(e) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&fake_ev_mu);
    return r;
}

CUresult impl_cuEventSynchronize(CUevent event) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&fake_ev_mu);
    for (;;) {
        const fake_event *e = fake_event_find_unsafe((uintptr_t)event);
        fake_stream *s = e && e->recorded ? fake_stream_find_unsafe(e->stream) : NULL;
        if (s && !fake_hold && s->done < e->seq) s->done = e->seq;   /* lazy work finishes when waited for */
        if (!e) r = CUDA_ERROR_INVALID_HANDLE;
        if (!e || fake_event_done_unsafe(e)) break;
        fake_wait_unsafe();
    }
    pthread_mutex_unlock(&fake_ev_mu);
    return r;
}

CUresult impl_cuEventDestroy_v2(CUevent event) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&fake_ev_mu);
    fake_event *e = fake_event_find_unsafe((uintptr_t)event);
    if (!e) r = CUDA_ERROR_INVALID_HANDLE;
    else *e = fake_events[--fake_nevents];
    pthread_mutex_unlock(&fake_ev_mu);
    return r;
}

CUresult impl_cuEventDestroy(CUevent event) { return impl_cuEventDestroy_v2(event); }

SHIM_EXPORT size_t fake_cuda_events(void) {
    pthread_mutex_lock(&fake_ev_mu);
    size_t n = fake_nevents;
    pthread_mutex_unlock(&fake_ev_mu);
    return n;
}

/* ---- the exported functions ---------------------------------------------------------------------- */

FAKE_EXPORT(cuStreamCreate, (CUstream *stream, unsigned int flags), (stream, flags))
FAKE_EXPORT(cuStreamDestroy_v2, (CUstream stream), (stream))
FAKE_EXPORT(cuStreamQuery, (CUstream stream), (stream))
FAKE_EXPORT(cuStreamSynchronize, (CUstream stream), (stream))
FAKE_EXPORT(cuStreamSynchronize_ptsz, (CUstream stream), (stream))
FAKE_EXPORT(cuCtxSynchronize, (void), ())
FAKE_EXPORT(cuCtxSynchronize_v2, (CUcontext ctx), (ctx))
FAKE_EXPORT(cuEventCreate, (CUevent *event, unsigned int flags), (event, flags))
FAKE_EXPORT(cuEventRecord, (CUevent event, CUstream stream), (event, stream))
FAKE_EXPORT(cuEventQuery, (CUevent event), (event))
FAKE_EXPORT(cuEventSynchronize, (CUevent event), (event))
FAKE_EXPORT(cuEventDestroy, (CUevent event), (event))
FAKE_EXPORT(cuEventDestroy_v2, (CUevent event), (event))
