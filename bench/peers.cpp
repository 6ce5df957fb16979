// peers.cpp: replays an allocation trace (traces/README.md) through another GPU allocator, so that
// vram's `vram replay` figures can be set beside them, measured the same way on the same machine.
//
//   peers ALLOCATOR TRACE [--passes N]
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
//   {"allocator", "trace", "trace_events", "ops", "ops_cold", "passes", "peak_live_bytes",
//    "peak_reserved_bytes", "reserved_to_live", "cold_ns_per_op", "warm_ns_per_op", "driver_calls",
//    "driver_calls_cold", "failed_allocs", "first_error", "note"}
// trace_events: the trace's alloc and free events (one pass); ops: the calls made over all passes
// (as `vram replay` counts them; a free whose allocation failed is skipped), ops_cold: in pass 1.
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

#include <cuda.h>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
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
    CuMemAlloc() { cu_start(); }
    void* alloc(uint64_t bytes) {
        calls++;
        CUdeviceptr d = 0;
        CUresult r = cuMemAlloc(&d, static_cast<size_t>(bytes));
        if (r != CUDA_SUCCESS) {
            note_error("cuMemAlloc(" + std::to_string(bytes) + "): " + cu_error(r));
            return nullptr;
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
    CuMemAllocAsync() {
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
        return reinterpret_cast<void*>(d);
    }
    void free(void* p) {
        cu_check(cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(p), stream), "cuMemFreeAsync");
    }
    void sync() { cu_check(cuStreamSynchronize(stream), "cuStreamSynchronize"); }
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

std::string first_line(const char* s) {
    std::string m(s ? s : "");
    size_t nl = m.find('\n');
    return nl == std::string::npos ? m : m.substr(0, nl);
}

struct TorchAlloc {
    TorchAlloc() {
        int n = static_cast<int>(c10::cuda::device_count());
        if (n < 1) die("PyTorch sees no CUDA device");
        cca::init(n);  // what torch's lazy CUDA init does; raw_alloc needs it
    }
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

struct HostAlloc {
    void* alloc(uint64_t bytes) {
        void* p = std::malloc(static_cast<size_t>(bytes ? bytes : 1));
        if (!p) note_error("malloc(" + std::to_string(bytes) + ") failed");
        return p;
    }
    void free(void* p) { std::free(p); }
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
                const Result& r, int64_t peak_reserved, int64_t driver_calls,
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
                 "usage: peers ALLOCATOR TRACE [--passes N]\n"
                 "  ALLOCATOR: cumemalloc | cumemallocasync | torch | torch-expandable | host\n"
                 "  prints one JSON line: allocator, trace, ops, peak_live_bytes, peak_reserved_bytes,\n"
                 "  reserved_to_live, cold_ns_per_op, warm_ns_per_op, driver_calls, ...\n");
    return 2;
}

int run(const std::string& allocator, const std::string& trace_path, int passes) {
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
    std::fprintf(stderr, "peers: %s: %zu allocs, %zu frees, %zu ids, peak live %" PRIu64 " bytes; %s, %d passes\n",
                 trace_path.c_str(), t.num_allocs, t.num_frees, t.num_slots, t.peak_live_bytes,
                 allocator.c_str(), passes);

    if (allocator == "cumemalloc") {
        CuMemAlloc a;
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
        print_json(allocator, trace_path, t, r, static_cast<int64_t>(peak - base), calls, cold_calls, note);
    } else if (allocator == "cumemallocasync") {
        CuMemAllocAsync a;
        Result r = replay(a, t, passes, [](CuMemAllocAsync&) {});
        print_json(allocator, trace_path, t, r, static_cast<int64_t>(a.peak_reserved()), -1, -1,
                   "default mempool, release threshold UINT64_MAX; driver calls not observable");
    } else if (allocator == "torch" || allocator == "torch-expandable") {
        TorchAlloc a;
        int64_t cold_calls = -1;
        Result r = replay(a, t, passes, [&](TorchAlloc& x) { cold_calls = x.driver_calls(); });
        const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
        std::string note = std::string("PYTORCH_CUDA_ALLOC_CONF=") + (conf ? conf : "(unset)") + "; " +
                           a.segments_note() + " held at the end";
        print_json(allocator, trace_path, t, r, static_cast<int64_t>(a.peak_reserved()), a.driver_calls(),
                   cold_calls, note);
    } else if (allocator == "host") {
        HostAlloc a;
        Result r = replay(a, t, passes, [](HostAlloc&) {});
        print_json(allocator, trace_path, t, r, -1, -1, -1,
                   "malloc/free on the host: the replay loop's own cost; no device");
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> pos;
    int passes = 3;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--passes") {
            if (i + 1 >= argc) return usage("--passes needs a number");
            char* end = nullptr;
            long v = std::strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 1000) return usage("--passes: a number from 1 to 1000");
            passes = static_cast<int>(v);
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
        return run(pos[0], pos[1], passes);
    } catch (const std::exception& e) {
        die(first_line(e.what()));
    }
}
