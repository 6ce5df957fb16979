/*
 * sim_hooks.h: test hooks of the simulated backend (backend/sim_hooks.c), outside the driver
 * contract of backend.h: tests use them to complete simulated streams, make driver calls fail and
 * hold event waits. Each call takes the simulated backend's lock; the failures to come last until
 * the backend closes.
 */
#ifndef VRAM_BACKEND_SIM_HOOKS_H
#define VRAM_BACKEND_SIM_HOOKS_H

/* Completes all work queued so far on a simulated stream, so that events recorded on it report done. */
void vram__sim_stream_complete(void *stream);
/* The next n event records fail (VRAM_ERR_DRIVER, CUDA_ERROR_LAUNCH_FAILED), as after a kernel
 * fault; 0 stops it. */
void vram__sim_fail_event_records(int n);
/* The next `maps` maps fail (CUDA_ERROR_OUT_OF_MEMORY) and the next `unmaps` unmaps
 * (CUDA_ERROR_LAUNCH_FAILED); 0, 0 stops it. */
void vram__sim_fail_maps(int maps, int unmaps);
/* The next `copies` copies between host and device memory fail (CUDA_ERROR_LAUNCH_FAILED) and the next
 * `host_allocs` pinned host allocations (CUDA_ERROR_OUT_OF_MEMORY); 0, 0 stops it. */
void vram__sim_fail_copies(int copies, int host_allocs);
/* With 1, event_sync blocks until vram__sim_stream_complete() reaches the event (as the driver's
 * does); 0 releases every waiter. vram__sim_syncs_waiting(): how many event_sync calls are blocked
 * now. */
void vram__sim_hold_event_syncs(int on);
int  vram__sim_syncs_waiting(void);

/* Overflow (sim_overflow.c): the host bytes device `dev`'s overflow memory holds now (apart from the
 * card's), and the next n overflow allocations fail (CUDA_ERROR_OUT_OF_MEMORY); 0 stops it. */
size_t vram__sim_overflow_bytes(int dev);
void   vram__sim_fail_overflow(int n);

#endif /* VRAM_BACKEND_SIM_HOOKS_H */
