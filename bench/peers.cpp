// peers.cpp: replays an allocation trace (traces/README.md) through another GPU allocator, so that
// vram's `vram replay` figures can be set beside them, measured the same way on the same machine.
//
//   peers ALLOCATOR TRACE [--passes N] [--limit BYTES]
//
//   ALLOCATOR   cumemalloc        cuMemAlloc / cuMemFree for every call
//               cumemallocasync   cuMemAllocAsync / cuMemFreeAsync on one stream, the device's default
//                                 mempool with CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = UINT64_MAX
//               torch             PyTorch's caching allocator, c10::cuda::CUDACachingAllocator::
//                                 raw_alloc / raw_delete (PYTORCH_CUDA_ALLOC_CONF unset)
//               torch-expandable  the same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
//               host              malloc / free on the host: no GPU needed; a check of this program
//                                 and the floor that the replay loop itself costs
//
// The trace is read whole (gzip through `gzip -dc`, or plain text) and its ids are resolved to dense
// slot numbers before anything is timed. It is then replayed N times (default 3) on card 0: pass 1
// starts from an empty pool ("cold": it includes the driver calls that fill the pool), passes 2..N
// reuse what the allocator kept ("warm"). Between passes, what the trace leaves live is freed
// (untimed), and the device is synchronised (untimed). Each pass loop is timed as a whole with
// std::chrono::steady_clock; ns/op is that time over the alloc and free calls made.
//
// Output: one JSON line on stdout (everything else goes to stderr):
//   {"allocator", "trace", "trace_events", "ops", "ops_cold", "passes", "limit_bytes", "peak_live_bytes",
//    "peak_reserved_bytes", "reserved_to_live", "cold_ns_per_op", "warm_ns_per_op", "driver_calls",
//    "driver_calls_cold", "failed_allocs", "first_error", "note"}
// trace_events: the trace's alloc and free events (one pass); ops: the calls made over all passes
// (as `vram replay` counts them; a free whose allocation failed is skipped), ops_cold: in pass 1.
// limit_bytes: the --limit given, null without one.
// driver_calls counts the driver allocation and free calls over all N passes (and the untimed frees
// between them), driver_calls_cold those of pass 1; null where the allocator does not let them be
// observed. Exit status 0 when the replay ran (failed allocations are counted, not fatal), 1 on
// errors, 2 on bad usage.
//
// Peak reserved bytes, by allocator:
//   cumemalloc       a separate untimed pass after the timed ones samples cuMemGetInfo (total - free)
//                    after every allocation; the peak minus the value before that pass
//   cumemallocasync  CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH of the pool (reset before pass 1)
//   torch*           getDeviceStats(0).reserved_bytes[aggregate].peak
//   host             null (nothing is reserved on a device)
//
// --limit BYTES (a plain decimal byte count, no suffix) caps what the allocator may hold, to see what
// it does under the same limit as `vram replay --limit` (bench/limit.sh). An allocation the limit
// refuses is a failed allocation (counted, first_error keeps the first message), not an error. By
// allocator:
//   cumemalloc       after every allocation, cuMemGetInfo's used bytes (total - free) minus their value
//                    before the replay started; above the limit, the block is freed again and the
//                    allocation fails. This costs one cuMemGetInfo (~5 us) per allocation, timed.
//   cumemallocasync  the default pool has no hard limit, so the limit is enforced on its reserved
//                    bytes: after every allocation, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT; above the
//                    limit, the stream is synchronised and the pool trimmed to 0 (cuMemPoolTrimTo),
//                    and when it is still above, the block is freed again (cuMemFreeAsync,
//                    synchronise, trim) and the allocation fails. The common path costs one
//                    attribute read per allocation, timed; the note says how often the pool was
//                    trimmed. peak_reserved_bytes (RESERVED_MEM_HIGH) includes the moments above the
//                    limit before a trim; the note gives the highest reserved value that was kept.
//   torch*           c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, 0) before the first
//                    allocation. PyTorch allows fraction x total bytes of segments (reserved; its
//                    check is total_allocated_memory + size > allowed, expandable segments included),
//                    total being cudaMemGetInfo's (older PyTorch) or cudaDeviceProp's
//                    totalGlobalMem (newer); so the fraction is computed against the larger of
//                    cuMemGetInfo's total and cuDeviceTotalMem, and stepped to the largest double
//                    whose static_cast<size_t>(fraction * double(total)) is not above the limit:
//                    PyTorch then allows the limit itself (or the nearest below it that a fraction
//                    gives: the note says how far below). A limit at or above the card's memory is
//                    fraction 1 (no cap). Before failing, PyTorch frees its cached blocks and
//                    retries; then raw_alloc throws c10::OutOfMemoryError, counted here as a failed
//                    allocation (TorchAlloc::alloc catches it as it catches every std::exception).
//   host             a counting limit on live bytes: live + bytes > limit fails. A perfect
//                    allocator, usable without a GPU (a check of this program and of bench/limit.sh).

