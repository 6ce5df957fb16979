/*
 * plan.h: the repeating step of an allocation stream, found from the stream itself, and an offline
 * placement of one step (plan.c).
 *
 * Training repeats the same requests every step: the same sizes, in the same order, on the same
 * streams, each block freed at the same point of the step. Once one step has been seen whole,
 * every block's lifetime is known, and a placement made with that knowledge needs no more address
 * space than the step's live peak (best fit, which cannot know lifetimes, loses 1-9% on the
 * repository's traces: bench/placement.c).
 *
 * The detector is fed every request (size rounded, stream) and every free (an owner that stops
 * feeding it for a while says so: vram__plan_note_gap; no period is found across the gap), and answers,
 * without any marker from the program: the period P (requests per step), where a step starts, and a plan:
 * for each request of the step, its offset in a range of `top` bytes, or PLAN_UNPLANNED for a block
 * that outlives its step (weights, optimizer state, a cache that grows; those stay with best fit).
 *
 *   - Candidates: each request's key (size, stream) goes into a 4-gram hash; when the last four
 *     keys were seen before, ending n - P requests ago, P is a candidate period. It holds while
 *     key[i] == key[i - P]. After a mismatch a candidate must be longer than the period that broke
 *     (the older occurrences of the 4-gram are chained), for two periods' worth of requests: a step
 *     made of repeated layers repeats at the layer's period too, until the layers end; the step's
 *     period is the one that never breaks.
 *   - A period is confirmed once P requests in a row repeat the P before them (one whole step
 *     seen twice) and the step is 2..PLAN_MAX_STEP requests long.
 *   - The step's start is the request of the last confirmed period before which the fewest
 *     planned-to-be bytes were live (the boundary of a training step: only long-lived blocks
 *     remain), so that few of the step's own blocks cross it.
 *   - The plan is made from that last whole step: a block born in it and freed before the step's
 *     end is planned; its lifetime is [its request's event, its free's event) relative to the
 *     step's first event. A block freed in the next step, before its own request comes again, is
 *     planned too, on the step's cycle: the same request's block of the step before died at a known
 *     point of this step, so the block is alive from its request to the step's end and from the
 *     next step's start to that point (a step that starts while the last one's gradients or
 *     outputs are alive). Blocks are placed largest first, each at the lowest offset where no
 *     planned block alive at the same time (on the cycle) lies (greedy by size). `top` is the
 *     highest end.
 *
 * What the plan promises is checked when it is followed (the allocator's part): a request that
 * differs from the plan's next one (size or stream), or whose planned place is still taken, ends it.
 *
 * Costs: a request or a free costs O(1) (array writes, one hash probe); confirming a period makes
 * the plan once, O(B^2) in the step's B planned blocks (gpt2_train: 1,500 a step, a few
 * milliseconds), but a period whose requests, or whose planned blocks, have fewer bytes together
 * than the owner's bar costs O(P) and no sort (a step's repeated layers, a generation's tokens:
 * found often, never placed). bench/plan_detect.c times it per call. Memory: the history of the
 * last PLAN_HISTORY requests (44 bytes each, 5.5 MiB, written once at start so that no request
 * takes a page fault). No lock:
 * the owner calls it under its own lock.
 */
#ifndef VRAM_POOL_PLAN_H
#define VRAM_POOL_PLAN_H

#include <stddef.h>
#include <stdint.h>

#define PLAN_MAX_STEP  (1u << 15)           /* the longest step found, in requests */
#define PLAN_MAX_PLACED 4096u               /* the most blocks of a step placed (placing is O(n^2)) */
#define PLAN_HISTORY   (4u * PLAN_MAX_STEP)  /* requests kept: two whole steps and room to find them */
#define PLAN_GRAM_BITS 12   /* 16 KiB of buckets: in the first-level cache beside the pool's own */
#define PLAN_UNPLANNED UINT64_MAX

/* One step's plan: request i of the step (0..period-1) is expected with size[i] on stream[i] and
 * placed at offset[i] (PLAN_UNPLANNED: best fit's); below[i] is the planned block alive when i is
 * requested that ends highest at or below offset[i] (-1: none), so that the free chunk holding i's
 * place starts where that block ends (or where the plan's range starts). */
