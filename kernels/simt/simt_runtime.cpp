// The emulator's stand-in for the CUDA runtime: one emulated device whose memory is host memory,
// launch checks, synchronous streams and per-host-thread errors with messages.
#include "kernels/simt/simt_internal.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

namespace ls::simt {
namespace {

constexpr size_t kDefaultSharedLimit = 48 * 1024;
constexpr size_t kOptInSharedLimit = 227 * 1024;  // sm_90; sm_80 allows 163 KiB
constexpr unsigned char kDeviceMemoryPoison = 0xff;  // uninitialised floats read as NaN

std::atomic<Schedule> g_schedule{Schedule::Forward};
std::atomic<uint64_t> g_seed{1};

std::atomic<uint64_t> g_launches{0}, g_blocks{0}, g_threads{0}, g_barriers{0}, g_collectives{0};

// Errors belong to the host thread that made the call, as with cudart.
thread_local cudaError_t t_last_error = cudaSuccess;
thread_local std::string t_last_message;
// A failed kernel, also returned by the next synchronisation as on a GPU (until read by
// cudaGetLastError; unlike a GPU, the emulated device stays usable afterwards).
thread_local cudaError_t t_pending_launch_error = cudaSuccess;

cudaError_t fail(cudaError_t code, const std::string& message) {
    t_last_error = code;
    t_last_message = message;
    std::fprintf(stderr, "layerscope simt: %s\n", message.c_str());
    return code;
}

// Device allocations by start address, to tell device pointers from host pointers.
struct DeviceMemory {
    std::mutex mutex;
    std::map<uintptr_t, size_t> allocations;
    size_t used = 0;  // bytes allocated, rounded as allocated
    std::map<const void*, int> max_dynamic_shared;  // per kernel, from cudaFuncSetAttribute
};
DeviceMemory& device_memory() {
    static DeviceMemory memory;
    return memory;
}

// The emulated device's memory size: LAYERSCOPE_SIMT_DEVICE_MEMORY (bytes, or with a K, M or G
// suffix) so that out-of-memory paths can be tested; 0 (the default, or an unreadable value):
// the host's memory, as much as it gives.
size_t device_memory_limit() {
    const char* v = std::getenv("LAYERSCOPE_SIMT_DEVICE_MEMORY");
    if (!v || !*v) return 0;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v, &end, 10);
    const std::string suffix = end ? end : "";
    const unsigned long long scale = suffix == "K" ? 1ull << 10 : suffix == "M" ? 1ull << 20 : suffix == "G" ? 1ull << 30 : 1;
    if (!suffix.empty() && scale == 1) return 0;
    return static_cast<size_t>(n * scale);
}

// Bytes from p to the end of its device allocation, or -1 when p is not device memory.
int64_t device_bytes_after(const void* p) {
    auto& dm = device_memory();
    std::lock_guard lock(dm.mutex);
    const auto address = reinterpret_cast<uintptr_t>(p);
    auto it = dm.allocations.upper_bound(address);
    if (it == dm.allocations.begin()) return -1;
    --it;
    if (address >= it->first + it->second) return -1;  // the end is where the next allocation may start
    return static_cast<int64_t>(it->first + it->second - address);
}

// Checks that [p, p + bytes) is wholly device memory (want_device) or wholly not.
bool check_side(const void* p, size_t bytes, bool want_device, const char* role, const char* call) {
    const int64_t after = device_bytes_after(p);
    if (want_device && after < 0)
        return fail(cudaErrorInvalidValue, std::string(call) + ": the " + role +
                                               " is not device memory\nHINT: check the copy direction and that "
                                               "the pointer came from cudaMalloc") == cudaSuccess;
    if (want_device && static_cast<uint64_t>(after) < bytes)
        return fail(cudaErrorInvalidValue, std::string(call) + ": " + std::to_string(bytes) + " bytes run past the end of the " +
                                               role + "'s device allocation (" + std::to_string(after) +
                                               " bytes left)\nHINT: check the byte count") == cudaSuccess;
    if (!want_device && after >= 0)
        return fail(cudaErrorInvalidValue, std::string(call) + ": the " + role +
                                               " is device memory but the copy kind says host\nHINT: check the "
                                               "cudaMemcpyKind argument") == cudaSuccess;
    return true;
}

}  // namespace

const char* schedule_name(Schedule schedule) {
    switch (schedule) {
        case Schedule::Forward: return "forward";
        case Schedule::Reverse: return "reverse";
        case Schedule::Random: return "random";
    }
    return "?";
}

void set_schedule(Schedule schedule, uint64_t seed) {
    g_schedule = schedule;
    g_seed = seed;
}
Schedule current_schedule() { return g_schedule; }
void set_worker_count(int workers) { detail::set_worker_threads(workers); }

std::string last_error_message() { return t_last_message; }

Counters counters() {
    return Counters{g_launches.load(), g_blocks.load(), g_threads.load(), g_barriers.load(), g_collectives.load()};
}
void reset_counters() {
    g_launches = g_blocks = g_threads = g_barriers = g_collectives = 0;
}