#ifndef PEERS_HOST_ONLY  // -DPEERS_HOST_ONLY: host alone, built without CUDA or PyTorch (bench/build.sh
                         // does so where there is no PyTorch); the other allocators then exit 1
#include <cuda.h>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

// ---- the trace ---------------------------------------------------------------------------------

struct Event {
    uint64_t bytes;  // requested bytes
    uint32_t slot;   // dense index of the allocation id
    bool alloc;      // true: allocate, false: free
};

struct Trace {
    std::vector<Event> events;
    size_t num_slots = 0;
    size_t num_allocs = 0, num_frees = 0;
    uint64_t peak_live_bytes = 0;
};

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "peers: %s\n", msg.c_str());
    std::exit(1);
}

std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) {
        if (c == '\'') q += "'\\''";
        else q += c;
    }
    return q + "'";
}

bool is_gzip(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) die(path + ": cannot open: " + std::strerror(errno));
    unsigned char m[2] = {0, 0};
    bool gz = std::fread(m, 1, 2, f) == 2 && m[0] == 0x1f && m[1] == 0x8b;
    std::fclose(f);
    return gz;
}

bool parse_i64(const char* s, int64_t* v) {
    if (!s || !*s) return false;
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(s, &end, 10);
    if (errno || *end) return false;
    *v = x;
    return true;
}

bool parse_u64(const char* s, uint64_t* v) {
    if (!s || *s < '0' || *s > '9') return false;
    char* end = nullptr;
    errno = 0;
    unsigned long long x = std::strtoull(s, &end, 10);
    if (errno || *end) return false;
    *v = x;
    return true;
}

