// vram.torch's allocator library ("allocator" mode): vram as PyTorch's CUDA allocator, a subclass of
// CUDAPluggableAllocator compiled against the installed PyTorch by python/vram/torch.py (once per
// PyTorch: torch.utils.cpp_extension caches the build). install(path) dlopens libvram.so at `path`,
// binds the calls below by name and makes the allocator PyTorch's.
//
// What it owns: tensors and raw allocations go straight to libvram (vram_plugin_alloc on the current
// stream; the deleter calls vram_plugin_release, vram keeping each block's stream), without
// CUDAPluggableAllocator's locked table; record_stream, the statistics, empty_cache, the memory fraction,
// CUDA graphs' and MemPool's private pools, memory history and snapshots, out-of-memory observers and
// IPC go to vram too. The rest is CUDAPluggableAllocator's.
//
// Locks: `history_mutex` guards the memory history, the trace trackers and the blocks allocated while
// tracing; `observers_mutex` the out-of-memory observers; `pools_mutex` the private pools and active
// captures. None is taken on the hot path unless tracing or a capture is on: it reads the atomics
// `tracing` and `capturing` only, and `logical_cache` (CUDA device -> vram logical device, filled once).
// Every refused request raises torch.OutOfMemoryError with vram's message (vram_last_error).
//
// Headers: PyTorch's (torch.utils.cpp_extension adds them), CUDA's cuda.h and cuda_runtime_api.h (through
// c10/cuda; a CUDA toolkit's or the NVIDIA wheels', found by torch.py) and vram.h (the package's include/).
#include <torch/extension.h>
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include <vram.h>

