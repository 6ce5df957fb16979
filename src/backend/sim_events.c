/*
 * sim_events.c: the simulated backend's streams and events: every stream has a recorded and a
 * completed sequence number, an event is done once the completed one reaches its own. Entry points
 * take vram__sim_lock; event_sync may wait on vram__sim_stream_done (vram__sim_hold_event_syncs).
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

/* ---- streams and events --------------------------------------------------------------------- */

sim_stream *vram__sim_stream_find(void *stream) {
    for (sim_stream *s = vram__sim_st.streams; s != NULL; s = s->next)
        if (s->stream == stream) return s;
    return NULL;
}

static sim_stream *sim_stream_get(void *stream) {
    sim_stream *s = vram__sim_stream_find(stream);
    if (s != NULL) return s;
    if ((s = calloc(1, sizeof *s)) == NULL) return NULL;
    s->stream = stream;
    s->next = vram__sim_st.streams;
    vram__sim_st.streams = s;
    return s;
}

static vram_status sim_event_record_locked(int dev, void *stream, void **event) {
    char call[64];
    snprintf(call, sizeof call, "cuEventRecord(stream %p)", stream);
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    if (event == NULL) return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EINVAL, "NULL event");
    if (vram__sim_st.event_failures > 0) {
        vram__sim_st.event_failures--;
        return vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_ELAUNCH, "injected by vram__sim_fail_event_records");
    }
    sim_event *ev = malloc(sizeof *ev);
    sim_stream *st = ev != NULL ? sim_stream_get(stream) : NULL;
    if (st == NULL || vram__sim_tab_reserve(&vram__sim_st.events) != 0) {
        free(ev);
        return vram__sim_host_oom(call, dev);
    }
    ev->dev = dev;
    ev->stream = st;
    ev->seq = ++st->recorded;
    vram__sim_tab_put(&vram__sim_st.events, (uint64_t)(uintptr_t)ev, ev);
    SIM_COUNT(event_record);
    *event = ev;
    return VRAM_OK;
}

vram_status vram__sim_event_record(int dev, void *stream, void **event) {
    SIM_LOCKED(sim_event_record_locked(dev, stream, event));
}

/* The live event of dev, or NULL with the message set. */
static sim_event *sim_event_of(const char *call, int dev, void *event) {
    sim_event *ev = vram__sim_tab_get(&vram__sim_st.events, (uint64_t)(uintptr_t)event);
    if (ev != NULL && ev->dev == dev) return ev;
    vram__sim_fail(VRAM_ERR_DRIVER, call, dev, SIM_EHANDLE, "%p is not an event recorded on this device",
             event);
    return NULL;
}

static vram_status sim_event_query_locked(int dev, void *event, int *done) {
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    sim_event *ev = sim_event_of("cuEventQuery", dev, event);
    if (ev == NULL) return VRAM_ERR_DRIVER;
    if (done == NULL)
        return vram__sim_fail(VRAM_ERR_DRIVER, "cuEventQuery", dev, SIM_EINVAL, "NULL done");
    *done = ev->seq <= ev->stream->completed;
    SIM_COUNT(event_query);
    return VRAM_OK;
}

vram_status vram__sim_event_query(int dev, void *event, int *done) {
    SIM_LOCKED(sim_event_query_locked(dev, event, done));
}

static vram_status sim_event_sync_locked(int dev, void *event) {
    vram_status s = vram__sim_check_dev(dev);
    if (s != VRAM_OK) return s;
    sim_event *ev = sim_event_of("cuEventSynchronize", dev, event);
    if (ev == NULL) return VRAM_ERR_DRIVER;
    if (ev->stream->completed < ev->seq) ev->stream->completed = ev->seq;
    SIM_COUNT(event_sync);
    return VRAM_OK;
}

vram_status vram__sim_event_sync(int dev, void *event) {
    pthread_mutex_lock(&vram__sim_lock);
    sim_event *ev = vram__sim_check_dev(dev) == VRAM_OK ? vram__sim_tab_get(&vram__sim_st.events, (uint64_t)(uintptr_t)event)
                                                  : NULL;
    if (ev != NULL && vram__sim_hold_syncs && ev->stream->completed < ev->seq) {
        vram__sim_syncs_blocked++;            /* as the driver does: until the stream got there */
        while (vram__sim_hold_syncs && ev->stream->completed < ev->seq) {
            pthread_cond_wait(&vram__sim_stream_done, &vram__sim_lock);
        }
        vram__sim_syncs_blocked--;
    }
    vram_status s = sim_event_sync_locked(dev, event);
    pthread_mutex_unlock(&vram__sim_lock);
    return s;
}

/* Never fails and never touches the thread's last error; an unknown event is ignored. */
void vram__sim_event_destroy(int dev, void *event) {
    (void)dev;
    pthread_mutex_lock(&vram__sim_lock);
    sim_event *ev = vram__sim_tab_get(&vram__sim_st.events, (uint64_t)(uintptr_t)event);
    if (ev != NULL) {
        vram__sim_tab_del(&vram__sim_st.events, (uint64_t)(uintptr_t)event);
        free(ev);
    }
    pthread_mutex_unlock(&vram__sim_lock);
}