Trace load_trace(const std::string& path) {
    bool gz = is_gzip(path);
    FILE* in = gz ? popen(("gzip -dc -- " + shell_quote(path)).c_str(), "r") : std::fopen(path.c_str(), "r");
    if (!in) die(path + ": cannot read: " + std::strerror(errno));

    Trace t;
    std::unordered_map<int64_t, uint32_t> slot_of;
    std::vector<uint64_t> slot_bytes;
    std::vector<char> slot_freed;
    uint64_t live = 0;
    char* line = nullptr;
    size_t cap = 0;
    size_t lineno = 0;
    auto bad = [&](const std::string& msg) { die(path + ":" + std::to_string(lineno) + ": " + msg); };

    while (getline(&line, &cap, in) >= 0) {
        lineno++;
        char* save = nullptr;
        const char* kind = strtok_r(line, " \t\r\n", &save);
        if (!kind || kind[0] == '#') continue;
        const char* tok[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
        int n = 0;
        while (n < 5 && (tok[n] = strtok_r(nullptr, " \t\r\n", &save)) != nullptr) n++;
        int64_t id = 0, stream = 0, time_us = 0;
        if (std::strcmp(kind, "a") == 0) {
            uint64_t bytes = 0;
            if (n != 4 || !parse_i64(tok[0], &id) || !parse_u64(tok[1], &bytes) ||
                !parse_i64(tok[2], &stream) || !parse_i64(tok[3], &time_us))
                bad("malformed alloc; expected 'a <id> <bytes> <stream> <time_us>'");
            uint32_t slot = static_cast<uint32_t>(slot_bytes.size());
            if (!slot_of.emplace(id, slot).second) bad("id " + std::to_string(id) + " allocated twice");
            slot_bytes.push_back(bytes);
            slot_freed.push_back(0);
            live += bytes;
            t.peak_live_bytes = std::max(t.peak_live_bytes, live);
            t.num_allocs++;
            t.events.push_back(Event{bytes, slot, true});
        } else if (std::strcmp(kind, "f") == 0) {
            if (n != 2 || !parse_i64(tok[0], &id) || !parse_i64(tok[1], &time_us))
                bad("malformed free; expected 'f <id> <time_us>'");
            auto it = slot_of.find(id);
            if (it == slot_of.end()) bad("free of unknown id " + std::to_string(id));
            uint32_t slot = it->second;
            if (slot_freed[slot]) bad("id " + std::to_string(id) + " freed twice");
            slot_freed[slot] = 1;
            live -= slot_bytes[slot];
            t.num_frees++;
            t.events.push_back(Event{slot_bytes[slot], slot, false});
        } else {
            bad(std::string("unknown event '") + kind + "' (expected 'a', 'f' or '#')");
        }
    }
    std::free(line);
    bool read_error = std::ferror(in) != 0;
    if (gz) {
        int st = pclose(in);
        if (st != 0) die(path + ": gzip -dc failed (status " + std::to_string(st) + ")");
    } else {
        std::fclose(in);
    }
    if (read_error) die(path + ": read error");
    t.num_slots = slot_bytes.size();
    return t;
}

// ---- allocators --------------------------------------------------------------------------------
//
// Each has alloc(bytes) -> pointer or nullptr (failure: note() keeps the first message), free(ptr),
// sync() (wait for the device, untimed), and the figures read after the run.

std::string g_first_error;
void note_error(const std::string& msg) {
    if (g_first_error.empty()) g_first_error = msg;
}

// The first line of an exception's message.
std::string first_line(const char* s) {
    std::string m(s ? s : "");
    size_t nl = m.find('\n');
    return nl == std::string::npos ? m : m.substr(0, nl);
}

#ifndef PEERS_HOST_ONLY
std::string cu_error(CUresult r) {
    const char* name = nullptr;
    const char* text = nullptr;
    cuGetErrorName(r, &name);
    cuGetErrorString(r, &text);
    std::string n = name ? name : "CUresult " + std::to_string(static_cast<int>(r));
    return text ? n + " (" + text + ")" : n;
}

void cu_check(CUresult r, const char* what) {
    if (r != CUDA_SUCCESS) die(std::string(what) + ": " + cu_error(r));
}

// Makes card 0's primary context current (the same context the CUDA runtime uses).
CUcontext cu_start() {
    cu_check(cuInit(0), "cuInit");
    CUdevice dev;
    cu_check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    CUcontext ctx;
    cu_check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    cu_check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    return ctx;
}

uint64_t cu_used_bytes() {
    size_t free_b = 0, total_b = 0;
    cu_check(cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo");
    return static_cast<uint64_t>(total_b - free_b);
}

struct CuMemAlloc {
    uint64_t calls = 0;
    uint64_t limit = 0;  // --limit, 0: none
    uint64_t base = 0;   // cuMemGetInfo's used bytes before the replay (with a limit)
    explicit CuMemAlloc(uint64_t limit_bytes) : limit(limit_bytes) {
        cu_start();
        if (limit) base = cu_used_bytes();
    }
    void* alloc(uint64_t bytes) {
        calls++;
        CUdeviceptr d = 0;
        CUresult r = cuMemAlloc(&d, static_cast<size_t>(bytes));
        if (r != CUDA_SUCCESS) {
            note_error("cuMemAlloc(" + std::to_string(bytes) + "): " + cu_error(r));
            return nullptr;
        }
        if (limit) {
            uint64_t used = cu_used_bytes();
            uint64_t held = used > base ? used - base : 0;
            if (held > limit) {
                calls++;
                cu_check(cuMemFree(d), "cuMemFree");
                note_error("cuMemAlloc(" + std::to_string(bytes) + "): the device's used bytes went " +
                           std::to_string(held) + " above their value before the replay, over the limit of " +
                           std::to_string(limit) + " (block freed again)");
                return nullptr;
            }
        }
        return reinterpret_cast<void*>(d);
    }
    void free(void* p) {
        calls++;
        cu_check(cuMemFree(reinterpret_cast<CUdeviceptr>(p)), "cuMemFree");
    }
    void sync() { cu_check(cuCtxSynchronize(), "cuCtxSynchronize"); }
};

struct CuMemAllocAsync {
    CUstream stream = nullptr;
    CUmemoryPool pool = nullptr;
    uint64_t limit = 0;        // --limit on the pool's reserved bytes, 0: none
    uint64_t trims = 0;        // times the pool went over the limit and was trimmed
    uint64_t trims_failed = 0; // of which still over after the trim: the allocation failed
    uint64_t kept_peak = 0;    // the highest reserved bytes after an allocation that was kept
    explicit CuMemAllocAsync(uint64_t limit_bytes) : limit(limit_bytes) {
        cu_start();
        CUdevice dev;
        cu_check(cuDeviceGet(&dev, 0), "cuDeviceGet");
        int supported = 0;
        cu_check(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev),
                 "cuDeviceGetAttribute(MEMORY_POOLS_SUPPORTED)");
        if (!supported) die("card 0 does not support stream-ordered memory pools");
        cu_check(cuDeviceGetDefaultMemPool(&pool, dev), "cuDeviceGetDefaultMemPool");
        cuuint64_t threshold = UINT64_MAX;
        cu_check(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold),
                 "cuMemPoolSetAttribute(RELEASE_THRESHOLD)");
        cu_check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        cuuint64_t zero = 0;  // the only value RESERVED_MEM_HIGH may be set to: resets it
        cu_check(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero),
                 "cuMemPoolSetAttribute(RESERVED_MEM_HIGH)");
    }
    void* alloc(uint64_t bytes) {
        CUdeviceptr d = 0;
        CUresult r = cuMemAllocAsync(&d, static_cast<size_t>(bytes), stream);
        if (r != CUDA_SUCCESS) {
            note_error("cuMemAllocAsync(" + std::to_string(bytes) + "): " + cu_error(r));
            return nullptr;
        }
        if (limit) {
            uint64_t now = reserved();
            if (now > limit) return over_limit(d, bytes);
            kept_peak = std::max(kept_peak, now);
        }
        return reinterpret_cast<void*>(d);
    }
    // The pool holds more than the limit after allocating d: give its idle memory back, and when
    // that is not enough, d too.
    void* over_limit(CUdeviceptr d, uint64_t bytes) {
        trims++;
        sync();
        trim();
        uint64_t now = reserved();
        if (now <= limit) {
            kept_peak = std::max(kept_peak, now);
            return reinterpret_cast<void*>(d);
        }
        trims_failed++;
        cu_check(cuMemFreeAsync(d, stream), "cuMemFreeAsync");
        sync();
        trim();
        note_error("cuMemAllocAsync(" + std::to_string(bytes) + "): the pool's reserved bytes went over the " +
                   "limit of " + std::to_string(limit) + ": " + std::to_string(now) +
                   " after trimming the pool to 0 (block freed again)");
        return nullptr;
    }
    void free(void* p) {
        cu_check(cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(p), stream), "cuMemFreeAsync");
    }
    void sync() { cu_check(cuStreamSynchronize(stream), "cuStreamSynchronize"); }
    void trim() { cu_check(cuMemPoolTrimTo(pool, 0), "cuMemPoolTrimTo"); }
    uint64_t reserved() {
        cuuint64_t v = 0;
        cu_check(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v),
                 "cuMemPoolGetAttribute(RESERVED_MEM_CURRENT)");
        return static_cast<uint64_t>(v);
    }
    uint64_t peak_reserved() {
        cuuint64_t v = 0;
        cu_check(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &v),
                 "cuMemPoolGetAttribute(RESERVED_MEM_HIGH)");
        return static_cast<uint64_t>(v);
    }
};

