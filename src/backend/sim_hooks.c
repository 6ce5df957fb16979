/*
 * sim_hooks.c: the simulated backend's test hooks (sim_hooks.h): fault injection and control of
 * simulated streams. Each takes vram__sim_lock.
 */
#include <pthread.h>

#include "backend/sim_hooks.h"
#include "backend/sim_internal.h"

void vram__sim_fail_maps(int maps, int unmaps) {
    pthread_mutex_lock(&vram__sim_lock);
    vram__sim_st.map_failures = maps > 0 ? maps : 0;   /* (until the backend closes) */
    vram__sim_st.unmap_failures = unmaps > 0 ? unmaps : 0;
    pthread_mutex_unlock(&vram__sim_lock);
}

void vram__sim_fail_copies(int copies, int host_allocs) {
    pthread_mutex_lock(&vram__sim_lock);
    vram__sim_st.copy_failures = copies > 0 ? copies : 0;   /* (until the backend closes) */
    vram__sim_st.host_failures = host_allocs > 0 ? host_allocs : 0;
    pthread_mutex_unlock(&vram__sim_lock);
}

void vram__sim_fail_event_records(int n) {
    pthread_mutex_lock(&vram__sim_lock);
    vram__sim_st.event_failures = n > 0 ? n : 0;   /* (until the backend closes) */
    pthread_mutex_unlock(&vram__sim_lock);
}

void vram__sim_stream_complete(void *stream) {
    pthread_mutex_lock(&vram__sim_lock);
    sim_stream *s = vram__sim_stream_find(stream);
    if (s != NULL) s->completed = s->recorded;
    pthread_cond_broadcast(&vram__sim_stream_done);
    pthread_mutex_unlock(&vram__sim_lock);
}

void vram__sim_hold_event_syncs(int on) {
    pthread_mutex_lock(&vram__sim_lock);
    vram__sim_hold_syncs = on;
    pthread_cond_broadcast(&vram__sim_stream_done);
    pthread_mutex_unlock(&vram__sim_lock);
}

int vram__sim_syncs_waiting(void) {
    pthread_mutex_lock(&vram__sim_lock);
    int n = vram__sim_syncs_blocked;
    pthread_mutex_unlock(&vram__sim_lock);
    return n;
}