namespace {
using alloc_fn = void *(*)(std::ptrdiff_t, int, void *);
using release_fn = void (*)(void *);
using error_fn = const char *(*)();
using record_fn = int (*)(void *, void *);
alloc_fn vram_alloc = nullptr;
release_fn vram_release = nullptr;
error_fn vram_error = nullptr;
record_fn vram_record = nullptr;
// the rest of libvram's calls this allocator makes (vram.h's signatures)
decltype(&vram_logical_device_of) logical_of_fn = nullptr;
decltype(&vram_get_allocator_stats) stats_fn = nullptr;
decltype(&vram_reset_memory_stats) reset_peak_fn = nullptr;
decltype(&vram_reset_accumulated_stats) reset_acc_fn = nullptr;
decltype(&vram_get_memory_info) info_fn = nullptr;
decltype(&vram_trim) trim_fn = nullptr;
decltype(&vram_set_memory_fraction) set_fraction_fn = nullptr;
decltype(&vram_get_memory_fraction) get_fraction_fn = nullptr;
decltype(&vram_private_pool_create) pool_create_fn = nullptr;
decltype(&vram_private_malloc_async) pool_alloc_fn = nullptr;
decltype(&vram_private_pool_release) pool_release_fn = nullptr;
decltype(&vram_capture_begin) capture_begin_fn = nullptr;
decltype(&vram_capture_end) capture_end_fn = nullptr;
decltype(&vram_private_pool_blocks) pool_blocks_fn = nullptr;
decltype(&vram_private_malloc_at) pool_alloc_at_fn = nullptr;
decltype(&vram_get_segments) segments_fn = nullptr;
decltype(&vram_ipc_export) ipc_export_fn = nullptr;
decltype(&vram_ipc_open) ipc_open_fn = nullptr;
decltype(&vram_ipc_close) ipc_close_fn = nullptr;

// ---- memory history (torch.cuda.memory._record_memory_history) and trace trackers: while either is
// on, every allocation and free is noted under `history_mutex` (the hot path reads `tracing` only)
using c10::CachingDeviceAllocator::TraceEntry;
std::mutex history_mutex;
std::atomic<bool> tracing{false};
bool history_on = false;
c10::cuda::CUDACachingAllocator::CreateContextFn context_recorder = nullptr;
c10::cuda::CUDACachingAllocator::RecordContext record_when = c10::cuda::CUDACachingAllocator::RecordContext::NEVER;
size_t trace_max = 0;
std::vector<std::string> skip_actions;
std::string user_metadata;                        // setUserMetadata's, put in every trace entry
std::map<int, std::deque<TraceEntry>> traces;    // by CUDA device
struct BlockRec {
    size_t size;
    int device;
    void *stream;
    std::shared_ptr<c10::GatheredContext> context;
};
std::map<void *, BlockRec> history_blocks;       // blocks allocated while tracing
std::vector<c10::cuda::CUDACachingAllocator::AllocatorTraceTracker> trace_trackers;
std::vector<c10::cuda::CUDACachingAllocator::OutOfMemoryObserver> oom_observers;
std::mutex observers_mutex;

const char *action_name(TraceEntry::Action a) {
    switch (a) {
    case TraceEntry::ALLOC: return "alloc";
    case TraceEntry::FREE_REQUESTED: return "free_requested";
    case TraceEntry::FREE_COMPLETED: return "free_completed";
    case TraceEntry::OOM: return "oom";
    case TraceEntry::SEGMENT_FREE: return "segment_free";
    case TraceEntry::SEGMENT_UNMAP: return "segment_unmap";
    default: return "";
    }
}

// (history_mutex held) a trace entry for the history and the trackers
void note_trace_locked(TraceEntry::Action action, int device, size_t addr, size_t size, void *stream,
                       std::shared_ptr<c10::GatheredContext> context) {
    TraceEntry te(action, static_cast<c10::DeviceIndex>(device), addr, size, stream, {0, 0}, 0, std::move(context),
                  "", user_metadata);
    te.time_.t_ = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
    for (auto &t : trace_trackers) t(te);
    if (!history_on) return;                      // (recorded without stacks when the context is NEVER)
    if (std::find(skip_actions.begin(), skip_actions.end(), action_name(action)) != skip_actions.end()) return;
    auto &q = traces[device];
    q.push_back(std::move(te));
    while (trace_max > 0 && q.size() > trace_max) q.pop_front();
}

void note_alloc(void *ptr, size_t size, int device, void *stream) {
    if (ptr == nullptr) return;
    using RC = c10::cuda::CUDACachingAllocator::RecordContext;
    std::shared_ptr<c10::GatheredContext> ctx;
    {
        std::lock_guard<std::mutex> g(history_mutex);
        if (history_on && context_recorder != nullptr && record_when >= RC::STATE) ctx = context_recorder();
        history_blocks[ptr] = {size, device, stream, ctx};
        note_trace_locked(TraceEntry::ALLOC, device, reinterpret_cast<size_t>(ptr), size, stream,
                          record_when >= RC::ALLOC ? ctx : nullptr);
    }
}

void note_free(void *ptr) {
    using RC = c10::cuda::CUDACachingAllocator::RecordContext;
    std::lock_guard<std::mutex> g(history_mutex);
    auto it = history_blocks.find(ptr);
    if (it == history_blocks.end()) return;          // allocated before tracing began: not in the trace
    BlockRec r = it->second;
    history_blocks.erase(it);
    std::shared_ptr<c10::GatheredContext> ctx;
    if (history_on && context_recorder != nullptr && record_when == RC::ALL) ctx = context_recorder();
    for (auto action : {TraceEntry::FREE_REQUESTED, TraceEntry::FREE_COMPLETED}) {
        note_trace_locked(action, r.device, reinterpret_cast<size_t>(ptr), r.size, r.stream, ctx);
    }
}

// An out-of-memory error: the observers and the history hear of it before it is raised.
void note_oom(int device, size_t size, void *stream) {
    size_t free = 0, total = 0;
    (void)cudaMemGetInfo(&free, &total);
    vram_memory_info info{};
    int k = -1;
    if (logical_of_fn(device, &k) == 0) (void)info_fn(k, &info);
    std::vector<c10::cuda::CUDACachingAllocator::OutOfMemoryObserver> observers;
    {
        std::lock_guard<std::mutex> g(observers_mutex);
        observers = oom_observers;
    }
    for (auto &o : observers) o(device, info.current, total, free);
    if (tracing.load(std::memory_order_relaxed)) {
        std::lock_guard<std::mutex> g(history_mutex);
        note_trace_locked(TraceEntry::OOM, device, free, size, stream, nullptr);
    }
}

void note_oom(int device, size_t size, void *stream);

void *checked_alloc(size_t size, int device, cudaStream_t stream) {
    void *ptr = vram_alloc(static_cast<std::ptrdiff_t>(size), device, stream);
    if (ptr == nullptr && size > 0) {
        std::string why = vram_error();
        note_oom(device, size, stream);
        TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory (vram): ", why);
    }
    return ptr;
}

void check(int status, const char *what) {
    TORCH_CHECK(status == 0, "vram: ", what, ": ", vram_error());
}

// the logical device serving CUDA device d (vram_logical_device_of), looked up once per device
constexpr int kMaxDevices = 64;
std::array<std::atomic<int>, kMaxDevices> logical_cache;

int logical_of(c10::DeviceIndex d) {
    TORCH_CHECK(d >= 0 && d < kMaxDevices, "vram: CUDA device ", static_cast<int>(d), " is out of range");
    int k = logical_cache[d].load(std::memory_order_relaxed);
    if (k >= 0) return k;
    check(logical_of_fn(d, &k), "the logical device of a CUDA device");
    logical_cache[d].store(k, std::memory_order_relaxed);
    return k;
}

// Private pools (CUDA graphs, torch.cuda.MemPool): PyTorch's pool ids on vram's private pools.
// While a capture (or use_mem_pool) is active, requests whose stream its filter accepts go to its
// pool; everything here happens under `pools_mutex`, and the hot path looks only at `capturing`.
struct PoolRec {
    int logical = -1, pool = -1, uses = 0;
};
struct Capture {
    c10::DeviceIndex device;
    c10::MempoolId_t id;
    std::function<bool(cudaStream_t)> filter;
};
std::mutex pools_mutex;
std::map<std::tuple<int, c10::CaptureId_t, c10::CaptureId_t>, PoolRec> pools;
std::vector<Capture> captures;
std::atomic<int> capturing{0};

std::tuple<int, c10::CaptureId_t, c10::CaptureId_t> pool_key(c10::DeviceIndex d, c10::MempoolId_t id) {
    return {static_cast<int>(d), id.first, id.second};
}

// (pools_mutex held) the pool's record, created with a vram private pool on first use
PoolRec &pool_incref_locked(c10::DeviceIndex d, c10::MempoolId_t id) {
    PoolRec &r = pools[pool_key(d, id)];
    if (r.pool < 0) {
        r.logical = logical_of(d);
        int pool = -1;
        int s = pool_create_fn(r.logical, &pool);
        if (s != 0) {
            pools.erase(pool_key(d, id));
            check(s, "a private pool for a CUDA graph");
        }
        r.pool = pool;
    }
    r.uses++;
    return r;
}

// A request during a capture: into the pool of the capture that takes its stream, if any.
void *alloc_capturing(size_t size, c10::DeviceIndex d, cudaStream_t stream) {
    int logical = -1, pool = -1;
    {
        std::lock_guard<std::mutex> g(pools_mutex);
        for (auto it = captures.rbegin(); it != captures.rend(); ++it) {
            if (it->device == d && it->filter(stream)) {
                const PoolRec &r = pools[pool_key(d, it->id)];
                logical = r.logical;
                pool = r.pool;
                break;
            }
        }
    }
    // vram's driver calls (mapping memory, events) are not stream work: relaxed, as PyTorch's own
    c10::cuda::CUDAStreamCaptureModeGuard relaxed(cudaStreamCaptureModeRelaxed);
    if (pool < 0) return checked_alloc(size, d, stream);
    void *ptr = nullptr;
    if (pool_alloc_fn(&ptr, size, logical, pool, stream) != 0 && size > 0) {
        std::string why = vram_error();
        note_oom(d, size, stream);
        TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory (vram, a CUDA graph's private pool): ", why);
    }
    return ptr;
}

void *route_alloc(size_t size, c10::DeviceIndex d, cudaStream_t stream) {
    void *ptr = capturing.load(std::memory_order_acquire) > 0 ? alloc_capturing(size, d, stream)
                                                             : checked_alloc(size, d, stream);
    if (tracing.load(std::memory_order_relaxed)) note_alloc(ptr, size, d, stream);
    return ptr;
}

void release(void *ptr) {
    if (tracing.load(std::memory_order_relaxed)) note_free(ptr);
    if (capturing.load(std::memory_order_relaxed) > 0) {
        c10::cuda::CUDAStreamCaptureModeGuard relaxed(cudaStreamCaptureModeRelaxed);
        vram_release(ptr);
        return;
    }
    vram_release(ptr);
}

void fill(c10::CachingAllocator::StatArray &out, const vram_stat *in) {
    for (size_t k = 0; k < out.size(); k++) {
        out[k].current = in[k].current;
        out[k].peak = in[k].peak;
        out[k].allocated = in[k].allocated;
        out[k].freed = in[k].freed;
    }
}

// getCheckpointState's state: the live blocks of a private pool and their sizes
struct VramPoolState final : c10::cuda::CUDACachingAllocator::AllocatorState {
    c10::DeviceIndex device;
    c10::MempoolId_t id;
    std::map<void *, size_t> live;
};

// A logical device's memory map (vram_get_segments), asked again until the arrays are large enough.
struct MemoryMap {
    std::vector<vram_segment_info> segs;
    std::vector<vram_block_info> blocks;
};

MemoryMap memory_map(int logical) {
    MemoryMap m;
    size_t ns = 0, nb = 0;
    check(segments_fn(logical, nullptr, 0, &ns, nullptr, 0, &nb), "the memory map");
    for (;;) {
        m.segs.resize(ns + 8);
        m.blocks.resize(nb + 64);
        size_t cs = m.segs.size(), cb = m.blocks.size();
        check(segments_fn(logical, m.segs.data(), cs, &ns, m.blocks.data(), cb, &nb), "the memory map");
        if (ns <= cs && nb <= cb) break;
    }
    m.segs.resize(ns);
    m.blocks.resize(nb);
    return m;
}

// The private pool of PyTorch's pool id on device d: false when there is none.
bool find_pool(c10::DeviceIndex d, c10::MempoolId_t id, int *logical, int *pool) {
    std::lock_guard<std::mutex> g(pools_mutex);
    auto it = pools.find(pool_key(d, id));
    if (it == pools.end()) return false;
    *logical = it->second.logical;
    *pool = it->second.pool;
    return true;
}

// The blocks of pool id on device d that the program holds, with their sizes.
std::map<void *, size_t> pool_block_sizes(c10::DeviceIndex d, c10::MempoolId_t id) {
    int logical = -1, pool = -1;
    std::map<void *, size_t> out;
    if (!find_pool(d, id, &logical, &pool)) return out;
    MemoryMap m = memory_map(logical);
    for (const auto &s : m.segs) {
        if (s.private_pool != pool) continue;
        for (size_t i = s.first_block; i < s.first_block + s.nblocks; i++) {
            if (m.blocks[i].allocated) out[reinterpret_cast<void *>(m.blocks[i].address)] = m.blocks[i].size;
        }
    }
    return out;
}

using Pluggable = torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator;

// Tensors (allocate) and raw allocations skip CUDAPluggableAllocator's locked table: vram keeps each
// block's stream, so the deleter needs the pointer alone; record_stream, the statistics, empty_cache,
// the memory fraction and CUDA graphs' private pools go to vram. The rest is CUDAPluggableAllocator's.
struct VramAllocator final : Pluggable {
    VramAllocator()
        : Pluggable([](size_t size, int device, cudaStream_t stream) { return route_alloc(size, device, stream); },
                    [](void *ptr, size_t, int, cudaStream_t) { release(ptr); }) {}

    static c10::DeviceIndex current_device() {
        c10::DeviceIndex d = -1;
        C10_CUDA_CHECK(c10::cuda::GetDevice(&d));
        return d;
    }
    c10::DataPtr allocate(size_t size) override {
        c10::DeviceIndex d = current_device();
        void *ptr = route_alloc(size, d, c10::cuda::getCurrentCUDAStream(d).stream());
        return {ptr, ptr, &release, c10::Device(c10::DeviceType::CUDA, d)};
    }
    c10::DeleterFnPtr raw_deleter() const override {
        return &release;
    }
    void *raw_alloc(size_t size) override {
        c10::DeviceIndex d = current_device();
        return route_alloc(size, d, c10::cuda::getCurrentCUDAStream(d).stream());
    }
    void *raw_alloc_with_stream(size_t size, cudaStream_t stream) override {
        return route_alloc(size, current_device(), stream);
    }
    void raw_delete(void *ptr) override {
        release(ptr);
    }
    // tensor.record_stream(s): the block's free then waits for s too (vram_record_stream)
    // (memory vram did not hand out, e.g. from another process or from_blob: nothing to do, as in
    // PyTorch's own allocator)
    void recordStream(const c10::DataPtr &ptr, c10::cuda::CUDAStream stream) override {
        if (ptr.get() == nullptr || ptr.get_deleter() != &release) return;
        if (vram_record(ptr.get(), stream.stream()) != 0) {
            TORCH_CHECK(false, "vram: record_stream: ", vram_error());
        }
    }

    // ---- statistics (torch.cuda.memory_stats and everything built on it)
    c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
        vram_allocator_stats s;
        check(stats_fn(logical_of(device), &s), "memory statistics");
        c10::CachingDeviceAllocator::DeviceStats d;
        fill(d.allocation, s.allocation);
        fill(d.segment, s.segment);
        fill(d.active, s.active);
        fill(d.inactive_split, s.inactive_split);
        fill(d.allocated_bytes, s.allocated_bytes);
        fill(d.reserved_bytes, s.reserved_bytes);
        fill(d.active_bytes, s.active_bytes);
        fill(d.inactive_split_bytes, s.inactive_split_bytes);
        fill(d.requested_bytes, s.requested_bytes);
        d.num_alloc_retries = s.num_alloc_retries;
        d.num_ooms = s.num_ooms;
        d.num_sync_all_streams = s.num_sync_all_streams;
        d.num_device_alloc = s.num_device_alloc;
        d.num_device_free = s.num_device_free;
        d.max_split_size = s.max_split_size;
        return d;
    }
    void resetPeakStats(c10::DeviceIndex device) override {
        check(reset_peak_fn(logical_of(device)), "reset_peak_memory_stats");
    }
    void resetAccumulatedStats(c10::DeviceIndex device) override {
        check(reset_acc_fn(logical_of(device)), "reset_accumulated_memory_stats");
    }

    // ---- giving memory back, the largest cached block, the memory fraction
    void emptyCache(c10::cuda::MempoolId_t /*mempool_id*/) override {
        int n = c10::cuda::device_count();
        for (int d = 0; d < n && d < kMaxDevices; d++) {
            int k = -1;
            if (logical_of_fn(d, &k) != 0) continue;
            bool traced = tracing.load(std::memory_order_relaxed);
            MemoryMap before = traced ? memory_map(k) : MemoryMap{};
            check(trim_fn(k, 0), "empty_cache");
            if (traced) note_segments_gone(d, before, memory_map(k));
        }
    }
    // The history's segment_unmap / segment_free entries: the parts of `before`'s segments that
    // `after` no longer has.
    static void note_segments_gone(int device, const MemoryMap &before, const MemoryMap &after) {
        std::lock_guard<std::mutex> g(history_mutex);
        for (const auto &s : before.segs) {
            uint64_t at = s.address, end = s.address + s.size;
            for (const auto &t : after.segs) {      // (both in address order within an arena)
                uint64_t lo = t.address, hi = t.address + t.size;
                if (hi <= at || lo >= end) continue;
                if (lo > at) {
                    note_trace_locked(s.expandable ? TraceEntry::SEGMENT_UNMAP : TraceEntry::SEGMENT_FREE, device,
                                      at, lo - at, nullptr, nullptr);
                }
                at = hi > at ? hi : at;
            }
            if (at < end) {
                note_trace_locked(s.expandable ? TraceEntry::SEGMENT_UNMAP : TraceEntry::SEGMENT_FREE, device, at,
                                  end - at, nullptr, nullptr);
            }
        }
    }
    void cacheInfo(c10::DeviceIndex device, size_t *largestBlock) override {
        vram_memory_info info;
        check(info_fn(logical_of(device), &info), "the largest cached block");
        *largestBlock = info.largest_free_block;
    }
    void setMemoryFraction(double fraction, c10::DeviceIndex device) override {
        check(set_fraction_fn(logical_of(device), fraction), "set_per_process_memory_fraction");
    }
    double getMemoryFraction(c10::DeviceIndex device) override {
        double f = 1.0;
        check(get_fraction_fn(logical_of(device), &f), "get_per_process_memory_fraction");
        return f;
    }

    // ---- CUDA graphs and memory pools: private pools of vram
    void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                             std::function<bool(cudaStream_t)> filter) override {
        std::lock_guard<std::mutex> g(pools_mutex);
        PoolRec &r = pool_incref_locked(device, mempool_id);
        // no event is recorded, queried or waited for on the device until the capture ends (a
        // captured stream's event would be a node of the graph; waiting for it invalidates the capture)
        check(capture_begin_fn(r.logical), "beginning a CUDA graph's capture");
        captures.push_back({device, mempool_id, std::move(filter)});
        capturing.fetch_add(1, std::memory_order_release);
    }
    void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
        std::lock_guard<std::mutex> g(pools_mutex);
        for (auto it = captures.begin(); it != captures.end(); ++it) {
            if (it->device == device && it->id == mempool_id) {
                captures.erase(it);
                capturing.fetch_sub(1, std::memory_order_release);
                check(capture_end_fn(pools[pool_key(device, mempool_id)].logical), "ending a CUDA graph's capture");
                break;
            }
        }
    }
    void createOrIncrefPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                            std::shared_ptr<c10::cuda::CUDACachingAllocator::CUDAAllocator> allocator) override {
        TORCH_CHECK(allocator == nullptr, "vram: a MemPool with an allocator of its own is not supported under vram");
        std::lock_guard<std::mutex> g(pools_mutex);
        pool_incref_locked(device, mempool_id);
    }
    void releasePool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
        std::lock_guard<std::mutex> g(pools_mutex);
        auto it = pools.find(pool_key(device, mempool_id));
        if (it == pools.end() || --it->second.uses > 0) return;
        int logical = it->second.logical, pool = it->second.pool;
        pools.erase(it);
        check(pool_release_fn(logical, pool), "releasing a CUDA graph's private pool");
    }
    void setUseOnOOM(c10::DeviceIndex, c10::MempoolId_t, bool use_on_oom) override {
        TORCH_CHECK(!use_on_oom, "vram: MemPool(use_on_oom=True) is not supported under vram");
    }
    int getPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
        std::lock_guard<std::mutex> g(pools_mutex);
        auto it = pools.find(pool_key(device, mempool_id));
        return it == pools.end() ? 0 : it->second.uses;
    }
    std::unordered_set<void *> pool_blocks(c10::DeviceIndex device, c10::MempoolId_t mempool_id) {
        int logical = -1, pool = -1;
        if (!find_pool(device, mempool_id, &logical, &pool)) return {};
        size_t n = 0;
        check(pool_blocks_fn(logical, pool, nullptr, 0, &n), "a private pool's blocks");
        std::vector<void *> out(n + 16);
        check(pool_blocks_fn(logical, pool, out.data(), out.size(), &n), "a private pool's blocks");
        out.resize(std::min(n, out.size()));
        return {out.begin(), out.end()};
    }
    bool checkPoolLiveAllocations(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                                  const std::unordered_set<void *> &expected_live_allocations) override {
        return pool_blocks(device, mempool_id) == expected_live_allocations;
    }
    // torch.compile's CUDA-graph trees checkpoint a pool after each recording and restore it when
    // they take another path: blocks live now but not then are freed (the caller drops their
    // storages' deleters, as with PyTorch's allocator), blocks of the checkpoint freed since are
    // handed out again at their addresses (vram_private_malloc_at).
    std::shared_ptr<c10::cuda::CUDACachingAllocator::AllocatorState> getCheckpointState(
        c10::DeviceIndex device, c10::MempoolId_t id) override {
        auto st = std::make_shared<VramPoolState>();
        st->device = device;
        st->id = id;
        st->live = pool_block_sizes(device, id);
        return st;
    }
    c10::cuda::CUDACachingAllocator::CheckpointDelta setCheckpointPoolState(
        c10::DeviceIndex device,
        std::shared_ptr<c10::cuda::CUDACachingAllocator::AllocatorState> pps) override {
        auto st = std::dynamic_pointer_cast<VramPoolState>(pps);
        TORCH_CHECK(st != nullptr, "vram: setCheckpointPoolState: not a state of vram's allocator");
        int logical = -1, pool = -1;
        TORCH_CHECK(find_pool(device, st->id, &logical, &pool), "vram: setCheckpointPoolState: the pool is gone");
        c10::cuda::CUDACachingAllocator::CheckpointDelta delta;
        std::unordered_set<void *> now = pool_blocks(device, st->id);
        for (void *ptr : now) {
            if (st->live.count(ptr) == 0) delta.ptrs_freed.push_back(ptr);
        }
        for (void *ptr : delta.ptrs_freed) release(ptr);
        cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
        for (const auto &[ptr, size] : st->live) {
            if (now.count(ptr) == 1) continue;
            check(pool_alloc_at_fn(ptr, size, logical, pool, stream), "restoring a CUDA-graph pool's checkpoint");
            if (tracing.load(std::memory_order_relaxed)) note_alloc(ptr, size, device, stream);
            delta.dataptrs_allocd.emplace_back(ptr, ptr, &release, c10::Device(c10::DeviceType::CUDA, device));
        }
        return delta;
    }
    // ---- memory history, snapshots, out-of-memory observers, trace trackers
    void recordHistory(bool enabled, c10::cuda::CUDACachingAllocator::CreateContextFn recorder, size_t max_entries,
                       c10::cuda::CUDACachingAllocator::RecordContext when, bool clearHistory,
                       const std::vector<std::string> &skip) override {
        std::lock_guard<std::mutex> g(history_mutex);
        history_on = enabled;
        context_recorder = enabled ? recorder : nullptr;
        record_when = enabled ? when : c10::cuda::CUDACachingAllocator::RecordContext::NEVER;
        trace_max = max_entries;
        skip_actions = skip;
        if (clearHistory) traces.clear();
        if (!enabled && trace_trackers.empty()) history_blocks.clear();
        tracing.store(history_on || !trace_trackers.empty());
    }
    // ---- CUDA tensors shared with other processes (torch.multiprocessing): vram's IPC handles; the
    // receiving process must run vram's allocator too
    c10::cuda::CUDACachingAllocator::ShareableHandle shareIpcHandle(void *ptr) override {
        std::string handle(256, '\0');
        size_t length = 0, offset = 0;
        int s = ipc_export_fn(ptr, handle.data(), handle.size(), &length, &offset);
        if (s != 0 && length > handle.size()) {    // (more extents than the first guess)
            handle.resize(length);
            s = ipc_export_fn(ptr, handle.data(), handle.size(), &length, &offset);
        }
        check(s, "sharing a CUDA tensor");
        handle.resize(length);
        return {static_cast<ptrdiff_t>(offset), handle};
    }
    std::shared_ptr<void> getIpcDevPtr(std::string handle) override {
        void *ptr = nullptr;
        check(ipc_open_fn(current_device(), handle.data(), handle.size(), &ptr), "opening a shared CUDA tensor");
        return std::shared_ptr<void>(ptr, [](void *p) { (void)ipc_close_fn(p); });
    }
    void setUserMetadata(const std::string &metadata) override {
        std::lock_guard<std::mutex> g(history_mutex);
        user_metadata = metadata;
    }
    std::string getUserMetadata() override {
        std::lock_guard<std::mutex> g(history_mutex);
        return user_metadata;
    }
    bool isHistoryEnabled() override {
        std::lock_guard<std::mutex> g(history_mutex);
        return history_on;
    }
    void attachOutOfMemoryObserver(c10::cuda::CUDACachingAllocator::OutOfMemoryObserver observer) override {
        std::lock_guard<std::mutex> g(observers_mutex);
        oom_observers.push_back(std::move(observer));
    }
    void attachAllocatorTraceTracker(c10::cuda::CUDACachingAllocator::AllocatorTraceTracker tracker) override {
        std::lock_guard<std::mutex> g(history_mutex);
        trace_trackers.push_back(std::move(tracker));
        tracing.store(true);
    }
    c10::cuda::CUDACachingAllocator::SnapshotInfo snapshot(c10::cuda::MempoolId_t mempool_id,
                                                           bool include_traces) override {
        c10::cuda::CUDACachingAllocator::SnapshotInfo info;
        int n = c10::cuda::device_count();
        std::map<std::pair<int, int>, c10::MempoolId_t> owners;   // (device, vram pool) -> PyTorch's id
        {
            std::lock_guard<std::mutex> g(pools_mutex);
            for (const auto &[key, r] : pools) owners[{std::get<0>(key), r.pool}] = {std::get<1>(key), std::get<2>(key)};
        }
        std::map<void *, std::shared_ptr<c10::GatheredContext>> contexts;
        {
            std::lock_guard<std::mutex> g(history_mutex);
            for (const auto &[ptr, r] : history_blocks) contexts[ptr] = r.context;
        }
        const c10::cuda::MempoolId_t none = {0, 0};
        for (int d = 0; d < n && d < kMaxDevices; d++) {
            int k = -1;
            if (logical_of_fn(d, &k) != 0) continue;
            MemoryMap m = memory_map(k);
            for (const auto &seg : m.segs) {
                c10::CachingDeviceAllocator::SegmentInfo s;
                s.device = static_cast<c10::DeviceIndex>(d);
                s.address = seg.address;
                s.total_size = seg.size;
                s.is_large = !seg.small;
                s.is_expandable = seg.expandable != 0;
                auto owner = owners.find({d, seg.private_pool});
                if (seg.private_pool >= 0 && owner != owners.end()) s.owner_private_pool_id = owner->second;
                if (mempool_id != none && s.owner_private_pool_id != mempool_id) continue;
                for (size_t i = seg.first_block; i < seg.first_block + seg.nblocks; i++) {
                    const vram_block_info &b = m.blocks[i];
                    c10::CachingDeviceAllocator::BlockInfo bi;
                    bi.size = b.size;
                    bi.requested_size = b.requested;
                    bi.allocated = b.allocated != 0;
                    bi.active = b.active != 0;
                    if (b.allocated) {
                        auto c = contexts.find(reinterpret_cast<void *>(b.address));
                        if (c != contexts.end()) bi.context_when_allocated = c->second;
                        if (s.stream == nullptr) s.stream = b.stream;
                        s.allocated_size += b.size;
                    }
                    if (b.active) s.active_size += b.size;
                    s.requested_size += b.requested;
                    s.blocks.push_back(std::move(bi));
                }
                info.segments.push_back(std::move(s));
            }
        }
        info.device_traces.resize(static_cast<size_t>(n));
        if (include_traces) {
            std::lock_guard<std::mutex> g(history_mutex);
            for (const auto &[d, q] : traces) {
                if (d < n) info.device_traces[d].assign(q.begin(), q.end());
            }
        }
        info.config_metadata.garbage_collection_threshold = 0.0;
        info.config_metadata.max_split_size = SIZE_MAX;
        info.config_metadata.pinned_num_register_threads = 0;
        info.config_metadata.expandable_segments = true;
        info.config_metadata.release_lock_on_malloc = false;
        info.config_metadata.pinned_use_host_register = false;
        info.config_metadata.graph_capture_record_stream_reuse = false;
        info.config_metadata.last_allocator_settings = "vram";
        return info;
    }
    std::string name() override {
        return "vram";
    }
};