// DeviceStats gained num_device_alloc / num_device_free in later PyTorch versions: use them where
// the installed headers have them, report null otherwise.
template <class S, class = void>
struct has_device_alloc_counts : std::false_type {};
template <class S>
struct has_device_alloc_counts<S, std::void_t<decltype(std::declval<S&>().num_device_alloc),
                                              decltype(std::declval<S&>().num_device_free)>>
    : std::true_type {};

template <class S>
int64_t device_alloc_calls(const S& stats) {
    if constexpr (has_device_alloc_counts<S>::value)
        return static_cast<int64_t>(stats.num_device_alloc + stats.num_device_free);
    else
        return -1;
}

// SegmentInfo gained is_expandable with expandable segments: count the segments that are.
template <class G, class = void>
struct has_is_expandable : std::false_type {};
template <class G>
struct has_is_expandable<G, std::void_t<decltype(std::declval<G&>().is_expandable)>> : std::true_type {};

template <class Snap>
int count_expandable_segments(const Snap& snap, int* total) {
    int n = 0;
    *total = static_cast<int>(snap.segments.size());
    for (const auto& seg : snap.segments) {
        if constexpr (has_is_expandable<std::decay_t<decltype(seg)>>::value) {
            if (seg.is_expandable) n++;
        } else {
            return -1;
        }
    }
    return n;
}

