/*
 * fake_graph.c: the fake driver's graphs and the device memory graphs hold (fake_cuda.c says what
 * the fake models). Only the nodes that concern memory exist: memory allocation nodes, memory free
 * nodes and child graph nodes.
 *
 * Graphs: cuGraphCreate, cuGraphDestroy (with its nodes and the graphs its child nodes hold),
 * cuGraphAddMemAllocNode (on a device; params->dptr gets an address fixed for the graph from the
 * fake's address counter), cuGraphAddMemFreeNode (of an allocation node's address, at most once per
 * graph), cuGraphAddChildGraphNode (the node holds a clone of the child, as the driver makes; memory
 * nodes are cloned with their addresses), cuGraphGetNodes, cuGraphNodeGetType,
 * cuGraphMemAllocNodeGetParams and cuGraphChildGraphNodeGetGraph.
 *
 * Executable graphs: cuGraphInstantiate (v1 and _v2: error node and log buffer),
 * cuGraphInstantiateWithFlags and cuGraphInstantiateWithParams (and _ptsz; the UPLOAD flag uploads at
 * once). A graph with memory nodes has at most one executable graph at a time, as the driver
 * documents. An executable graph needs B[dev], the sum of its allocation nodes' sizes (child graphs
 * included), each rounded up to 2 MiB. Per device, graph memory has reserved GR (held) and used GU.
 * The first upload (cuGraphUpload) or launch (cuGraphLaunch) maps it: when GR - GU < B, GR grows by
 * what is missing (out of memory past the card: the call fails and nothing changes), then GU += B;
 * later launches need nothing. cuGraphExecDestroy gives B back to GU (GR stays: the driver keeps it
 * cached); cuDeviceGraphMemTrim releases GR down to GU. A launch leaves the allocations that the graph
 * does not free live (device pointers that cuMemFree / cuMemFreeAsync free; they hold nothing
 * beyond GR) and frees those its free nodes name from elsewhere; relaunching while its own are still
 * live is CUDA_ERROR_INVALID_VALUE unless instantiated with AUTO_FREE_ON_LAUNCH, which frees them.
 * cuDeviceGetGraphMemAttribute reads GU, GR and their high-water marks.
 *
 * Invariants: GU[dev] is the sum of B[dev] of the mapped executable graphs, GU <= GR, and GR is in
 * held[] (fake_cuda.c). Locks: fake_mu (fake_lock) around every access to these lists.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

#define FAKE_INSTANTIATE_AUTO_FREE 1ull
#define FAKE_INSTANTIATE_DEVICE_LAUNCH 4ull
#define FAKE_INSTANTIATE_NODE_PRIORITY 8ull

typedef struct fake_graph {
    uintptr_t id;
    uintptr_t owner;      /* the child graph node that holds this clone; 0: made by the program */
    size_t execs;         /* its executable graphs alive */
} fake_graph;

typedef struct fake_node {
    uintptr_t id, graph;
    CUgraphNodeType type;
    int dev;                     /* alloc */
    size_t bytes;                /* alloc */
    CUdeviceptr dptr;            /* alloc: its address; free: the address it frees */
    CUmemPoolProps props;        /* alloc */
    CUmemAccessDesc *access;     /* alloc: a copy of the access descriptors */
    size_t naccess;
    uintptr_t child;             /* child graph node: the clone it holds */
} fake_node;

typedef struct fake_alloc_rec {
    CUdeviceptr dptr;
    size_t bytes;
    int dev;
} fake_alloc_rec;

typedef struct fake_exec {
    uintptr_t id, graph;         /* graph 0: destroyed since */
    unsigned long long flags;
    size_t need[FAKE_MAX_DEVICES];
    int mapped;
    fake_alloc_rec *allocs;      /* allocations the graph does not free: live after a launch */
    size_t nallocs, allocs_cap;
    CUdeviceptr *frees;          /* frees of allocations made elsewhere */
    size_t nfrees, frees_cap;
} fake_exec;

static fake_graph *fake_graphs;
static fake_node *fake_nodes;
static fake_exec *fake_execs;
static size_t fake_ngraphs, fake_graphs_cap, fake_nnodes, fake_nodes_cap, fake_nexecs, fake_execs_cap;
static size_t fake_gr[FAKE_MAX_DEVICES], fake_gu[FAKE_MAX_DEVICES];
static size_t fake_gr_high[FAKE_MAX_DEVICES], fake_gu_high[FAKE_MAX_DEVICES];

