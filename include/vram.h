/*
 * vram.h: GPU memory runtime with TensorFlow tf.config's configuration model.
 *
 * Usage, in order (the same template as tf.config):
 *   1. vram_list_physical_devices()          enumerate GPUs; does NOT start the runtime
 *   2. vram_set_visible_devices()            choose cards            (optional)
 *   3. vram_set_memory_growth()              take memory on demand   (optional)
 *      vram_set_memory_limit()               hard cap per card       (optional)
 *      vram_set_logical_device_configuration split a card            (optional)
 *      vram_set_alloc_conf()                 allocator options       (optional)
 *   4. vram_init() / vram_malloc() / ...     starts the runtime and freezes the configuration
 *
 * Errors: every call returns a vram_status; on failure vram_last_error() holds a message for the
 * calling thread (driver failures keep the driver's error name in it). The library never prints.
 *
 * Thread safety: every function may be called from any thread at any time. Configuration calls
 * racing with the runtime's start are serialised: each either lands before the start or fails with
 * VRAM_ERR_ALREADY_INITIALIZED.
 *
 * Environment variables (read when the runtime starts; a malformed value makes vram_init fail with
 * VRAM_ERR_INVALID_ARGUMENT naming the variable): VRAM_BACKEND=cuda|sim, VRAM_SIM_DEVICES,
 * VRAM_SIM_FAIL_ALLOC_AFTER, VRAM_GROWTH=true|false, VRAM_LIMIT, VRAM_LIMIT_<i> (the names `vram run`
 * sets; their older names VRAM_FORCE_ALLOW_GROWTH, VRAM_MEMORY_LIMIT, VRAM_MEMORY_LIMIT_<i> are read
 * where they are unset, and both names of one setting disagreeing is refused), VRAM_MEMORY_FRACTION,
 * VRAM_ALLOC_CONF (allocator options, see vram_set_alloc_conf), VRAM_OVERFLOW=host|none and
 * VRAM_OVERFLOW_MAX (the options overflow and overflow_max_mb, under VRAM_ALLOC_CONF's), and the
 * ledger's: VRAM_GROUP, VRAM_GROUP_LIMIT, VRAM_PRIORITY, VRAM_LIMIT_MAX, VRAM_GROUP_LIMIT_MAX,
 * VRAM_LEDGER_DIR (under `vram run`, or with VRAM_GROUP or VRAM_LEDGER_DIR, the process is listed in
 * the ledger and follows `vram limit PID` and its group's rebalancing: README, "Limits that move"). VRAM_MEMBARRIER=0|false (read at the first configuration call or start) makes
 * every allocation and free fence its entry into the runtime itself, instead of the configuration
 * calls fencing all threads with membarrier. See README.md.
 */
#ifndef VRAM_H
#define VRAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef VRAM_API   /* (the preload library compiles the common parser in hidden: -DVRAM_API=) */
#if defined(_WIN32)
#define VRAM_API __declspec(dllexport)
#elif defined(__GNUC__)
#define VRAM_API __attribute__((visibility("default")))
#else
#define VRAM_API
#endif
#endif

#define VRAM_VERSION_MAJOR 0
#define VRAM_VERSION_MINOR 1
#define VRAM_VERSION_PATCH 0

/* "0.1.0" */
VRAM_API const char *vram_version_string(void);

/* ---- status codes --------------------------------------------------------------------------- */

/* The status table, one line a code: X(NAME, value, default message). The enum, vram_status_name
 * and the default messages of vram_last_error() come from it (Python asks vram_status_name for the
 * names); a new code goes at the end, with the next value. */
#define VRAM_STATUS_MAP(X)                                                                          \
    X(OK, 0, "success")                                                                             \
    /* a bad value: NULL where not allowed, malformed size or option */                             \
    X(ERR_INVALID_ARGUMENT, 1, "invalid argument")                                                  \
    /* no such physical or logical device */                                                        \
    X(ERR_UNRECOGNIZED_DEVICE, 2, "unrecognized device")                                            \
    /* configuration changed after the runtime started */                                           \
    X(ERR_ALREADY_INITIALIZED, 3, "the runtime is already initialized")                             \
    /* settings that cannot hold together (limits above the card's memory, ...) */                  \
    X(ERR_CONFLICT, 4, "conflicting settings")                                                      \
    X(ERR_OUT_OF_MEMORY, 5, "out of memory")                                                        \
    /* free of a pointer vram did not hand out, or already freed */                                 \
    X(ERR_INVALID_POINTER, 6, "invalid pointer")                                                    \
    /* no usable GPU: no driver, driver init failed, zero devices */                                \
    X(ERR_NO_DEVICE, 7, "no usable GPU")                                                            \
    /* any other driver failure; the driver's error name is in the message */                       \
    X(ERR_DRIVER, 8, "driver failure")                                                              \
    X(ERR_UNSUPPORTED, 9, "unsupported")                                                            \
    /* vram_check found a broken invariant (a bug in vram) */                                       \
    X(ERR_INTERNAL, 10, "internal consistency check failed")