namespace cca = c10::cuda::CUDACachingAllocator;

// The bytes PyTorch allows for a memory fraction: DeviceCachingAllocator::setMemoryFraction's
// static_cast<size_t>(fraction * static_cast<double>(device_total)).
uint64_t torch_allowed(double fraction, uint64_t total) {
    return static_cast<uint64_t>(fraction * static_cast<double>(total));
}

// The largest fraction below 1 whose allowed bytes are not above limit (limit < total). limit / total
// is within an ulp or two of it (both are below 2^53, so exact as doubles).
double torch_fraction(uint64_t limit, uint64_t total) {
    double f = static_cast<double>(limit) / static_cast<double>(total);
    for (int i = 0; i < 64 && f > 0.0 && torch_allowed(f, total) > limit; i++) f = std::nextafter(f, 0.0);
    for (int i = 0; i < 64 && torch_allowed(f, total) < limit; i++) {
        double up = std::nextafter(f, 1.0);
        if (up >= 1.0 || torch_allowed(up, total) > limit) break;
        f = up;
    }
    if (torch_allowed(f, total) > limit)
        die("no memory fraction of " + std::to_string(total) + " bytes stays within " + std::to_string(limit));
    return f;
}

struct TorchAlloc {
    std::string limit_note;  // with --limit: the fraction set and what PyTorch allows
    explicit TorchAlloc(uint64_t limit) {
        int n = static_cast<int>(c10::cuda::device_count());
        if (n < 1) die("PyTorch sees no CUDA device");
        cca::init(n);  // what torch's lazy CUDA init does; raw_alloc needs it
        if (limit) set_limit(limit);
    }
    // Before the first allocation. PyTorch's total is cudaMemGetInfo's (older versions) or
    // cudaDeviceProp::totalGlobalMem (newer): the fraction is taken of the larger, so that neither
    // allows more than the limit.
    void set_limit(uint64_t limit) {
        cu_start();  // card 0's primary context: the one PyTorch's runtime calls use
        CUdevice dev;
        cu_check(cuDeviceGet(&dev, 0), "cuDeviceGet");
        size_t prop_total = 0, info_free = 0, info_total = 0;
        cu_check(cuDeviceTotalMem(&prop_total, dev), "cuDeviceTotalMem");
        cu_check(cuMemGetInfo(&info_free, &info_total), "cuMemGetInfo");
        uint64_t total = std::max<uint64_t>(prop_total, info_total);
        double fraction = limit >= total ? 1.0 : torch_fraction(limit, total);
        cca::setMemoryFraction(fraction, 0);
        char f[40];
        std::snprintf(f, sizeof f, "%.17g", fraction);
        limit_note = std::string("setMemoryFraction(") + f + ", 0)";
        if (fraction >= 1.0) {
            limit_note += ": the limit is not below the card's " + std::to_string(total) + " bytes, no cap";
            return;
        }
        uint64_t allowed = torch_allowed(fraction, total);
        limit_note += " of " + std::to_string(total) + " bytes: PyTorch allows " + std::to_string(allowed) +
                      " bytes (" + std::to_string(limit - allowed) + " below the limit)";
        if (prop_total != info_total) {
            uint64_t lo = std::min<uint64_t>(prop_total, info_total);
            limit_note += ", or " + std::to_string(torch_allowed(fraction, lo)) + " if it takes the total as " +
                          std::to_string(lo) + " (cuDeviceTotalMem " + std::to_string(prop_total) +
                          ", cuMemGetInfo " + std::to_string(info_total) + ")";
        }
    }
    // A failure, c10::OutOfMemoryError among them (what raw_alloc throws once PyTorch has freed its
    // cached blocks and retried, under the memory fraction or when the card is full), is a failed
    // allocation: counted, its first line kept.
    void* alloc(uint64_t bytes) {
        try {
            return cca::raw_alloc(static_cast<size_t>(bytes));
        } catch (const std::exception& e) {
            note_error("raw_alloc(" + std::to_string(bytes) + "): " + first_line(e.what()));
            return nullptr;
        }
    }
    void free(void* p) { cca::raw_delete(p); }
    void sync() { c10::cuda::device_synchronize(); }
    uint64_t peak_reserved() {
        auto stats = cca::getDeviceStats(0);
        return static_cast<uint64_t>(stats.reserved_bytes[0].peak);  // [0]: StatType::AGGREGATE
    }
    int64_t driver_calls() { return device_alloc_calls(cca::getDeviceStats(0)); }
    std::string segments_note() {
        int total = 0;
        int expandable = count_expandable_segments(cca::snapshot(), &total);
        if (expandable < 0) return std::to_string(total) + " segments";
        return std::to_string(total) + " segments, " + std::to_string(expandable) + " expandable";
    }
};