static fake_graph *fake_graph_find_unsafe(uintptr_t id) {
    for (size_t i = 0; i < fake_ngraphs && id; i++)
        if (fake_graphs[i].id == id) return &fake_graphs[i];
    return NULL;
}

static fake_node *fake_node_find_unsafe(uintptr_t id) {
    for (size_t i = 0; i < fake_nnodes && id; i++)
        if (fake_nodes[i].id == id) return &fake_nodes[i];
    return NULL;
}

static fake_exec *fake_exec_find_unsafe(uintptr_t id) {
    for (size_t i = 0; i < fake_nexecs && id; i++)
        if (fake_execs[i].id == id) return &fake_execs[i];
    return NULL;
}

/* ---- graphs and nodes ------------------------------------------------------------------------------- */

static CUresult fake_graph_new_unsafe(uintptr_t owner, uintptr_t *id) {
    if (fake_reserve((void **)&fake_graphs, &fake_graphs_cap, fake_ngraphs, 1, sizeof *fake_graphs) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fake_graphs[fake_ngraphs++] = (fake_graph){ .id = fake_opaque_unsafe(FAKE_OBJ_GRAPH), .owner = owner };
    *id = fake_graphs[fake_ngraphs - 1].id;
    return CUDA_SUCCESS;
}

/* Removes a graph, its nodes and the clones they hold (order of the other nodes kept). */
static void fake_graph_drop_unsafe(uintptr_t id) {
    for (;;) {
        size_t i = 0;
        while (i < fake_nnodes && fake_nodes[i].graph != id) i++;
        if (i == fake_nnodes) break;
        uintptr_t child = fake_nodes[i].child;
        free(fake_nodes[i].access);
        memmove(&fake_nodes[i], &fake_nodes[i + 1], (fake_nnodes - i - 1) * sizeof *fake_nodes);
        fake_nnodes--;
        if (child) fake_graph_drop_unsafe(child);
    }
    for (size_t i = 0; i < fake_nexecs; i++)
        if (fake_execs[i].graph == id) fake_execs[i].graph = 0;
    fake_graph *g = fake_graph_find_unsafe(id);
    if (g) *g = fake_graphs[--fake_ngraphs];
}

CUresult impl_cuGraphCreate(CUgraph *graph, unsigned int flags) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!graph || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t id = 0;
    fake_lock();
    CUresult r = fake_graph_new_unsafe(0, &id);
    fake_unlock();
    if (r == CUDA_SUCCESS) *graph = (CUgraph)id;
    return r;
}

CUresult impl_cuGraphDestroy(CUgraph graph) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_graph *g = fake_graph_find_unsafe((uintptr_t)graph);
    if (!g || g->owner) r = CUDA_ERROR_INVALID_VALUE;   /* a child node's graph goes with its node */
    else fake_graph_drop_unsafe(g->id);
    fake_unlock();
    return r;
}

/* Checks that a node may be added to graph after deps (nodes of that graph, each once) and that the
 * node list has room. */
static CUresult fake_node_check_unsafe(CUgraphNode *node, uintptr_t graph, const CUgraphNode *deps, size_t ndeps) {
    if (!node || (ndeps && !deps) || !fake_graph_find_unsafe(graph)) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < ndeps; i++) {
        const fake_node *d = fake_node_find_unsafe((uintptr_t)deps[i]);
        if (!d || d->graph != graph) return CUDA_ERROR_INVALID_VALUE;
        for (size_t k = 0; k < i; k++)
            if (deps[k] == deps[i]) return CUDA_ERROR_INVALID_VALUE;
    }
    if (fake_reserve((void **)&fake_nodes, &fake_nodes_cap, fake_nnodes, 1, sizeof *fake_nodes) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

CUresult impl_cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                     CUDA_MEM_ALLOC_NODE_PARAMS *params) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!params || params->bytesize == 0 || params->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        params->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        (params->accessDescCount && !params->accessDescs))
        return CUDA_ERROR_INVALID_VALUE;
    int dev = params->poolProps.location.id;
    if (dev < 0 || dev >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    CUmemAccessDesc *access = NULL;
    if (params->accessDescCount) {
        if (params->accessDescCount > SIZE_MAX / sizeof *access) return CUDA_ERROR_INVALID_VALUE;
        access = malloc(params->accessDescCount * sizeof *access);
        if (!access) return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(access, params->accessDescs, params->accessDescCount * sizeof *access);
    }
    fake_lock();
    CUresult r = fake_node_check_unsafe(node, (uintptr_t)graph, deps, ndeps);
    CUdeviceptr at = 0;
    if (r == CUDA_SUCCESS) {
        at = fake_address_unsafe(fake_round_up(params->bytesize, FAKE_GRANULE), FAKE_GRANULE, 0);
        if (!at) r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        fake_node *n = &fake_nodes[fake_nnodes++];
        *n = (fake_node){ .id = fake_opaque_unsafe(FAKE_OBJ_NODE), .graph = (uintptr_t)graph,
                          .type = CU_GRAPH_NODE_TYPE_MEM_ALLOC, .dev = dev, .bytes = params->bytesize, .dptr = at,
                          .props = params->poolProps, .access = access, .naccess = params->accessDescCount };
        params->dptr = at;
        *node = (CUgraphNode)n->id;
        access = NULL;
    }
    fake_unlock();
    free(access);
    return r;
}