typedef enum vram_status {
#define VRAM_STATUS_ENUM_(name, value, message) VRAM_##name = value,
    VRAM_STATUS_MAP(VRAM_STATUS_ENUM_)
#undef VRAM_STATUS_ENUM_
} vram_status;

VRAM_API const char *vram_status_name(vram_status s);  /* "VRAM_ERR_OUT_OF_MEMORY"; "VRAM_ERR_UNKNOWN"
                                                          for a value not in the table */
VRAM_API const char *vram_last_error(void);            /* this thread's message for its last failed call */

/* ---- physical devices ----------------------------------------------------------------------- */

typedef struct vram_physical_device {
    int    index;              /* 0-based, in the driver's order after CUDA_VISIBLE_DEVICES */
    char   name[64];           /* "/physical_device:GPU:0" */
    char   product[128];       /* "NVIDIA H200" */
    char   uuid[48];           /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
    char   pci_bus_id[32];     /* "0000:19:00.0" */
    size_t total_bytes;
    int    compute_major, compute_minor;
} vram_physical_device;

/* Every list call sets *count to the full number and fills at most `capacity` entries;
 * (NULL, 0, &n) asks for the number alone.
 *
 * vram_list_physical_devices does not start the runtime. When there is no usable GPU it sets
 * *count to 0 and returns VRAM_ERR_NO_DEVICE; vram_last_error() then says why (driver library not
 * found, cuInit failed and its error name, zero devices, CUDA_VISIBLE_DEVICES hides them all) and
 * what to try. */
VRAM_API vram_status vram_list_physical_devices(vram_physical_device *out, int capacity, int *count);

/* Visibility: n == 0 hides all. Indices must be distinct physical devices. Until set, every
 * physical device is visible. */
VRAM_API vram_status vram_set_visible_devices(const int *physical_indices, int n);
VRAM_API vram_status vram_get_visible_devices(int *physical_indices, int capacity, int *count);

/* Memory growth: take memory on demand instead of nearly the whole card at start. May differ
 * between cards and combines with limits and logical devices. *enabled is -1 until set. */
VRAM_API vram_status vram_set_memory_growth(int physical_index, int enable);
VRAM_API vram_status vram_get_memory_growth(int physical_index, int *enabled);

/* A hard cap on what the runtime holds from the driver for this card, shared by its logical
 * devices. 0 removes the limit. A limit above the card's memory is VRAM_ERR_CONFLICT.
 * VRAM_LIMIT, VRAM_LIMIT_<i> (older names VRAM_MEMORY_LIMIT, VRAM_MEMORY_LIMIT_<i>) and
 * VRAM_MEMORY_FRACTION override it. */
VRAM_API vram_status vram_set_memory_limit(int physical_index, size_t limit_bytes);
VRAM_API vram_status vram_get_memory_limit(int physical_index, size_t *limit_bytes); /* 0: none set */

/* ---- logical devices ------------------------------------------------------------------------ */

typedef struct vram_logical_device_configuration {
    size_t memory_limit_mb;    /* required, in MiB, as tf.config.LogicalDeviceConfiguration */
} vram_logical_device_configuration;

/* Splits one card into n logical devices, each with its own hard limit; n == 0 removes the split.
 * A zero limit is VRAM_ERR_INVALID_ARGUMENT; limits adding up to more than the card's memory
 * are VRAM_ERR_CONFLICT. */
VRAM_API vram_status vram_set_logical_device_configuration(int physical_index,
        const vram_logical_device_configuration *configs, int n);
VRAM_API vram_status vram_get_logical_device_configuration(int physical_index,
        vram_logical_device_configuration *out, int capacity, int *count);

typedef struct vram_logical_device {
    int    index;              /* 0-based over all visible logical devices */
    int    physical_index;
    char   name[64];           /* "/device:GPU:0" */
    size_t memory_limit_bytes; /* the hard cap that applies to this logical device */
} vram_logical_device;

/* Starts the runtime. */
VRAM_API vram_status vram_list_logical_devices(vram_logical_device *out, int capacity, int *count);
/* The first logical device on physical device `physical_index` (a CUDA device ordinal): what
 * serves a framework's "cuda:N". VRAM_ERR_UNRECOGNIZED_DEVICE when the card is hidden or absent.
 * Starts the runtime. */
VRAM_API vram_status vram_logical_device_of(int physical_index, int *logical_device);

/* ---- runtime -------------------------------------------------------------------------------- */

VRAM_API vram_status vram_init(void);          /* starts the runtime; idempotent and thread-safe */
VRAM_API int         vram_is_initialized(void);
/* Returns all device memory to the driver and allows configuring again; refuses with
 * VRAM_ERR_CONFLICT while allocations are live. When the driver refuses to free some of it the
 * runtime stops all the same and says so (VRAM_ERR_DRIVER, the driver's call and error name): the
 * driver then holds that memory until the process ends. */