typedef struct pool_plan {
    uint32_t   period;
    size_t    *size;
    uintptr_t *stream;
    uint64_t  *offset;
    int32_t   *below;
    int32_t   *below_first;    /* below, counting only blocks of the step itself (its first step) */
    uint8_t   *wraps;          /* 1: request i's block lives into the next step (planned on the cycle) */
    uint32_t  *due_first;      /* [period + 1]: due_k[due_first[j] .. due_first[j + 1]) are the planned
                                  requests whose blocks the plan has freed by request j (the first request
                                  after their free: in the step, or in the next one for a block living
                                  into it or freed after the step's last request); each once */
    uint32_t  *due_k;          /* [planned] */
    uint32_t   planned;        /* requests with an offset */
    size_t     top;            /* the range the plan places in: the highest end of a planned block */
    size_t     live_peak;      /* the most bytes of planned blocks alive at once (top >= live_peak); 0
                                  when not worked out: more than PLAN_MAX_PLACED blocks, or their bytes
                                  together below the owner's bar (min_live) */
    uint32_t   settle;         /* the first request of a step after which no planned block of the
                                  step before is alive (0: none lives into the next step) */
    uint64_t   start_request;  /* the request (counted from the first one fed) a step starts at:
                                  requests start_request + k * period are the first of a step */
} pool_plan;

typedef struct plan_request {   /* what the history keeps of a request */
    size_t    size;
    uintptr_t stream;
    uint64_t  born, dies;       /* events: its request, its free (UINT64_MAX while live) */
} plan_request;

typedef struct plan_detector {
    plan_request *req;          /* [PLAN_HISTORY], a ring by request number */
    uint64_t     *live_before;  /* [PLAN_HISTORY]: bytes live just before each request */
    uint64_t      requests;     /* requests fed so far */
    uint64_t      events;       /* requests and frees fed so far */
    uint64_t      live;         /* bytes live now */
    uint32_t     *gram_prev;    /* [PLAN_HISTORY]: the distance back to the request that ended the
                                   same 4-gram before (0: none known) */
    uint32_t      gram[1u << PLAN_GRAM_BITS];   /* 4-gram hash -> the low 32 bits of 1 + the last
                                                   request ending it */
    uint64_t      keys[4];      /* the last four requests' keys (size and stream, mixed) */
    uint32_t      candidate;    /* the period being checked (0: none) */
    uint32_t      run;          /* requests in a row equal to the one `candidate` before */
    uint32_t      floor;        /* a period that broke: candidates must be longer, until a plan or
                                   request floor_until (then the same period may be found again) */
    uint64_t      floor_until;
    uint32_t      fired;        /* the period whose plan was made (0: none since the last break) */
    uint64_t      since;        /* the first request fed after a gap (vram__plan_note_gap; 0: none): a period
                                   is found, and a block's life read, only among requests from it on */
    int           off;          /* 1: too little host memory; the detector sees nothing more */
    size_t        min_live;     /* the owner's bar: a step whose planned blocks peak below it is not
                                   placed (no plan made, the period still counts as found) */
} plan_detector;

/* Starts a detector (host memory for its history; -1 when there is none). */
int  vram__plan_detector_init(plan_detector *d);
void vram__plan_detector_free(plan_detector *d);

/* Feeds a request of `size` bytes (rounded as the pool rounds) on `stream`; its number (for the
 * free) in *id. Returns 1 when this request confirmed a period: then *plan is made (free it with
 * vram__plan_free) and the next step starts at plan->start_request; 0 otherwise; -1 when the plan could
 * not be made (host memory), which changes nothing else. */
int  vram__plan_note_request(plan_detector *d, size_t size, uintptr_t stream, uint64_t *id, pool_plan *plan);
/* Feeds the free of request `id` of `size` bytes (one that vram__plan_note_request numbered). */
void vram__plan_note_free(plan_detector *d, uint64_t id, size_t size);
/* Says that requests went unseen since the last one fed (the owner stopped feeding it for a while):
 * the candidate period is dropped, and no period is found across the gap, nor a block's life read
 * from a request before it. The frees of requests fed before it are still fed. */
void vram__plan_note_gap(plan_detector *d);

/* Places `n` blocks (size[i], alive over [born[i], dies[i])) largest first, each at the lowest
 * offset where no block alive at the same time lies; with `cycle` > 0 the times repeat every cycle
 * events, and a block with dies[i] > cycle is alive again over [0, dies[i] - cycle) (cycle 0: no
 * repetition). Offsets into off[]; returns the top. Needs
 * n pointers of scratch memory; returns SIZE_MAX when there is none. */
size_t vram__plan_place(size_t n, const size_t *size, const uint64_t *born, const uint64_t *dies, uint64_t cycle,
                  uint64_t *off);

void vram__plan_free(pool_plan *plan);

#endif /* VRAM_POOL_PLAN_H */