/* Whether graph (with the graphs its child nodes hold) has a node of `type` at dptr (any address
 * when dptr is 0; any memory node when type is 0). */
static int fake_graph_has_unsafe(uintptr_t graph, CUgraphNodeType type, CUdeviceptr dptr) {
    for (size_t i = 0; i < fake_nnodes; i++) {
        const fake_node *n = &fake_nodes[i];
        if (n->graph != graph) continue;
        if (n->type == CU_GRAPH_NODE_TYPE_GRAPH && fake_graph_has_unsafe(n->child, type, dptr)) return 1;
        if (n->type != CU_GRAPH_NODE_TYPE_GRAPH && (!type || n->type == type) && (!dptr || n->dptr == dptr)) return 1;
    }
    return 0;
}

CUresult impl_cuGraphAddMemFreeNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                    CUdeviceptr dptr) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    fake_lock();
    CUresult r = fake_node_check_unsafe(node, (uintptr_t)graph, deps, ndeps);
    if (r == CUDA_SUCCESS) {
        int known = 0;   /* an allocation node's address (of any graph), or a live graph allocation */
        for (size_t i = 0; i < fake_nnodes && !known; i++)
            known = fake_nodes[i].type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && fake_nodes[i].dptr == dptr;
        const fake_block *b = fake_block_find_unsafe(dptr);
        known = known || (b && b->kind == FAKE_BLOCK_GRAPH);
        if (!known || fake_graph_has_unsafe((uintptr_t)graph, CU_GRAPH_NODE_TYPE_MEM_FREE, dptr))
            r = CUDA_ERROR_INVALID_VALUE;
    }
    if (r == CUDA_SUCCESS) {
        fake_node *n = &fake_nodes[fake_nnodes++];
        *n = (fake_node){ .id = fake_opaque_unsafe(FAKE_OBJ_NODE), .graph = (uintptr_t)graph,
                          .type = CU_GRAPH_NODE_TYPE_MEM_FREE, .dev = -1, .dptr = dptr };
        *node = (CUgraphNode)n->id;
    }
    fake_unlock();
    return r;
}

/* A copy of graph src, held by the node `owner`, in *out (on failure nothing is left of it). */
static CUresult fake_graph_clone_unsafe(uintptr_t src, uintptr_t owner, uintptr_t *out) {
    uintptr_t id = 0;
    CUresult r = fake_graph_new_unsafe(owner, &id);
    if (r != CUDA_SUCCESS) return r;
    size_t n0 = fake_nnodes;   /* the clone only appends: src's nodes stay below n0 */
    for (size_t i = 0; i < n0 && r == CUDA_SUCCESS; i++) {
        if (fake_nodes[i].graph != src) continue;
        if (fake_reserve((void **)&fake_nodes, &fake_nodes_cap, fake_nnodes, 1, sizeof *fake_nodes) != 0) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        fake_node copy = fake_nodes[i];
        copy.id = fake_opaque_unsafe(FAKE_OBJ_NODE);
        copy.graph = id;
        copy.access = NULL;
        if (copy.naccess) {
            copy.access = malloc(copy.naccess * sizeof *copy.access);
            if (!copy.access) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                break;
            }
            memcpy(copy.access, fake_nodes[i].access, copy.naccess * sizeof *copy.access);
        }
        if (copy.type == CU_GRAPH_NODE_TYPE_GRAPH) {
            r = fake_graph_clone_unsafe(fake_nodes[i].child, copy.id, &copy.child);
            if (r == CUDA_SUCCESS &&
                fake_reserve((void **)&fake_nodes, &fake_nodes_cap, fake_nnodes, 1, sizeof *fake_nodes) != 0) {
                fake_graph_drop_unsafe(copy.child);
                r = CUDA_ERROR_OUT_OF_MEMORY;
            }
            if (r != CUDA_SUCCESS) {
                free(copy.access);
                break;
            }
        }
        fake_nodes[fake_nnodes++] = copy;
    }
    if (r != CUDA_SUCCESS) fake_graph_drop_unsafe(id);
    else *out = id;
    return r;
}

CUresult impl_cuGraphAddChildGraphNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                       CUgraph child) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    fake_lock();
    CUresult r = fake_node_check_unsafe(node, (uintptr_t)graph, deps, ndeps);
    if (r == CUDA_SUCCESS && (!fake_graph_find_unsafe((uintptr_t)child) || child == graph))
        r = CUDA_ERROR_INVALID_VALUE;
    uintptr_t id = 0, clone = 0;
    if (r == CUDA_SUCCESS) {
        id = fake_opaque_unsafe(FAKE_OBJ_NODE);
        r = fake_graph_clone_unsafe((uintptr_t)child, id, &clone);
    }
    if (r == CUDA_SUCCESS &&
        fake_reserve((void **)&fake_nodes, &fake_nodes_cap, fake_nnodes, 1, sizeof *fake_nodes) != 0) {
        fake_graph_drop_unsafe(clone);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        fake_nodes[fake_nnodes++] = (fake_node){ .id = id, .graph = (uintptr_t)graph, .type = CU_GRAPH_NODE_TYPE_GRAPH,
                                                 .dev = -1, .child = clone };
        *node = (CUgraphNode)id;
    }
    fake_unlock();
    return r;
}

/* nodes NULL: *count = how many; else the first *count of them (NULL past the last, and *count
 * then says how many there were). */
CUresult impl_cuGraphGetNodes(CUgraph graph, CUgraphNode *nodes, size_t *count) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    if (!fake_graph_find_unsafe((uintptr_t)graph)) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        size_t n = 0;
        for (size_t i = 0; i < fake_nnodes; i++) {
            if (fake_nodes[i].graph != (uintptr_t)graph) continue;
            if (nodes && n < *count) nodes[n] = (CUgraphNode)fake_nodes[i].id;
            n++;
        }
        if (nodes)
            for (size_t k = n; k < *count; k++) nodes[k] = NULL;
        if (!nodes || n < *count) *count = n;
    }
    fake_unlock();
    return r;
}

CUresult impl_cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!type) return CUDA_ERROR_INVALID_VALUE;
    fake_lock();
    const fake_node *n = fake_node_find_unsafe((uintptr_t)node);
    if (n) *type = n->type;
    fake_unlock();
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* params->accessDescs points at the node's own copy, valid while the node lives. */
CUresult impl_cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS *params) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!params) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    const fake_node *n = fake_node_find_unsafe((uintptr_t)node);
    if (!n || n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        params->poolProps = n->props;
        params->accessDescs = n->access;
        params->accessDescCount = n->naccess;
        params->bytesize = n->bytes;
        params->dptr = n->dptr;
    }
    fake_unlock();
    return r;
}

CUresult impl_cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph *child) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!child) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    const fake_node *n = fake_node_find_unsafe((uintptr_t)node);
    if (!n || n->type != CU_GRAPH_NODE_TYPE_GRAPH) r = CUDA_ERROR_INVALID_VALUE;
    else *child = (CUgraph)n->child;
    fake_unlock();
    return r;
}

/* ---- executable graphs and graph memory ---------------------------------------------------------- */

/* Adds graph's memory nodes (with those of the graphs its child nodes hold) to e: the allocations
 * to need[] and allocs, the frees to frees (sorted out by fake_exec_settle). */