VRAM_API vram_status vram_shutdown(void);

/* ---- allocation ----------------------------------------------------------------------------- */

/* Pointers are aligned to at least 256 bytes. Size 0 gives VRAM_OK and NULL; vram_free(NULL) is
 * VRAM_OK. A pointer vram did not hand out, or one already freed, is VRAM_ERR_INVALID_POINTER and
 * changes nothing. vram_malloc starts the runtime if needed. */
VRAM_API vram_status vram_malloc(void **ptr, size_t size, int logical_device);
VRAM_API vram_status vram_free(void *ptr);

/* Stream-ordered pair (as cudaMallocAsync/cudaFreeAsync; `stream` is a CUstream/cudaStream_t).
 * A block freed on a stream may be reused at once by allocations on that stream; other streams,
 * and vram_malloc, reuse it only once the free has completed on the GPU. */
VRAM_API vram_status vram_malloc_async(void **ptr, size_t size, int logical_device, void *stream);
VRAM_API vram_status vram_free_async(void *ptr, void *stream);

/* The live block `ptr` (from any allocation call) is also used on `stream`, not only where it was
 * allocated (PyTorch's tensor.record_stream: a NCCL or copy stream). Whenever it is freed, by any
 * free call, its memory goes to no other request until the work queued on `stream` (and, for a
 * stream-ordered free, on the free's stream) before the free has completed: vram records an event on
 * each at the free and looks at them before its next searches, waiting for them only when a request
 * would otherwise fail. `current` drops at the free as usual. NULL ptr: nothing to do (VRAM_OK);
 * VRAM_ERR_INVALID_POINTER when ptr is not a live block's start; a free whose event cannot be
 * recorded fails with the driver's error and leaves the block allocated. */
VRAM_API vram_status vram_record_stream(void *ptr, void *stream);

/* Private pools: memory of the logical device (under its limit) that only requests made into the
 * pool get, as PyTorch gives a CUDA graph's capture its own pool: eager requests never reuse it, so
 * a replay cannot overwrite their tensors. While the pool is in use, nothing it holds goes back to
 * the driver or moves, freed blocks included (the graph still uses their addresses). Its blocks
 * are freed by any free call. vram_private_pool_release ends it: no more requests, its idle memory
 * goes back, the blocks still live stay valid until freed, and once it holds none its index serves
 * the next private pool created (VRAM_POOL_MAX_PRIVATE, 64, pools in use or holding blocks at
 * once). A bad pool is VRAM_ERR_INVALID_ARGUMENT. Requests are stream-ordered on `stream` as
 * vram_malloc_async's. vram_private_pool_blocks lists its live blocks (count: how many there are). */
VRAM_API vram_status vram_private_pool_create(int logical_device, int *pool);
VRAM_API vram_status vram_private_malloc_async(void **ptr, size_t size, int logical_device, int pool,
                                               void *stream);
VRAM_API vram_status vram_private_pool_release(int logical_device, int pool);
VRAM_API vram_status vram_private_pool_blocks(int logical_device, int pool, void **out, size_t capacity,
                                              size_t *count);
/* A CUDA-graph capture (PyTorch's beginAllocateToPool .. endAllocateToPool) is underway on the logical
 * device: until the matching vram_capture_end, vram records, queries and waits for no event and
 * gives no memory back nor moves it (what would invalidate the capture), as PyTorch's allocator
 * defers its events while a capture is underway. A block freed stream-ordered meanwhile is reused by
 * its own stream at once and by other streams only after the capture; one used on several streams
 * (vram_record_stream) waits until then too. Captures nest (a count); vram_capture_end with none
 * underway is VRAM_ERR_INVALID_ARGUMENT. */
VRAM_API vram_status vram_capture_begin(int logical_device);
VRAM_API vram_status vram_capture_end(int logical_device);

/* Hands out exactly [ptr, ptr + size) of the pool, which must lie in one of its free blocks (ptr
 * 256-byte aligned): a block given back where it was, as PyTorch's CUDA-graph trees restore a pool to
 * a checkpoint. VRAM_ERR_INVALID_ARGUMENT when that range is not free. */
VRAM_API vram_status vram_private_malloc_at(void *ptr, size_t size, int logical_device, int pool, void *stream);

/* Sharing a block with another process (PyTorch's torch.multiprocessing, as CUDA IPC): the exporter
 * writes a handle of the live block at ptr (at most `capacity` bytes into `handle`; *length says how
 * many it needs, and a capacity below that is VRAM_ERR_INVALID_ARGUMENT) and *offset, where the
 * block lies in what the receiver maps. The receiver, another process (or the same one), maps it
 * on its CUDA device `physical_device` with vram_ipc_open (*ptr + offset is the block there) and
 * unmaps it with vram_ipc_close. Growth's memory travels as file descriptors that the receiver takes
 * from the exporter with pidfd_getfd (Linux 5.6, the same user), so the exporter must still run
 * when it opens; a plain region goes through the driver's IPC. The exporter must keep the block
 * until the receivers closed it (freed memory goes to other blocks). The exporter keeps a file
 * descriptor per physical piece it shared (one per 2 MiB with the plan or a chosen limit): an export
 * raises the soft RLIMIT_NOFILE up to the hard one when it needs room, and VRAM_ERR_CONFLICT names the
 * descriptors when the hard limit is too low. */
