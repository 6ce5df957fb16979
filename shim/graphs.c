/*
 * graphs.c: the interposed calls through which CUDA graphs with memory nodes take device memory:
 * instantiation (cuGraphInstantiate and _v2, cuGraphInstantiateWithFlags, cuGraphInstantiateWithParams
 * and _ptsz, which uploads at once with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD), cuGraphUpload and
 * cuGraphLaunch (and _ptsz), cuGraphExecDestroy and cuDeviceGraphMemTrim.
 *
 * The driver backs the memory nodes of a graph (cuGraphAddMemAllocNode, or cuMemAllocAsync captured
 * in a stream) with physical memory from a per-device graph memory reserve when the graph is
 * uploaded or launched, keeps it for the graph's next launches, and gives back what no graph uses at
 * cuDeviceGraphMemTrim. held.c counts that reserve as the driver reports it. Here: at instantiation
 * the graph's memory nodes are summed per device (child graphs included, each node rounded up to
 * the device's granularity) and kept with the exec (table.c, kinds GRAPH and GRAPHDEV); before an
 * upload or a launch that may map memory (the exec was not mapped since the last trim of graph
 * memory on that device), that sum is reserved against the limit (shim_take: the device's unused
 * pool and graph memory goes back first when it would not fit), and refused with
 * CUDA_ERROR_OUT_OF_MEMORY without calling the driver when it does not fit; after the driver's answer
 * the reserve is re-read and the reservation given back. Nodes of conditional bodies are not summed
 * (the driver does not allow memory nodes there).
 *
 * Invariants: as calls.c's; an exec's records exist from its instantiation to its destruction. No
 * lock is taken here (g.mu inside table accesses, briefly).
 */
#include <stdint.h>
#include <stdlib.h>

#include "shim.h"

#define SHIM_GRAPH_DEPTH 16   /* child graphs nested deeper are not followed */

static unsigned long long shim_graph_key(CUgraphExec exec, int dev) {
    return (unsigned long long)(uintptr_t)exec | ((unsigned long long)(dev + 1) << 56);
}

/* Adds what the memory nodes of `graph` take per device into need[]. */
static void shim_graph_need(CUgraph graph, size_t need[SHIM_MAX_DEVICES], int depth) {
    size_t n = 0;
    if (depth > SHIM_GRAPH_DEPTH || !g.real.cuGraphGetNodes || !g.real.cuGraphNodeGetType ||
        g.real.cuGraphGetNodes(graph, NULL, &n) != CUDA_SUCCESS || n == 0)
        return;
    CUgraphNode *nodes = calloc(n, sizeof *nodes);
    if (!nodes || g.real.cuGraphGetNodes(graph, nodes, &n) != CUDA_SUCCESS) {
        free(nodes);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        CUgraphNodeType type;
        if (g.real.cuGraphNodeGetType(nodes[i], &type) != CUDA_SUCCESS) continue;
        if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && g.real.cuGraphMemAllocNodeGetParams) {
            CUDA_MEM_ALLOC_NODE_PARAMS p;
            if (g.real.cuGraphMemAllocNodeGetParams(nodes[i], &p) != CUDA_SUCCESS) continue;
            int dev = p.poolProps.location.id;
            if (p.poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE || dev < 0 || dev >= SHIM_MAX_DEVICES)
                continue;
            size_t gran = shim_granularity(dev);
            size_t b = p.bytesize > SIZE_MAX - (gran - 1) ? SIZE_MAX : (p.bytesize + gran - 1) & ~(gran - 1);
            need[dev] = b > SIZE_MAX - need[dev] ? SIZE_MAX : need[dev] + b;
        } else if (type == CU_GRAPH_NODE_TYPE_GRAPH && g.real.cuGraphChildGraphNodeGetGraph) {
            CUgraph child;
            if (g.real.cuGraphChildGraphNodeGetGraph(nodes[i], &child) == CUDA_SUCCESS)
                shim_graph_need(child, need, depth + 1);
        }
    }
    free(nodes);
}

/* The graph's needs; the mask of the devices with any. */
static unsigned long long shim_graph_needs(CUgraph graph, size_t need[SHIM_MAX_DEVICES]) {
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) need[d] = 0;
    shim_cuda_load();
    if (graph) shim_graph_need(graph, need, 0);
    unsigned long long mask = 0;
    for (int d = 0; d < SHIM_MAX_DEVICES; d++)
        if (need[d]) mask |= 1ull << d;
    return mask;
}