static int fake_exec_collect_unsafe(fake_exec *e, uintptr_t graph) {
    for (size_t i = 0; i < fake_nnodes; i++) {
        const fake_node *n = &fake_nodes[i];
        if (n->graph != graph) continue;
        if (n->type == CU_GRAPH_NODE_TYPE_GRAPH) {
            if (fake_exec_collect_unsafe(e, n->child) != 0) return -1;
        } else if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
            if (fake_reserve((void **)&e->allocs, &e->allocs_cap, e->nallocs, 1, sizeof *e->allocs) != 0) return -1;
            e->allocs[e->nallocs++] = (fake_alloc_rec){ n->dptr, n->bytes, n->dev };
            e->need[n->dev] = fake_add_sat(e->need[n->dev], fake_round_up(n->bytes, FAKE_GRANULE));
        } else if (n->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
            if (fake_reserve((void **)&e->frees, &e->frees_cap, e->nfrees, 1, sizeof *e->frees) != 0) return -1;
            e->frees[e->nfrees++] = n->dptr;
        }
    }
    return 0;
}

/* An allocation freed in the graph is not live after a launch, and that free is no free of an
 * allocation made elsewhere. */
static void fake_exec_settle(fake_exec *e) {
    for (size_t f = e->nfrees; f-- > 0;) {
        for (size_t a = 0; a < e->nallocs; a++) {
            if (e->allocs[a].dptr != e->frees[f]) continue;
            e->allocs[a] = e->allocs[--e->nallocs];
            e->frees[f] = e->frees[--e->nfrees];
            break;
        }
    }
}

static void fake_exec_free(fake_exec *e) {
    free(e->allocs);
    free(e->frees);
}

/* Maps e's graph memory: GR grows by what GR - GU lacks of B, then GU += B. All devices or none. */
static CUresult fake_exec_map_unsafe(fake_exec *e) {
    if (e->mapped) return CUDA_SUCCESS;
    size_t grow[FAKE_MAX_DEVICES] = { 0 };
    for (int d = 0; d < FAKE_MAX_DEVICES; d++) {
        size_t idle = fake_gr[d] - fake_gu[d];
        grow[d] = e->need[d] > idle ? e->need[d] - idle : 0;
    }
    CUresult r = fake_hold_each_unsafe(grow);
    if (r != CUDA_SUCCESS) return r;
    for (int d = 0; d < FAKE_MAX_DEVICES; d++) {
        fake_gr[d] += grow[d];
        fake_gu[d] += e->need[d];
        if (fake_gr[d] > fake_gr_high[d]) fake_gr_high[d] = fake_gr[d];
        if (fake_gu[d] > fake_gu_high[d]) fake_gu_high[d] = fake_gu[d];
    }
    e->mapped = 1;
    return CUDA_SUCCESS;
}

static CUresult fake_instantiate(CUgraphExec *exec, CUgraph graph, unsigned long long flags, int upload) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!exec) return CUDA_ERROR_INVALID_VALUE;
    fake_exec e = { .flags = flags };
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_graph *g = fake_graph_find_unsafe((uintptr_t)graph);
    if (!g || (g->execs && fake_graph_has_unsafe(g->id, 0, 0)))   /* one executable graph with memory nodes */
        r = CUDA_ERROR_INVALID_VALUE;
    else if (fake_exec_collect_unsafe(&e, g->id) != 0 ||
             fake_reserve((void **)&fake_execs, &fake_execs_cap, fake_nexecs, 1, sizeof *fake_execs) != 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        fake_exec_settle(&e);
        if (upload) r = fake_exec_map_unsafe(&e);
    }
    if (r == CUDA_SUCCESS) {
        e.id = fake_opaque_unsafe(FAKE_OBJ_EXEC);
        e.graph = g->id;
        g->execs++;
        fake_execs[fake_nexecs++] = e;
        *exec = (CUgraphExec)e.id;
    } else {
        fake_exec_free(&e);
    }
    fake_unlock();
    return r;
}

static CUresult fake_instantiate_logged(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node, char *log,
                                        size_t log_size) {
    if (error_node) *error_node = NULL;
    if (log && log_size) log[0] = '\0';
    return fake_instantiate(exec, graph, 0, 0);
}

CUresult impl_cuGraphInstantiate(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node, char *log,
                                 size_t log_size) {
    return fake_instantiate_logged(exec, graph, error_node, log, log_size);
}

CUresult impl_cuGraphInstantiate_v2(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node, char *log,
                                    size_t log_size) {
    return fake_instantiate_logged(exec, graph, error_node, log, log_size);
}