VRAM_API vram_status vram_ipc_export(void *ptr, void *handle, size_t capacity, size_t *length, size_t *offset);
VRAM_API vram_status vram_ipc_open(int physical_device, const void *handle, size_t length, void **ptr);
VRAM_API vram_status vram_ipc_close(void *ptr);

/* ---- sleep and wake ------------------------------------------------------------------------ */

/* Tags, sleep and wake: memory leaves the card and comes back at the same addresses, as vLLM's sleep
 * mode and torch_memory_saver's regions do, within vram's limits.
 *
 * vram_set_tag: the calling thread's later allocations (every allocation call, private pools created
 * then included) carry `tag` (NULL: none); 1 to 63 bytes of printable ASCII, at most 32 distinct tags
 * in a process (VRAM_ERR_CONFLICT beyond). With memory growth by virtual memory management each tag has
 * an address range of its own, whose granules hold only its blocks; elsewhere (preallocation,
 * vmm:false) tags are kept but change no placement, and vram_sleep refuses with the reason.
 * vram_get_tag: the calling thread's tag (NULL: none), a string that lives as long as the process.
 *
 * vram_sleep: once the streams its blocks were allocated or used on (vram_record_stream; the legacy
 * default stream for vram_malloc's) have finished, the memory of `tag` (NULL: every block of the
 * logical device, its private pools', and everything the pool caches) goes back to the driver: every
 * granule of it, the cached free memory too. VRAM_SLEEP_OFFLOAD first copies the live blocks' contents
 * to pinned host memory (one copy per run of blocks that touch each other; the host block is kept after
 * the wake for the next sleep, until vram_trim), VRAM_SLEEP_DISCARD does not.
 * Their addresses stay reserved; the blocks stay allocated (current counts them, reserved does not:
 * vram_memory_info's asleep_bytes and asleep_host_bytes say how many bytes sleep and how many host
 * bytes hold them). Memory already asleep stays as it is. While asleep: a request under the tag (or,
 * after a sleep without a tag, any request) fails with VRAM_ERR_OUT_OF_MEMORY saying so; freeing a
 * block asleep is allowed (at once: no memory is involved). Refusals, before anything sleeps:
 * VRAM_ERR_UNSUPPORTED for a pool that cannot keep addresses without their memory (preallocation,
 * growth without virtual memory management, a block in a plain region), VRAM_ERR_CONFLICT while a
 * CUDA-graph capture is underway or when memory of the tag was shared with another process
 * (vram_ipc_export), VRAM_ERR_INVALID_ARGUMENT for a tag no block of the device ever carried, a bad
 * mode or a malformed tag. A copy or host allocation that fails leaves everything awake as it was.
 *
 * vram_wake: maps physical memory again under the blocks asleep of `tag` (NULL: everything asleep on
 * the logical device), at the same addresses, and copies offloaded contents back; a private pool in use
 * (a CUDA graph's, whose replays use the addresses of its free blocks too) gets back every granule it
 * had. All or nothing: when the limit, a memory fraction, the physical device's limit or the card
 * cannot give the memory, it fails with VRAM_ERR_OUT_OF_MEMORY (the cause in the message, as any
 * out-of-memory error) and everything stays asleep, nothing lost. Nothing asleep: VRAM_OK. */
typedef enum vram_sleep_mode {
    VRAM_SLEEP_OFFLOAD = 0,   /* contents to pinned host memory, back at the wake */
    VRAM_SLEEP_DISCARD = 1    /* contents dropped: the blocks wake with undefined bytes */
} vram_sleep_mode;

VRAM_API vram_status vram_set_tag(const char *tag);
VRAM_API vram_status vram_get_tag(const char **tag);
VRAM_API vram_status vram_sleep(int logical_device, const char *tag, vram_sleep_mode mode);
VRAM_API vram_status vram_wake(int logical_device, const char *tag);

/* ---- giving memory back and allocator options ------------------------------------------- */

/* Returns cached free memory of the logical device to the driver until at most `keep_bytes` are
 * reserved beyond its live allocations (what can be returned: whole mapped pieces or regions with
 * no live block in them). vram_get_memory_info's `reserved` and `num_driver_frees` show the effect.
 * Blocks freed on a stream go back once their stream got there: vram waits for the one stream
 * PyTorch uses (see vram_plugin_free), and keeps that memory when the driver cannot wait.
 * Memory whose unmap or free the driver refuses stays reserved (the driver still holds it, so it
 * still counts against the limit): VRAM_ERR_DRIVER with the driver's call and error name.
 * The pinned host memory kept from a vram_sleep (memory info's host_kept_bytes) goes back too.
 * Starts the runtime. */