#endif  // PEERS_HOST_ONLY

struct HostAlloc {
    uint64_t limit = 0;  // --limit on live bytes, 0: none
    uint64_t live = 0;   // with a limit: bytes live, and the size of every live block
    std::unordered_map<void*, uint64_t> sizes;
    explicit HostAlloc(uint64_t limit_bytes) : limit(limit_bytes) {}
    void* alloc(uint64_t bytes) {
        if (limit && bytes > limit - live) {
            note_error("host(" + std::to_string(bytes) + "): " + std::to_string(live) + " bytes live + " +
                       std::to_string(bytes) + " over the limit of " + std::to_string(limit));
            return nullptr;
        }
        void* p = std::malloc(static_cast<size_t>(bytes ? bytes : 1));
        if (!p) note_error("malloc(" + std::to_string(bytes) + ") failed");
        if (p && limit) {
            sizes.emplace(p, bytes);
            live += bytes;
        }
        return p;
    }
    void free(void* p) {
        if (limit) {
            auto it = sizes.find(p);
            live -= it->second;
            sizes.erase(it);
        }
        std::free(p);
    }
    void sync() {}
};

// ---- the replay --------------------------------------------------------------------------------

struct Result {
    size_t ops = 0;              // calls made in pass 1
    size_t failed_allocs = 0;    // over all passes
    std::vector<double> pass_ns; // wall time of each pass loop
    std::vector<size_t> pass_ops;
};

// One pass over the trace. ptr[slot] is the live pointer of a slot, nullptr when none (not yet
// allocated, freed, or its allocation failed: then its free is skipped).
template <class A>
size_t replay_pass(A& a, const Trace& t, std::vector<void*>& ptr, size_t* failed) {
    size_t ops = 0;
    for (const Event& e : t.events) {
        if (e.alloc) {
            void* p = a.alloc(e.bytes);
            ptr[e.slot] = p;
            if (!p) ++*failed;
            ops++;
        } else if (void* p = ptr[e.slot]) {
            a.free(p);
            ptr[e.slot] = nullptr;
            ops++;
        }
    }
    return ops;
}

template <class A>
void free_live(A& a, std::vector<void*>& ptr) {
    for (void*& p : ptr) {
        if (p) a.free(p);
        p = nullptr;
    }
}

// Replays `passes` times; after_cold(a) runs after pass 1 (synchronised, before its leftovers are
// freed).
template <class A, class F>
Result replay(A& a, const Trace& t, int passes, F after_cold) {
    Result r;
    std::vector<void*> ptr(t.num_slots, nullptr);
    a.sync();
    for (int pass = 0; pass < passes; pass++) {
        auto t0 = std::chrono::steady_clock::now();
        size_t ops = replay_pass(a, t, ptr, &r.failed_allocs);
        auto t1 = std::chrono::steady_clock::now();
        a.sync();
        r.pass_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
        r.pass_ops.push_back(ops);
        if (pass == 0) {
            r.ops = ops;
            after_cold(a);
        }
        free_live(a, ptr);
        a.sync();
    }
    return r;
}

// ---- output ------------------------------------------------------------------------------------

std::string json_string(const std::string& s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') { o += '\\'; o += static_cast<char>(c); }
        else if (c == '\n') o += "\\n";
        else if (c == '\t') o += "\\t";
        else if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); o += b; }
        else o += static_cast<char>(c);
    }
    return o + "\"";
}

std::string json_num(double v, int decimals) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", decimals, v);
    return b;
}

std::string json_int_or_null(int64_t v) { return v < 0 ? "null" : std::to_string(v); }