namespace detail {

void add_block_counts(uint64_t threads, uint64_t barrier_releases, uint64_t warp_collectives) {
    g_blocks.fetch_add(1, std::memory_order_relaxed);
    g_threads.fetch_add(threads, std::memory_order_relaxed);
    g_barriers.fetch_add(barrier_releases, std::memory_order_relaxed);
    g_collectives.fetch_add(warp_collectives, std::memory_order_relaxed);
}

bool is_device_pointer(const void* p) { return device_bytes_after(p) >= 0; }
int64_t device_bytes_from(const void* p) { return device_bytes_after(p); }

void record_launch_error(cudaError_t code, const std::string& message) { fail(code, message); }

cudaError_t run_grid(const GridLaunch& launch) {
    const std::string where = std::string("kernel ") + launch.site.kernel + " (" + launch.site.file + ":" +
                              std::to_string(launch.site.line) + ")";
    const dim3 g = launch.grid, b = launch.block;
    const uint64_t threads = static_cast<uint64_t>(b.x) * b.y * b.z;
    if (g.x == 0 || g.y == 0 || g.z == 0 || threads == 0)
        return fail(cudaErrorInvalidConfiguration, where + ": empty grid or block\nHINT: skip the launch when there is no work");
    if (threads > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64)
        return fail(cudaErrorInvalidConfiguration,
                    where + ": block (" + std::to_string(b.x) + "," + std::to_string(b.y) + "," + std::to_string(b.z) +
                        ") has " + std::to_string(threads) + " threads; the limit is 1024 (z at most 64)" +
                        "\nHINT: use more blocks with fewer threads each");
    if (g.y > 65535 || g.z > 65535 || g.x > 0x7fffffffu)
        return fail(cudaErrorInvalidConfiguration, where + ": grid too large (y and z at most 65535)" +
                                                       std::string("\nHINT: put the long dimension in x"));
    size_t smem_limit = kDefaultSharedLimit;
    {
        auto& dm = device_memory();
        std::lock_guard lock(dm.mutex);
        auto it = dm.max_dynamic_shared.find(launch.kernel_id);
        if (it != dm.max_dynamic_shared.end()) smem_limit = std::max(smem_limit, static_cast<size_t>(it->second));
    }
    if (launch.dynamic_shared_bytes > smem_limit)
        return fail(cudaErrorInvalidValue,
                    where + ": " + std::to_string(launch.dynamic_shared_bytes) + " bytes of dynamic shared memory, " +
                        "more than the " + std::to_string(smem_limit) + " allowed" +
                        "\nHINT: above 48 KiB call cudaFuncSetAttribute(kernel, "
                        "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) first");
    g_launches.fetch_add(1, std::memory_order_relaxed);
    const Schedule schedule = g_schedule;
    const std::string error = run_blocks(launch, schedule, g_seed);
    if (!error.empty()) {
        t_pending_launch_error = cudaErrorLaunchFailure;
        return fail(cudaErrorLaunchFailure, where + " under the " + schedule_name(schedule) + " schedule, " + error);
    }
    return cudaSuccess;
}

}  // namespace detail
}  // namespace ls::simt

using ls::simt::fail;

extern "C" float __expf(float x) noexcept { return std::exp(x); }
extern "C" float __logf(float x) noexcept { return std::log(x); }

struct CUstream_st {
    unsigned int flags;
};

extern "C" {

cudaError_t cudaGetLastError(void) {
    const cudaError_t error = ls::simt::t_last_error;
    ls::simt::t_last_error = cudaSuccess;
    ls::simt::t_pending_launch_error = cudaSuccess;
    ls::simt::t_last_message.clear();
    return error;
}

cudaError_t cudaPeekAtLastError(void) { return ls::simt::t_last_error; }

const char* cudaGetErrorName(cudaError_t error) {
    switch (error) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
        case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
        case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
        default: return "cudaErrorUnknown";
    }
}

const char* cudaGetErrorString(cudaError_t error) {
    switch (error) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        case cudaErrorInvalidDevice: return "invalid device ordinal";
        case cudaErrorInvalidResourceHandle: return "invalid resource handle";
        case cudaErrorLaunchFailure: return "unspecified launch failure";
        default: return "unknown error";
    }
}

cudaError_t cudaGetDeviceCount(int* count) {
    if (!count) return fail(cudaErrorInvalidValue, "cudaGetDeviceCount: null count");
    *count = 1;
    return cudaSuccess;
}

// Free and total bytes of the emulated device; both 0 without LAYERSCOPE_SIMT_DEVICE_MEMORY (the
// host's memory is the limit then).
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
    if (!free || !total) return fail(cudaErrorInvalidValue, "cudaMemGetInfo: null result pointer");
    auto& dm = ls::simt::device_memory();
    std::lock_guard lock(dm.mutex);
    const size_t limit = ls::simt::device_memory_limit();
    *total = limit;
    *free = limit > dm.used ? limit - dm.used : 0;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice, "cudaSetDevice: the emulator has device 0 only");
}

cudaError_t cudaGetDevice(int* device) {
    if (!device) return fail(cudaErrorInvalidValue, "cudaGetDevice: null device");
    *device = 0;
    return cudaSuccess;
}