/* The flags the driver takes (UPLOAD only through the parameters), AUTO_FREE not with DEVICE_LAUNCH. */
static int fake_instantiate_flags_ok(unsigned long long flags, int with_params) {
    unsigned long long known = FAKE_INSTANTIATE_AUTO_FREE | FAKE_INSTANTIATE_DEVICE_LAUNCH |
                               FAKE_INSTANTIATE_NODE_PRIORITY |
                               (with_params ? (unsigned long long)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD : 0);
    return !(flags & ~known) &&
           (flags & (FAKE_INSTANTIATE_AUTO_FREE | FAKE_INSTANTIATE_DEVICE_LAUNCH)) !=
               (FAKE_INSTANTIATE_AUTO_FREE | FAKE_INSTANTIATE_DEVICE_LAUNCH);
}

CUresult impl_cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
    if (!fake_instantiate_flags_ok(flags, 0)) return CUDA_ERROR_INVALID_VALUE;
    return fake_instantiate(exec, graph, flags, 0);
}

static CUresult fake_instantiate_params(CUgraphExec *exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
    if (!params) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fake_instantiate_flags_ok(params->flags, 1)
                     ? fake_instantiate(exec, graph, params->flags,
                                        (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0)
                     : CUDA_ERROR_INVALID_VALUE;
    params->hErrNode_out = NULL;
    params->result_out = r == CUDA_SUCCESS ? 0 : 1;   /* CUDA_GRAPH_INSTANTIATE_SUCCESS / _ERROR */
    return r;
}

CUresult impl_cuGraphInstantiateWithParams(CUgraphExec *exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
    return fake_instantiate_params(exec, graph, params);
}

CUresult impl_cuGraphInstantiateWithParams_ptsz(CUgraphExec *exec, CUgraph graph,
                                                CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
    return fake_instantiate_params(exec, graph, params);
}

static CUresult fake_upload(CUgraphExec exec) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    fake_lock();
    fake_exec *e = fake_exec_find_unsafe((uintptr_t)exec);
    CUresult r = e ? fake_exec_map_unsafe(e) : CUDA_ERROR_INVALID_VALUE;
    fake_unlock();
    return r;
}

CUresult impl_cuGraphUpload(CUgraphExec exec, CUstream stream) {
    (void)stream;
    return fake_upload(exec);
}

CUresult impl_cuGraphUpload_ptsz(CUgraphExec exec, CUstream stream) {
    (void)stream;
    return fake_upload(exec);
}

/* A launch: maps the graph memory if needed, then its allocations not freed in the graph become
 * live device pointers and its frees of allocations made elsewhere free them. */
static CUresult fake_launch(CUgraphExec exec) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_exec *e = fake_exec_find_unsafe((uintptr_t)exec);
    if (!e) r = CUDA_ERROR_INVALID_VALUE;
    for (size_t a = 0; e && a < e->nallocs && r == CUDA_SUCCESS; a++) {
        const fake_block *b = fake_block_find_unsafe(e->allocs[a].dptr);
        if (b && !(b->kind == FAKE_BLOCK_GRAPH && (e->flags & FAKE_INSTANTIATE_AUTO_FREE)))
            r = CUDA_ERROR_INVALID_VALUE;   /* still live from an earlier launch */
    }
    if (r == CUDA_SUCCESS && fake_blocks_reserve_unsafe(e->nallocs) != 0) r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) r = fake_exec_map_unsafe(e);
    if (r == CUDA_SUCCESS) {
        for (size_t a = 0; a < e->nallocs; a++) {
            fake_block *b = fake_block_find_unsafe(e->allocs[a].dptr);
            if (b) fake_block_remove_unsafe(b);   /* AUTO_FREE_ON_LAUNCH */
            fake_block nb = { .key = e->allocs[a].dptr, .size = e->allocs[a].bytes, .dev = e->allocs[a].dev,
                              .kind = FAKE_BLOCK_GRAPH, .owner = e->id };
            fake_block_add_unsafe(&nb);
        }
        for (size_t f = 0; f < e->nfrees; f++) {
            fake_block *b = fake_block_find_unsafe(e->frees[f]);
            if (b && b->kind == FAKE_BLOCK_GRAPH) fake_block_remove_unsafe(b);
        }
    }
    fake_unlock();
    return r;
}

CUresult impl_cuGraphLaunch(CUgraphExec exec, CUstream stream) {
    (void)stream;
    return fake_launch(exec);
}