void print_json(const std::string& allocator, const std::string& trace_path, const Trace& t,
                const Result& r, uint64_t limit, int64_t peak_reserved, int64_t driver_calls,
                int64_t driver_calls_cold, const std::string& note) {
    double cold = r.ops ? r.pass_ns[0] / static_cast<double>(r.ops) : 0.0;
    double warm_ns = 0.0;
    size_t warm_ops = 0;
    for (size_t i = 1; i < r.pass_ns.size(); i++) {
        warm_ns += r.pass_ns[i];
        warm_ops += r.pass_ops[i];
    }
    std::string s = "{\"allocator\": " + json_string(allocator);
    s += ", \"trace\": " + json_string(trace_path);
    size_t ops_total = 0;
    for (size_t n : r.pass_ops) ops_total += n;
    s += ", \"trace_events\": " + std::to_string(t.events.size());
    s += ", \"ops\": " + std::to_string(ops_total);
    s += ", \"ops_cold\": " + std::to_string(r.ops);
    s += ", \"passes\": " + std::to_string(r.pass_ns.size());
    s += ", \"limit_bytes\": " + (limit ? std::to_string(limit) : std::string("null"));
    s += ", \"peak_live_bytes\": " + std::to_string(t.peak_live_bytes);
    s += ", \"peak_reserved_bytes\": " + json_int_or_null(peak_reserved);
    s += ", \"reserved_to_live\": ";
    s += peak_reserved >= 0 && t.peak_live_bytes
             ? json_num(static_cast<double>(peak_reserved) / static_cast<double>(t.peak_live_bytes), 3)
             : "null";
    s += ", \"cold_ns_per_op\": " + json_num(cold, 1);
    s += ", \"warm_ns_per_op\": " + (warm_ops ? json_num(warm_ns / static_cast<double>(warm_ops), 1) : "null");
    s += ", \"driver_calls\": " + json_int_or_null(driver_calls);
    s += ", \"driver_calls_cold\": " + json_int_or_null(driver_calls_cold);
    s += ", \"failed_allocs\": " + std::to_string(r.failed_allocs);
    s += ", \"first_error\": " + (g_first_error.empty() ? std::string("null") : json_string(g_first_error));
    s += ", \"note\": " + (note.empty() ? std::string("null") : json_string(note));
    s += "}\n";
    std::fputs(s.c_str(), stdout);
    std::fflush(stdout);
}

// ---- main --------------------------------------------------------------------------------------

int usage(const char* msg) {
    if (msg) std::fprintf(stderr, "peers: %s\n", msg);
    std::fprintf(stderr,
                 "usage: peers ALLOCATOR TRACE [--passes N] [--limit BYTES]\n"
                 "  ALLOCATOR: cumemalloc | cumemallocasync | torch | torch-expandable | host\n"
                 "  --limit BYTES: cap what the allocator holds (a whole number of bytes, no suffix);\n"
                 "    allocations it refuses are counted as failed\n"
                 "  prints one JSON line: allocator, trace, ops, peak_live_bytes, peak_reserved_bytes,\n"
                 "  reserved_to_live, cold_ns_per_op, warm_ns_per_op, driver_calls, ...\n");
    return 2;
}

#ifndef PEERS_HOST_ONLY
// The device allocators' replays and reports (run's part that needs CUDA and PyTorch).
void run_device(const std::string& allocator, const std::string& trace_path, const Trace& t, int passes,
                uint64_t limit) {
    if (allocator == "cumemalloc") {
        CuMemAlloc a(limit);
        int64_t cold_calls = -1;
        Result r = replay(a, t, passes, [&](CuMemAlloc& x) { cold_calls = static_cast<int64_t>(x.calls); });
        int64_t calls = static_cast<int64_t>(a.calls);
        // Untimed pass: what the driver holds, sampled after every allocation.
        std::vector<void*> ptr(t.num_slots, nullptr);
        size_t failed = 0;
        uint64_t base = cu_used_bytes(), peak = base;
        for (const Event& e : t.events) {
            if (e.alloc) {
                if ((ptr[e.slot] = a.alloc(e.bytes)) == nullptr) failed++;
                peak = std::max(peak, cu_used_bytes());
            } else if (ptr[e.slot]) {
                a.free(ptr[e.slot]);
                ptr[e.slot] = nullptr;
            }
        }
        free_live(a, ptr);
        a.sync();
        std::string note = "peak reserved sampled with cuMemGetInfo (whole device) in an extra untimed pass";
        if (failed) note += "; " + std::to_string(failed) + " allocations failed in that pass";
        if (limit)
            note += "; limit: cuMemGetInfo's used bytes above their value before the replay, checked after "
                    "every allocation (one cuMemGetInfo each, timed)";
        print_json(allocator, trace_path, t, r, limit, static_cast<int64_t>(peak - base), calls, cold_calls, note);
    } else if (allocator == "cumemallocasync") {
        CuMemAllocAsync a(limit);
        Result r = replay(a, t, passes, [](CuMemAllocAsync&) {});
        std::string note = "default mempool, release threshold UINT64_MAX; driver calls not observable";
        if (limit)
            note += "; limit on the pool's reserved bytes: RESERVED_MEM_CURRENT read after every allocation "
                    "(one attribute read each, timed; over the limit: synchronise, trim to 0, and if still over, "
                    "free the block and fail it): " + std::to_string(a.trims) + " trims, " +
                    std::to_string(a.trims_failed) + " of them still over; highest reserved kept " +
                    std::to_string(a.kept_peak) + " bytes (peak_reserved_bytes includes the moments over "
                    "the limit before a trim)";
        print_json(allocator, trace_path, t, r, limit, static_cast<int64_t>(a.peak_reserved()), -1, -1, note);
    } else if (allocator == "torch" || allocator == "torch-expandable") {
        TorchAlloc a(limit);
        int64_t cold_calls = -1;
        Result r = replay(a, t, passes, [&](TorchAlloc& x) { cold_calls = x.driver_calls(); });
        const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
        std::string note = std::string("PYTORCH_CUDA_ALLOC_CONF=") + (conf ? conf : "(unset)") + "; " +
                           a.segments_note() + " held at the end";
        if (limit) note += "; limit: " + a.limit_note;
        print_json(allocator, trace_path, t, r, limit, static_cast<int64_t>(a.peak_reserved()), a.driver_calls(),
                   cold_calls, note);
    }
}
#endif