/* Keeps an instantiated exec's needs (mapped: the generation it was mapped in, 0 none). When the
 * table cannot hold them the exec is not followed: its launches then take memory held.c still sees. */
static void shim_graph_keep(CUgraphExec exec, const size_t need[SHIM_MAX_DEVICES], unsigned long long mask,
                            int mapped) {
    pthread_mutex_lock(&g.mu);
    shim_entry e = { .key = (unsigned long long)(uintptr_t)exec, .owner = mask, .kind = SHIM_KIND_GRAPH, .dev = -1 };
    int ok = shim_insert_unsafe(&e) == 0;
    for (int d = 0; ok && d < SHIM_MAX_DEVICES; d++) {
        if (!(mask >> d & 1)) continue;
        shim_entry r = { .key = shim_graph_key(exec, d), .size = need[d], .dev = d, .kind = SHIM_KIND_GRAPHDEV,
                         .at = mapped ? shim_held_graph_generation(d) : 0 };
        ok = shim_insert_unsafe(&r) == 0;   /* a device left out is launched as unknown */
    }
    pthread_mutex_unlock(&g.mu);
}

/* What a launch or upload of the exec may map per device (needs not mapped since the last trim). */
static unsigned long long shim_graph_pending(CUgraphExec exec, size_t need[SHIM_MAX_DEVICES]) {
    unsigned long long mask = 0;
    pthread_mutex_lock(&g.mu);
    shim_entry *e = shim_find_unsafe((unsigned long long)(uintptr_t)exec, SHIM_KIND_GRAPH);
    unsigned long long devs = e ? e->owner : 0;
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        need[d] = 0;
        if (!(devs >> d & 1)) continue;
        shim_entry *r = shim_find_unsafe(shim_graph_key(exec, d), SHIM_KIND_GRAPHDEV);
        if (r && r->at != shim_held_graph_generation(d)) {
            need[d] = r->size;
            mask |= 1ull << d;
        }
    }
    pthread_mutex_unlock(&g.mu);
    return mask;
}

static void shim_graph_mark_mapped(CUgraphExec exec, unsigned long long mask) {
    pthread_mutex_lock(&g.mu);
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        if (!(mask >> d & 1)) continue;
        shim_entry *r = shim_find_unsafe(shim_graph_key(exec, d), SHIM_KIND_GRAPHDEV);
        if (r) r->at = shim_held_graph_generation(d);
    }
    pthread_mutex_unlock(&g.mu);
}

/* Reserves need[d] on every device of mask (all or none); 0, or -1 when one is refused. */
static int shim_graph_reserve(const char *fn, unsigned long long mask, const size_t need[SHIM_MAX_DEVICES]) {
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        if (!(mask >> d & 1)) continue;
        shim_held_graph_on(d);
        if (shim_take(fn, d, need[d]) != 0) {
            for (int k = 0; k < d; k++)
                if (mask >> k & 1) shim_unreserve(k, need[k]);
            return -1;
        }
    }
    return 0;
}

/* After the driver's answer: graph memory re-read, the reservations given back. */
static void shim_graph_settle(unsigned long long mask, const size_t need[SHIM_MAX_DEVICES]) {
    for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
        if (!(mask >> d & 1)) continue;
        shim_held_settle(d, need[d]);
    }
}

/* ---- instantiation ------------------------------------------------------------------------------------ */

/* After an instantiation without upload: the exec's needs are kept, graph memory followed. */
static CUresult shim_graph_instantiated(CUresult r, CUgraphExec *exec, CUgraph graph) {
    if (r != CUDA_SUCCESS || !exec) return r;
    size_t need[SHIM_MAX_DEVICES];
    unsigned long long mask = shim_graph_needs(graph, need);
    if (!mask) return r;
    for (int d = 0; d < SHIM_MAX_DEVICES; d++)
        if (mask >> d & 1) shim_held_graph_on(d);
    shim_graph_keep(*exec, need, mask, 0);
    return r;
}

SHIM_EXPORT CUresult cuGraphInstantiate(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node, char *log,
                                        size_t log_size) {
    pfn_cuGraphInstantiate real = SHIM_REAL(cuGraphInstantiate);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    return shim_graph_instantiated(real(exec, graph, error_node, log, log_size), exec, graph);
}

SHIM_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node, char *log,
                                           size_t log_size) {
    pfn_cuGraphInstantiate_v2 real = SHIM_REAL(cuGraphInstantiate_v2);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    return shim_graph_instantiated(real(exec, graph, error_node, log, log_size), exec, graph);
}

SHIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
    pfn_cuGraphInstantiateWithFlags real = SHIM_REAL(cuGraphInstantiateWithFlags);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    return shim_graph_instantiated(real(exec, graph, flags), exec, graph);
}

/* With CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD the memory is mapped during the call: reserved before it. */
static CUresult shim_graph_instantiate_params(pfn_cuGraphInstantiateWithParams real, CUgraphExec *exec,
                                              CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
    if (!real) return CUDA_ERROR_NOT_FOUND;
    if (!params || !(params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
        return shim_graph_instantiated(real(exec, graph, params), exec, graph);
    size_t need[SHIM_MAX_DEVICES];
    unsigned long long mask = exec ? shim_graph_needs(graph, need) : 0;
    if (shim_graph_reserve("cuGraphInstantiateWithParams", mask, need) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(exec, graph, params);
    shim_graph_settle(mask, need);
    if (r == CUDA_SUCCESS && mask) shim_graph_keep(*exec, need, mask, 1);
    return r;
}

SHIM_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *exec, CUgraph graph,
                                                  CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
    return shim_graph_instantiate_params(SHIM_REAL(cuGraphInstantiateWithParams), exec, graph, params);
}

SHIM_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *exec, CUgraph graph,
                                                       CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
    return shim_graph_instantiate_params(SHIM_REAL(cuGraphInstantiateWithParams_ptsz), exec, graph, params);
}

/* ---- upload and launch -------------------------------------------------------------------------------- */

static CUresult shim_graph_run(pfn_cuGraphLaunch real, const char *fn, CUgraphExec exec, CUstream stream) {
    if (!real) return CUDA_ERROR_NOT_FOUND;
    size_t need[SHIM_MAX_DEVICES];
    unsigned long long mask = exec ? shim_graph_pending(exec, need) : 0;
    if (!mask) {
        /* an exec whose needs are not known (instantiated through an entry point kept as the driver
         * gave it) may map memory all the same: the device's graph memory is followed from now on */
        CUresult r = real(exec, stream);
        if (r == CUDA_SUCCESS) shim_held_graph_on(shim_current_device());
        return r;
    }
    if (shim_graph_reserve(fn, mask, need) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = real(exec, stream);
    shim_graph_settle(mask, need);
    if (r == CUDA_SUCCESS) shim_graph_mark_mapped(exec, mask);
    return r;
}

SHIM_EXPORT CUresult cuGraphUpload(CUgraphExec exec, CUstream stream) {
    return shim_graph_run(SHIM_REAL(cuGraphUpload), "cuGraphUpload", exec, stream);
}

SHIM_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream stream) {
    return shim_graph_run(SHIM_REAL(cuGraphUpload_ptsz), "cuGraphUpload", exec, stream);
}

SHIM_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
    return shim_graph_run(SHIM_REAL(cuGraphLaunch), "cuGraphLaunch", exec, stream);
}

SHIM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
    return shim_graph_run(SHIM_REAL(cuGraphLaunch_ptsz), "cuGraphLaunch", exec, stream);
}

/* ---- giving graph memory back ------------------------------------------------------------------------- */

SHIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
    pfn_cuGraphExecDestroy real = SHIM_REAL(cuGraphExecDestroy);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(exec);
    if (r != CUDA_SUCCESS || !exec) return r;
    unsigned long long mask = 0;
    pthread_mutex_lock(&g.mu);
    shim_entry *e = shim_find_unsafe((unsigned long long)(uintptr_t)exec, SHIM_KIND_GRAPH);
    if (e) {
        mask = e->owner;
        shim_remove_unsafe(e);
        for (int d = 0; d < SHIM_MAX_DEVICES; d++) {
            shim_entry *rec = (mask >> d & 1) ? shim_find_unsafe(shim_graph_key(exec, d), SHIM_KIND_GRAPHDEV) : NULL;
            if (rec) shim_remove_unsafe(rec);
        }
    }
    pthread_mutex_unlock(&g.mu);
    for (int d = 0; d < SHIM_MAX_DEVICES; d++)
        if (mask >> d & 1) shim_held_refresh(d);
    return r;
}

SHIM_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev) {
    pfn_cuDeviceGraphMemTrim real = SHIM_REAL(cuDeviceGraphMemTrim);
    if (!real) return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(dev);
    if (r == CUDA_SUCCESS) shim_held_graph_trimmed(dev);
    return r;
}