// Launches already ran to completion; a failed one is reported here too, as on a GPU.
cudaError_t cudaDeviceSynchronize(void) { return ls::simt::t_pending_launch_error; }

cudaError_t cudaMalloc(void** devPtr, size_t size) {
    if (!devPtr) return fail(cudaErrorInvalidValue, "cudaMalloc: null result pointer");
    *devPtr = nullptr;
    if (size == 0) return cudaSuccess;
    const size_t rounded = (size + 255) / 256 * 256;
    auto& dm = ls::simt::device_memory();
    std::lock_guard lock(dm.mutex);
    const size_t limit = ls::simt::device_memory_limit();
    if (limit && (rounded > limit || dm.used > limit - rounded))
        return fail(cudaErrorMemoryAllocation, "cudaMalloc: out of memory for " + std::to_string(size) + " bytes (the emulated device has " +
                                                   std::to_string(limit) + " bytes, " + std::to_string(dm.used) + " in use)");
    void* p = std::aligned_alloc(256, rounded);
    if (!p) return fail(cudaErrorMemoryAllocation, "cudaMalloc: out of memory for " + std::to_string(size) + " bytes");
    std::memset(p, ls::simt::kDeviceMemoryPoison, rounded);
    dm.used += rounded;
    dm.allocations[reinterpret_cast<uintptr_t>(p)] = size;
    *devPtr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void* devPtr) {
    if (!devPtr) return cudaSuccess;
    auto& dm = ls::simt::device_memory();
    {
        std::lock_guard lock(dm.mutex);
        auto it = dm.allocations.find(reinterpret_cast<uintptr_t>(devPtr));
        if (it != dm.allocations.end()) {
            dm.used -= (it->second + 255) / 256 * 256;
            dm.allocations.erase(it);
            std::free(devPtr);
            return cudaSuccess;
        }
    }
    return fail(cudaErrorInvalidValue, "cudaFree: pointer is not the start of a live device allocation\n"
                                       "HINT: double free, or a host pointer");
}

// Page-locked host memory: host memory like any other here.
cudaError_t cudaMallocHost(void** ptr, size_t size) {
    if (!ptr) return fail(cudaErrorInvalidValue, "cudaMallocHost: null result pointer");
    *ptr = std::malloc(std::max<size_t>(size, 1));
    if (*ptr) return cudaSuccess;
    return fail(cudaErrorMemoryAllocation, "cudaMallocHost: out of memory for " + std::to_string(size) + " bytes");
}

cudaError_t cudaFreeHost(void* ptr) {
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
    if (count == 0) return cudaSuccess;
    const char* call = "cudaMemcpy";
    bool ok = true;
    switch (kind) {
        case cudaMemcpyHostToHost:
            ok = ls::simt::check_side(dst, count, false, "destination", call) &&
                 ls::simt::check_side(src, count, false, "source", call);
            break;
        case cudaMemcpyHostToDevice:
            ok = ls::simt::check_side(dst, count, true, "destination", call) &&
                 ls::simt::check_side(src, count, false, "source", call);
            break;
        case cudaMemcpyDeviceToHost:
            ok = ls::simt::check_side(dst, count, false, "destination", call) &&
                 ls::simt::check_side(src, count, true, "source", call);
            break;
        case cudaMemcpyDeviceToDevice:
            ok = ls::simt::check_side(dst, count, true, "destination", call) &&
                 ls::simt::check_side(src, count, true, "source", call);
            break;
        case cudaMemcpyDefault:
            if (ls::simt::detail::is_device_pointer(dst)) ok = ls::simt::check_side(dst, count, true, "destination", call);
            if (ok && ls::simt::detail::is_device_pointer(src)) ok = ls::simt::check_side(src, count, true, "source", call);
            break;
        default:
            return fail(cudaErrorInvalidMemcpyDirection, "cudaMemcpy: unknown cudaMemcpyKind");
    }
    if (!ok) return cudaErrorInvalidValue;
    std::memmove(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy(dst, src, count, kind);
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
    if (count == 0) return cudaSuccess;
    if (!ls::simt::check_side(devPtr, count, true, "destination", "cudaMemset")) return cudaErrorInvalidValue;
    std::memset(devPtr, value, count);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t) {
    return cudaMemset(devPtr, value, count);
}

cudaError_t cudaStreamCreate(cudaStream_t* pStream) { return cudaStreamCreateWithFlags(pStream, 0); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
    if (!pStream) return fail(cudaErrorInvalidValue, "cudaStreamCreate: null result pointer");
    *pStream = new CUstream_st{flags};
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    if (!stream) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: the default stream cannot be destroyed");
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return ls::simt::t_pending_launch_error; }

cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
    if (value < 0 || static_cast<size_t>(value) > ls::simt::kOptInSharedLimit)
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: " + std::to_string(value) +
                                               " bytes of dynamic shared memory exceed the device's 227 KiB");
    auto& dm = ls::simt::device_memory();
    std::lock_guard lock(dm.mutex);
    dm.max_dynamic_shared[func] = value;
    return cudaSuccess;
}

}  // extern "C"