int run(const std::string& allocator, const std::string& trace_path, int passes, uint64_t limit) {
    static const char* const known[] = {"cumemalloc", "cumemallocasync", "torch", "torch-expandable", "host"};
    if (std::find(std::begin(known), std::end(known), allocator) == std::end(known))
        return usage(("unknown allocator '" + allocator + "'").c_str());
    // The allocator configuration must be in the environment before PyTorch first reads it.
    if (allocator == "torch") {
        unsetenv("PYTORCH_CUDA_ALLOC_CONF");
        unsetenv("PYTORCH_ALLOC_CONF");
    } else if (allocator == "torch-expandable") {
        unsetenv("PYTORCH_ALLOC_CONF");
        setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 1);
    }

    Trace t = load_trace(trace_path);
    std::fprintf(stderr,
                 "peers: %s: %zu allocs, %zu frees, %zu ids, peak live %" PRIu64 " bytes; %s, %d passes%s\n",
                 trace_path.c_str(), t.num_allocs, t.num_frees, t.num_slots, t.peak_live_bytes,
                 allocator.c_str(), passes,
                 limit ? (", limit " + std::to_string(limit) + " bytes").c_str() : "");

    if (allocator != "host") {
#ifdef PEERS_HOST_ONLY
        die(allocator + ": this bench/peers was built without CUDA and PyTorch (host only)");
#else
        run_device(allocator, trace_path, t, passes, limit);
        return 0;
#endif
    }
    HostAlloc a(limit);
    Result r = replay(a, t, passes, [](HostAlloc&) {});
    std::string note = "malloc/free on the host: the replay loop's own cost; no device";
    if (limit) note += "; limit: live bytes counted, live + bytes over the limit fail (a perfect allocator)";
    print_json(allocator, trace_path, t, r, limit, -1, -1, -1, note);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> pos;
    int passes = 3;
    uint64_t limit = 0;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--passes") {
            if (i + 1 >= argc) return usage("--passes needs a number");
            char* end = nullptr;
            long v = std::strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 1000) return usage("--passes: a number from 1 to 1000");
            passes = static_cast<int>(v);
        } else if (a == "--limit") {
            if (i + 1 >= argc) return usage("--limit needs a number of bytes");
            if (!parse_u64(argv[++i], &limit) || limit == 0)
                return usage("--limit: a whole number of bytes above 0, in decimal, no suffix");
        } else if (a == "-h" || a == "--help") {
            usage(nullptr);
            return 0;
        } else if (a.size() > 1 && a[0] == '-') {
            return usage(("unknown option " + a).c_str());
        } else {
            pos.push_back(a);
        }
    }
    if (pos.size() != 2) return usage("expected ALLOCATOR and TRACE");
    try {
        return run(pos[0], pos[1], passes, limit);
    } catch (const std::exception& e) {
        die(first_line(e.what()));
    }
}