VRAM_API vram_status vram_trim(int logical_device, size_t keep_bytes);

/* PyTorch's torch.cuda.set_per_process_memory_fraction, also while the runtime runs: from now on the
 * logical device holds at most `fraction` (0 to 1) of its card's memory, and never more than its
 * limit. Requests beyond fail with VRAM_ERR_OUT_OF_MEMORY naming the fraction; idle memory beyond
 * goes back at once, live blocks stay (reserved comes down as they are freed). Starts the runtime.
 * vram_get_memory_fraction gives the fraction set, 1 until then. */
VRAM_API vram_status vram_set_memory_fraction(int logical_device, double fraction);
VRAM_API vram_status vram_get_memory_fraction(int logical_device, double *fraction);

/* A limit the program moves while it runs, within what the configuration allowed: from now on the
 * logical device holds at most `bytes` of device memory (never more than its limit or its memory
 * fraction). It may be lowered and raised back up to the logical device's limit (memory_limit_bytes of
 * vram_list_logical_devices: what VRAM_MEMORY_LIMIT, `vram run`, the Slurm plugin, the program's
 * configuration or the default set), never above it: more is VRAM_ERR_CONFLICT naming that limit, so
 * that a program cannot lift a limit set from outside it. Lowering it under what the device holds
 * kills nothing: live blocks stay, the idle memory above the new limit goes back at once, and requests
 * that need more device memory fail with VRAM_ERR_OUT_OF_MEMORY naming the live limit (or go to host
 * memory with the allocator option overflow:host) until frees bring the device under it
 * (vram_memory_info's live_limit and over_limit show it). 0 takes no more device memory at all.
 * Starts the runtime. vram_get_live_limit gives the live limit set (the logical device's limit until
 * then) and, when `configured` is not NULL, that limit. */
VRAM_API vram_status vram_set_live_limit(int logical_device, size_t bytes);
VRAM_API vram_status vram_get_live_limit(int logical_device, size_t *bytes, size_t *configured);

/* Allocator options, as one string of comma-separated key:value pairs (the environment variable
 * VRAM_ALLOC_CONF takes the same string and overrides what the program set; both are read at
 * start, so this fails with VRAM_ERR_ALREADY_INITIALIZED afterwards when it changes anything):
 *   vmm:true|false          grow by mapping physical chunks into one reserved address range
 *                           (default true where the driver supports it) or by separate cuMemAlloc
 *                           regions
 *   idle_release_ms:N       growth mode: memory that stayed unused for a whole period of N ms is
 *                           returned to the driver (by a background thread); 0 (default) keeps it
 *   extent_mb:N             growth: the largest physical piece mapped at once (default: one granule,
 *                           2 MiB, with plan:true (the default) or under a limit that was set
 *                           (VRAM_MEMORY_LIMIT*, a fraction, vram_set_memory_limit, a logical
 *                           device's size), so that every idle granule can be moved under a block or
 *                           into the plan's range, or given back, and a program runs close to its
 *                           limit; with plan:false and no limit, the limit / 256 from 2 MiB to
 *                           256 MiB, for 64 GiB and more the limit / 128, at most 1 GiB); smaller
 *                           pieces can be given back more finely, larger ones cost fewer driver calls
 *   map_ahead_mb:N          growth: when growing again within 256 allocations of the last growth,
 *                           map up to N MiB (and at most 1/16 of what is held) beyond the block, for
 *                           fewer driver calls (default 64; 0: only what blocks need)
 *   hold_peak:true|false    growth: give idle pieces back rather than raise the high-water mark of
 *                           reserved memory (leaner, but more driver calls in steady state); default false
 *   hold_large_mb:N         growth: the same for blocks of at least N MiB only (default 0: off):
 *                           a large block moves idle memory under it instead of mapping more
 *   small_pool_kb:N         growth with virtual memory management: requests of at most N KiB are
 *                           placed in an address range of their own (limit / 8 of addresses; when
 *                           it is full they go on in the rest), so that short-lived small blocks do
 *                           not settle in the holes large blocks leave (default 256; 0: one range)
 *   thread_cache_mb:N       MiB of freed blocks (each at most N/4 MiB) a thread cache may keep for
 *                           its threads' next requests of the same size (default: the limit / 256,
 *                           at most 64 MiB; 0: none). Threads take the 64 caches in arrival order,
 *                           later ones share them. Caches keep nothing until a second thread calls
 *                           vram_malloc on an arena; kept blocks go back before the pool grows or fails
 *   arenas:N                growth with virtual memory management: once a second thread calls
 *                           vram_malloc, threads spread over up to N arenas (own lock, own address
 *                           range, the limit shared), 1..8 (default 8; 1: every thread in one).
 *                           Stream-ordered requests (vram_malloc_async, vram_plugin_alloc) always
 *                           use the first arena
 *   plan:true|false         growth with virtual memory management: the first arena finds the step
 *                           a training loop repeats from the requests themselves and places each
 *                           block living within a step (or into the next one until its free there)
 *                           from an offline plan of the step, in a range as large as the step's live
 *                           peak, giving back what the plan does not need; memory is mapped granule
 *                           by granule; a request off the plan goes to best fit while the plan bends
 *                           (it goes on once the program's requests are its own again), and a plan
 *                           that would hold more than the pool ever held gives way: best fit serves
 *                           from the memory held before it maps more (default true; false maps
 *                           larger pieces: fewer driver calls the first time memory is mapped)
 *   overflow:host|none      a plain or stream-ordered request that the device cannot serve (its
 *                           limit, memory fraction or live limit, a limit set from outside, or the
 *                           card itself) gets host memory mapped into the device's address space,
 *                           which its kernels read and write over the bus, instead of
 *                           VRAM_ERR_OUT_OF_MEMORY (default none). Every request tries the device
 *                           first; a block in host memory goes back at its free (a stream-ordered free
 *                           or one used on other streams waits for those streams first), one never
 *                           freed stays there. Private pools and tagged requests (vram_set_tag: what
 *                           vram_sleep puts to sleep) stay on the card; a block in host memory
 *                           cannot be shared (vram_ipc_export: VRAM_ERR_UNSUPPORTED). vram_memory_info's
 *                           overflow_* fields count it, apart from the device's figures
 *   overflow_max_mb:N       the most host memory the overflow holds at once; beyond, the request fails
 *                           with the out-of-memory error naming this cap (default: the logical
 *                           device's limit, so that a runaway program holds at most twice its share;
 *                           0: nothing goes to host memory)
 * A malformed string is VRAM_ERR_INVALID_ARGUMENT naming the key. NULL or "" resets the defaults. */