template <typename F>
bool bind(void *lib, F &fn, const char *name) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    return fn != nullptr;
}
}  // namespace

// Loads libvram.so and makes vram PyTorch's CUDA allocator (raises when PyTorch already allocated).
bool install(const std::string &path) {
    void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) return false;
    for (auto &k : logical_cache) k.store(-1);
    bool ok = bind(lib, vram_alloc, "vram_plugin_alloc") && bind(lib, vram_release, "vram_plugin_release") &&
              bind(lib, vram_error, "vram_last_error") && bind(lib, vram_record, "vram_record_stream") &&
              bind(lib, logical_of_fn, "vram_logical_device_of") && bind(lib, stats_fn, "vram_get_allocator_stats") &&
              bind(lib, reset_peak_fn, "vram_reset_memory_stats") &&
              bind(lib, reset_acc_fn, "vram_reset_accumulated_stats") && bind(lib, info_fn, "vram_get_memory_info") &&
              bind(lib, trim_fn, "vram_trim") && bind(lib, set_fraction_fn, "vram_set_memory_fraction") &&
              bind(lib, get_fraction_fn, "vram_get_memory_fraction") &&
              bind(lib, pool_create_fn, "vram_private_pool_create") &&
              bind(lib, pool_alloc_fn, "vram_private_malloc_async") &&
              bind(lib, pool_release_fn, "vram_private_pool_release") &&
              bind(lib, capture_begin_fn, "vram_capture_begin") && bind(lib, capture_end_fn, "vram_capture_end") &&
              bind(lib, pool_blocks_fn, "vram_private_pool_blocks") &&
              bind(lib, pool_alloc_at_fn, "vram_private_malloc_at") && bind(lib, segments_fn, "vram_get_segments") &&
              bind(lib, ipc_export_fn, "vram_ipc_export") && bind(lib, ipc_open_fn, "vram_ipc_open") &&
              bind(lib, ipc_close_fn, "vram_ipc_close");
    if (!ok) return false;
    auto allocator = std::make_shared<VramAllocator>();
    allocator->init(0);   // as torch.cuda.memory.CUDAPluggableAllocator's
    torch::cuda::CUDAPluggableAllocator::changeCurrentAllocator(allocator);
    return true;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("install", torch::wrap_pybind_function(install), "install");
}