CUresult impl_cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
    (void)stream;
    return fake_launch(exec);
}

CUresult impl_cuGraphExecDestroy(CUgraphExec exec) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    fake_exec *e = fake_exec_find_unsafe((uintptr_t)exec);
    if (!e) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        if (e->mapped)
            for (int d = 0; d < FAKE_MAX_DEVICES; d++) fake_gu[d] -= e->need[d];   /* GR stays cached */
        fake_graph *g = fake_graph_find_unsafe(e->graph);
        if (g) g->execs--;
        fake_exec_free(e);
        *e = fake_execs[--fake_nexecs];
    }
    fake_unlock();
    return r;
}

CUresult impl_cuDeviceGraphMemTrim(CUdevice dev) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    fake_lock();
    fake_unhold_unsafe(dev, fake_gr[dev] - fake_gu[dev]);
    fake_gr[dev] = fake_gu[dev];
    fake_unlock();
    return CUDA_SUCCESS;
}

CUresult impl_cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void *value) {
    if (!fake_is_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= fake_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    fake_lock();
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = fake_gu[dev]; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = fake_gu_high[dev]; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = fake_gr[dev]; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = fake_gr_high[dev]; break;
    default: r = CUDA_ERROR_INVALID_VALUE;
    }
    fake_unlock();
    return r;
}

/* ---- the exported functions ---------------------------------------------------------------------- */

FAKE_EXPORT(cuGraphCreate, (CUgraph *graph, unsigned int flags), (graph, flags))
FAKE_EXPORT(cuGraphDestroy, (CUgraph graph), (graph))
FAKE_EXPORT(cuGraphAddMemAllocNode, (CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                     CUDA_MEM_ALLOC_NODE_PARAMS *params), (node, graph, deps, ndeps, params))
FAKE_EXPORT(cuGraphAddMemFreeNode, (CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                    CUdeviceptr dptr), (node, graph, deps, ndeps, dptr))
FAKE_EXPORT(cuGraphAddChildGraphNode, (CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                       CUgraph child), (node, graph, deps, ndeps, child))
FAKE_EXPORT(cuGraphGetNodes, (CUgraph graph, CUgraphNode *nodes, size_t *count), (graph, nodes, count))
FAKE_EXPORT(cuGraphNodeGetType, (CUgraphNode node, CUgraphNodeType *type), (node, type))
FAKE_EXPORT(cuGraphMemAllocNodeGetParams, (CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS *params), (node, params))
FAKE_EXPORT(cuGraphChildGraphNodeGetGraph, (CUgraphNode node, CUgraph *child), (node, child))
FAKE_EXPORT(cuGraphInstantiate, (CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node, char *log,
                                 size_t log_size), (exec, graph, error_node, log, log_size))
FAKE_EXPORT(cuGraphInstantiate_v2, (CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node, char *log,
                                    size_t log_size), (exec, graph, error_node, log, log_size))
FAKE_EXPORT(cuGraphInstantiateWithFlags, (CUgraphExec *exec, CUgraph graph, unsigned long long flags),
            (exec, graph, flags))
FAKE_EXPORT(cuGraphInstantiateWithParams, (CUgraphExec *exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *params),
            (exec, graph, params))
FAKE_EXPORT(cuGraphInstantiateWithParams_ptsz, (CUgraphExec *exec, CUgraph graph,
                                                CUDA_GRAPH_INSTANTIATE_PARAMS *params), (exec, graph, params))
FAKE_EXPORT(cuGraphUpload, (CUgraphExec exec, CUstream stream), (exec, stream))
FAKE_EXPORT(cuGraphUpload_ptsz, (CUgraphExec exec, CUstream stream), (exec, stream))
FAKE_EXPORT(cuGraphLaunch, (CUgraphExec exec, CUstream stream), (exec, stream))
FAKE_EXPORT(cuGraphLaunch_ptsz, (CUgraphExec exec, CUstream stream), (exec, stream))
FAKE_EXPORT(cuGraphExecDestroy, (CUgraphExec exec), (exec))
FAKE_EXPORT(cuDeviceGraphMemTrim, (CUdevice dev), (dev))
FAKE_EXPORT(cuDeviceGetGraphMemAttribute, (CUdevice dev, CUgraphMem_attribute attr, void *value), (dev, attr, value))