VRAM_API vram_status vram_set_alloc_conf(const char *conf);
/* Option i (from 0) of vram_set_alloc_conf, in the order of the library's table: its key ("vmm") and
 * the form of its value ("true|false", or "N" for a whole number); each output may be NULL. 1 for an
 * option, 0 for an i that is none (below 0, or past the last). `vram --help` lists them from this. */
VRAM_API int vram_alloc_conf_option(int i, const char **key, const char **value);

/* ---- framework plug-ins ---------------------------------------------------------------------- */

/* PyTorch's CUDAPluggableAllocator signatures (ptrdiff_t is ssize_t here): allocate `size` bytes
 * for CUDA device `device` (the physical index; the first logical device on that card serves it),
 * stream-ordered on `stream`; NULL on failure, with vram_last_error() saying why. The free is
 * stream-ordered on `stream` too, and `stream` must stay valid while the runtime runs (PyTorch
 * never destroys its streams). While every stream-ordered request of the logical device has come
 * on one stream (PyTorch's usual case), a block freed on it is free at once, as in PyTorch's own
 * allocator; vram waits for that stream (once) before such memory goes to a plain request or
 * another stream, or back to the driver. With several streams no event is recorded per free, one
 * per stream covers a batch of them (vram_free_async records one at each free).
 * Python: vram.torch.install(). */
VRAM_API void *vram_plugin_alloc(ptrdiff_t size, int device, void *stream);
VRAM_API void  vram_plugin_free(void *ptr, ptrdiff_t size, int device, void *stream);
/* vram_plugin_free(ptr, ..., stream) with the stream `ptr` was allocated on, which vram remembers:
 * for callers that keep no record per block (vram.torch.install()'s allocator, whose c10::DataPtr
 * deleter gets the pointer alone, instead of CUDAPluggableAllocator's locked table). A block of
 * vram_malloc is freed as on the legacy default stream (NULL). Errors as vram_plugin_free: none
 * returned, vram_last_error() says why. */
VRAM_API void  vram_plugin_release(void *ptr);

/* ---- statistics ----------------------------------------------------------------------------- */

/* The fields of vram_memory_info, in order, one line a field: X(type, name). The struct comes from
 * it, and so does vram_memory_info_field, which bindings ask for the layout (Python builds its ctypes
 * structure from it); a new field goes at the end. */
#define VRAM_MEMORY_INFO_FIELDS(X)                                                                  \
    /* bytes held by live allocations (TensorFlow's 'current'; blocks asleep included) */            \
    X(size_t, current)                                                                              \
    /* high-water mark of current since start or the last reset ('peak'); exact with one thread;    \
       with several, the sum of the arenas' peaks, counting blocks kept in thread caches: never     \
       below the exact peak, possibly above it (arenas, thread_cache_mb) */                         \
    X(size_t, peak)                                                                                 \
    /* bytes the runtime holds from the driver for this logical device */                           \
    X(size_t, reserved)                                                                             \
    /* high-water mark of reserved */                                                               \
    X(size_t, peak_reserved)                                                                        \
    /* the hard cap in force */                                                                     \
    X(size_t, limit)                                                                                \
    /* the largest free block in the memory held (of any arena) */                                  \
    X(size_t, largest_free_block)                                                                   \
    /* allocations and frees served, out-of-memory errors returned */                               \
    X(uint64_t, num_allocs)                                                                         \
    X(uint64_t, num_frees)                                                                          \
    X(uint64_t, num_ooms)                                                                           \
    /* physical memory created and released */                                                     \
    X(uint64_t, num_driver_allocs)                                                                  \
    X(uint64_t, num_driver_frees)                                                                   \
    /* growth: idle physical pieces mapped again under a new block instead of released and created  \
       anew (an unmap and a map each) */                                                            \
    X(uint64_t, num_driver_moves)                                                                   \
    /* the repeating step's plan (allocator option plan, on by default): the bytes of its range     \
       while one is in force (0: none), the steps begun under a plan, the plans ended early (the    \
       program off the plan for longer than a step, blocks kept past their places, more memory than \
       the pool ever held, a stream-ordered free of a planned block, a second thread), and the      \
       bytes given back when plans came into force (what best fit held that the plans did not need) \
       */                                                                                           \
    X(size_t, plan_bytes)                                                                           \
    X(uint64_t, plan_steps)                                                                         \
    X(uint64_t, plan_ends)                                                                          \
    X(size_t, plan_given_back)                                                                      \
    /* of plan_steps, those whose planned requests were served by a lookup (each its own record at  \
       its place; the others: placed in the plan's range by its free chunks, as in a plan's first   \
       step or after a block was freed later than the plan said) */                                 \
    X(uint64_t, plan_slot_steps)                                                                    \
    /* plans not followed because, under a limit that was set, their range did not fit beside the   \
       memory the blocks from before their step hold (best fit goes on packing the step into the    \
       holes between those blocks; the detector stops) */                                           \
    X(uint64_t, plan_refused)                                                                       \
    /* vram_sleep: the bytes of live blocks asleep (counted in current, not in reserved: their      \
       memory is off the card), and the bytes of pinned host memory holding their contents (0 after  \
       VRAM_SLEEP_DISCARD) */                                                                        \
    X(size_t, asleep_bytes)                                                                         \
    X(size_t, asleep_host_bytes)                                                                    \
    /* pinned host memory an offload used, kept after its wake for the next sleep of the same memory \
       (vram_trim and vram_shutdown give it back) */                                                 \
    X(size_t, host_kept_bytes)                                                                      \
    /* the limit in force now: the least of `limit`, the memory fraction's bytes, vram_set_live_limit's \
       and a limit set on the process from outside (its card's, less what the card's other logical    \
       devices hold); and the bytes held above it (0 when under: a limit lowered below what the device \
       held, until enough blocks are freed; with growth off, the bytes in use above it) */            \
    X(size_t, live_limit)                                                                           \
    X(size_t, over_limit)                                                                           \
    /* overflow to host memory (allocator option overflow:host): the bytes of host memory its blocks  \
       hold now and their high-water mark, its blocks now, the requests it served since start, and    \
       its cap (overflow_max_mb; 0 when overflow is off). These blocks are in none of the device      \
       figures above (current, reserved, num_allocs) */                                               \
    X(size_t, overflow_bytes)                                                                       \
    X(size_t, overflow_peak)                                                                        \
    X(uint64_t, overflow_blocks)                                                                    \
    X(uint64_t, num_overflows)                                                                      \
    X(size_t, overflow_max)

typedef struct vram_memory_info {
#define VRAM_MEMORY_INFO_FIELD_(type, name) type name;
    VRAM_MEMORY_INFO_FIELDS(VRAM_MEMORY_INFO_FIELD_)
#undef VRAM_MEMORY_INFO_FIELD_
} vram_memory_info;

VRAM_API vram_status vram_get_memory_info(int logical_device, vram_memory_info *info);  /* starts the runtime */
/* Field i (from 0) of vram_memory_info, in VRAM_MEMORY_INFO_FIELDS' order: its name ("current"),
 * C type ("size_t" or "uint64_t"), offset and size in bytes; each output may be NULL. 1 for a
 * field, 0 for an i that is none (below 0, or past the last field). Needs no runtime. */
VRAM_API int vram_memory_info_field(int i, const char **name, const char **type, size_t *offset,
                                    size_t *size);
VRAM_API vram_status vram_reset_memory_stats(int logical_device);  /* peak = current, peak_reserved = reserved;
                                                                     every peak of vram_allocator_stats too */

/* PyTorch's allocator statistics (torch.cuda.memory_stats), kept by vram for its own blocks.
 *
 * A figure: its value now, its high-water mark since start or the last vram_reset_memory_stats,
 * and what was added to it and taken from it since start or the last vram_reset_accumulated_stats.
 * Each figure comes three times: [VRAM_STAT_ALL], [VRAM_STAT_SMALL] (blocks of at most
 * VRAM_SMALL_BLOCK bytes, and the memory of growth's small zone), [VRAM_STAT_LARGE] (the rest). */
typedef struct vram_stat {
    int64_t current, peak, allocated, freed;
} vram_stat;

enum { VRAM_STAT_ALL = 0, VRAM_STAT_SMALL = 1, VRAM_STAT_LARGE = 2, VRAM_STAT_KINDS = 3 };
#define VRAM_SMALL_BLOCK ((size_t)1 << 20)   /* PyTorch's small pool: blocks of at most 1 MiB */

typedef struct vram_allocator_stats {
    vram_stat allocation[VRAM_STAT_KINDS];        /* blocks the program holds */
    vram_stat allocated_bytes[VRAM_STAT_KINDS];   /* their bytes (sizes rounded to 256) */
    vram_stat requested_bytes[VRAM_STAT_KINDS];   /* the sizes the program asked for */
    vram_stat active[VRAM_STAT_KINDS];            /* held, or freed but still used on another stream
                                                     (vram_record_stream) */
    vram_stat active_bytes[VRAM_STAT_KINDS];
    vram_stat segment[VRAM_STAT_KINDS];           /* pieces of device memory held: mapped extents and
                                                     plain regions */
    vram_stat reserved_bytes[VRAM_STAT_KINDS];    /* their bytes (vram_memory_info.reserved) */
    /* free memory that cannot go back to the driver alone (it shares an extent or region with a
     * block): reserved - active - idle pieces. Only current is kept: peak is the highest these calls
     * saw, allocated and freed are 0 */
    vram_stat inactive_split[VRAM_STAT_KINDS];    /* free chunks over held memory */
    vram_stat inactive_split_bytes[VRAM_STAT_KINDS];
    int64_t   num_alloc_retries;    /* requests served only after cached memory went back or freed
                                       blocks in flight on streams were waited for */
    int64_t   num_ooms;             /* out-of-memory errors */
    int64_t   num_sync_all_streams; /* waits for every stream-ordered free in flight */
    int64_t   num_device_alloc, num_device_free;   /* driver calls that created / released memory, a
                                                      move (growth) counting once in each */
    int64_t   max_split_size;       /* -1: any free block may be split */
    /* overflow to host memory (allocator option overflow:host): the host memory its blocks hold and
     * its blocks, as figures of their own (current, peak, allocated, freed; all 0 with overflow off).
     * They are in none of the device's figures above, nor in PyTorch's (vram.torch leaves them out of
     * torch.cuda.memory_stats) */
    vram_stat overflow_bytes;
    vram_stat overflow_blocks;
} vram_allocator_stats;

/* Blocks parked in thread caches go back to the pool first, so every figure is of blocks the
 * program holds (with several arenas, peaks are sums of the arenas' peaks, as vram_memory_info's).
 * Starts the runtime. */
VRAM_API vram_status vram_get_allocator_stats(int logical_device, vram_allocator_stats *stats);
/* allocated and freed of every figure, num_alloc_retries, num_ooms, num_sync_all_streams and the
 * device counts start again from 0 (vram_memory_info's counters are not touched). */
VRAM_API vram_status vram_reset_accumulated_stats(int logical_device);

/* The memory map of a logical device, for PyTorch's memory snapshots (torch.cuda.memory._snapshot):
 * segments (a mapped run of growth's reserved range, expandable; or a plain region) and the blocks
 * over each, in address order, free ones included (a free block is cut at a segment's edge). */
typedef struct vram_block_info {
    uint64_t address;
    size_t   size;          /* its bytes (256-byte units) */
    size_t   requested;     /* allocated: the size the program asked for; else 0 */
    int      allocated;     /* the program holds it */
    int      active;        /* allocated, or freed but still used on another stream */
    void    *stream;        /* allocated: the stream it was allocated on (NULL: none) */
} vram_block_info;

typedef struct vram_segment_info {
    uint64_t address;
    size_t   size;
    int      private_pool;  /* its private pool (vram_private_pool_create), or -1 */
    int      small;         /* in growth's small zone */
    int      expandable;    /* 1: a mapped run of the reserved range; 0: a plain region */
    size_t   first_block, nblocks;   /* its blocks: blocks[first_block .. first_block + nblocks) */
} vram_segment_info;

/* Fills at most the capacities and sets the full counts; when a count is above its capacity, call
 * again with more room (the map may change between calls). Thread caches are emptied first. */
VRAM_API vram_status vram_get_segments(int logical_device, vram_segment_info *segments, size_t segment_capacity,
                                       size_t *nsegments, vram_block_info *blocks, size_t block_capacity,
                                       size_t *nblocks);

/* Walks every structure of the logical device's allocator and verifies its invariants (chunks
 * tile their regions, free neighbours are merged, the free index and pointer table agree with
 * the chunks, the counters agree with the blocks, reserved <= limit). VRAM_ERR_INTERNAL with a
 * description when one is broken. A negative index checks every logical device. */
VRAM_API vram_status vram_check(int logical_device);

/* Parses "512", "4K", "6GiB", "1.5G", "2TB" (powers of 1024) into bytes. */
VRAM_API vram_status vram_parse_size(const char *text, size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* VRAM_H */
