// The CUDA language on the CPU: thread indices, __syncthreads, warp collectives, atomics and
// kernel launches for .cu files compiled as C++. Included through simt/simt.h only.
#pragma once

// Execution-space qualifiers mean nothing on the CPU; defining them first keeps the real CUDA
// headers from turning them into unknown attributes.
#define __host__
#define __device__
#define __global__
#define __constant__
#define __managed__
// A block runs to completion on one OS thread, so a thread-local is exactly one block's copy.
// It keeps the previous block's values (not poisoned) and is not counted against 48 KiB.
#define __shared__ static thread_local
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

#if defined(LS_SIMT_HAVE_CUDA_HEADERS)
// The real runtime header compiles host-only; our stand-in functions are then checked against its
// declarations by the compiler.
#include <cuda_runtime.h>
#else
#include "kernels/simt/simt_cudart_fallback.h"
#endif

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>

namespace ls::simt {

// Where a kernel called a barrier or a warp collective. g++ 12 has std::source_location; clang 14
// (the fuzz build) lacks the builtin behind it, but has the older builtins this stand-in uses.
#if defined(__cpp_lib_source_location)
using SourceLocation = std::source_location;
#else
class SourceLocation {
public:
    static constexpr SourceLocation current(const char* file = __builtin_FILE(), const char* function = __builtin_FUNCTION(),
                                            unsigned line = __builtin_LINE(), unsigned column = __builtin_COLUMN()) noexcept {
        SourceLocation where;
        where.file_ = file, where.function_ = function, where.line_ = line, where.column_ = column;
        return where;
    }
    constexpr const char* file_name() const noexcept { return file_; }
    constexpr const char* function_name() const noexcept { return function_; }
    constexpr unsigned line() const noexcept { return line_; }
    constexpr unsigned column() const noexcept { return column_; }

private:
    const char* file_ = "";
    const char* function_ = "";
    unsigned line_ = 0, column_ = 0;
};
#endif

// The order in which the runnable threads of a block run between two synchronisation points.
// Races show only under some orders: run every test under at least Forward and Random.
enum class Schedule { Forward, Reverse, Random };
const char* schedule_name(Schedule schedule);

void set_schedule(Schedule schedule, uint64_t seed = 1);
Schedule current_schedule();
// OS threads that run blocks (default: hardware concurrency).
void set_worker_count(int workers);

// Why the last failed launch or runtime call on this host thread failed (with a HINT line),
// or "" when none did. Cleared by cudaGetLastError like the error code itself.
std::string last_error_message();

// Counters since the last reset, for measuring emulation speed.
struct Counters {
    uint64_t launches = 0;
    uint64_t blocks = 0;
    uint64_t threads = 0;
    uint64_t barrier_releases = 0;
    uint64_t warp_collectives = 0;
};
Counters counters();
void reset_counters();

struct LaunchSite {
    const char* kernel;
    const char* file;
    int line;
};

namespace detail {

// What a kernel sees of the thread that runs it.
struct ThreadContext {
    uint3 thread_idx;
    uint3 block_idx;
    dim3 block_dim;
    dim3 grid_dim;
    unsigned char* dynamic_shared;  // this block's dynamic shared memory
};

// The CUDA thread running on this OS thread right now (nullptr outside kernels).
inline thread_local ThreadContext* t_current = nullptr;

enum class WarpOp : uint8_t { Shfl, ShflUp, ShflDown, ShflXor, Ballot, All, Any, ReduceAdd, SyncWarp };

void block_barrier(const SourceLocation& where);
uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width,
                         const SourceLocation& where);
unsigned active_mask();
[[noreturn]] void kernel_trap(const char* why, const SourceLocation& where);

bool is_device_pointer(const void* p);
void record_launch_error(cudaError_t code, const std::string& message);

struct GridLaunch {
    LaunchSite site;
    const void* kernel_id;
    dim3 grid;
    dim3 block;
    size_t dynamic_shared_bytes;
    void (*run_thread)(const void* closure);  // runs the kernel body for t_current
    const void* closure;
};
// Runs every block of the grid; returns the error, also recorded as the last error.
cudaError_t run_grid(const GridLaunch& launch);

template <class T>
uint64_t to_bits(T value) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "warp collectives move up to 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    return bits;
}
template <class T>
T from_bits(uint64_t bits) {
    T value;
    std::memcpy(&value, &bits, sizeof(T));
    return value;
}

template <class T>
void check_kernel_param(const T& param, int index, std::string& problems) {
    if constexpr (std::is_pointer_v<T>) {
        if (param != nullptr && !is_device_pointer(param))
            problems += "argument " + std::to_string(index) + " is not a device pointer (host memory?); ";
    }
}

}  // namespace detail

inline unsigned char* dynamic_shared_memory() { return detail::t_current->dynamic_shared; }

// Runs kernel over the grid on the CPU. Launches are synchronous; errors surface as on a GPU,
// through cudaGetLastError / cudaDeviceSynchronize (cudaErrorLaunchFailure for a faulty kernel).
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), LaunchSite site, dim3 grid, dim3 block, size_t smem_bytes,
            cudaStream_t stream, Args&&... args) {
    static_assert(sizeof...(Params) == sizeof...(Args), "kernel launched with the wrong number of arguments");
    (void)stream;  // launches run to completion, so every stream is already synchronised
    // Converted once, like CUDA's parameter buffer; each thread gets its own by-value copies.
    using ParamTuple = std::tuple<std::decay_t<Params>...>;
    ParamTuple params(std::forward<Args>(args)...);
    std::string problems;
    int index = 0;
    std::apply([&](const auto&... p) { (detail::check_kernel_param(p, index++, problems), ...); }, params);
    if (!problems.empty()) {
        detail::record_launch_error(cudaErrorInvalidValue,
                                    std::string("kernel ") + site.kernel + " (" + site.file + ":" +
                                        std::to_string(site.line) + "): " + problems +
                                        "\nHINT: pass memory from cudaMalloc, copied with cudaMemcpy");
        return;
    }
    struct Closure {
        void (*kernel)(Params...);
        ParamTuple* params;
    } closure{kernel, &params};
    detail::GridLaunch grid_launch{site,  reinterpret_cast<const void*>(kernel), grid, block, smem_bytes,
                                   [](const void* c) {
                                       const auto* cl = static_cast<const Closure*>(c);
                                       std::apply(cl->kernel, *cl->params);
                                   },
                                   &closure};
    detail::run_grid(grid_launch);
}

}  // namespace ls::simt

// ---- built-in variables ------------------------------------------------------------------------
#define threadIdx (static_cast<const uint3&>(::ls::simt::detail::t_current->thread_idx))
#define blockIdx (static_cast<const uint3&>(::ls::simt::detail::t_current->block_idx))
#define blockDim (static_cast<const dim3&>(::ls::simt::detail::t_current->block_dim))
#define gridDim (static_cast<const dim3&>(::ls::simt::detail::t_current->grid_dim))
inline constexpr int warpSize = 32;

// ---- synchronisation ---------------------------------------------------------------------------
inline void __syncthreads(ls::simt::SourceLocation where = ls::simt::SourceLocation::current()) {
    ::ls::simt::detail::block_barrier(where);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, ls::simt::SourceLocation where = ls::simt::SourceLocation::current()) {
    ::ls::simt::detail::warp_collective(::ls::simt::detail::WarpOp::SyncWarp, mask, 0, 0, 32, where);
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned __activemask() { return ::ls::simt::detail::active_mask(); }
[[noreturn]] inline void __trap(ls::simt::SourceLocation where = ls::simt::SourceLocation::current()) {
    ::ls::simt::detail::kernel_trap("__trap()\nHINT: the kernel stopped itself; check the condition guarding the __trap", where);
}

// ---- warp collectives (complete when every lane named in the mask has arrived) -----------------
template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              ls::simt::SourceLocation where = ls::simt::SourceLocation::current()) {
    using namespace ::ls::simt::detail;
    return from_bits<T>(warp_collective(WarpOp::Shfl, mask, to_bits(var), src_lane, width, where));
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 ls::simt::SourceLocation where = ls::simt::SourceLocation::current()) {
    using namespace ::ls::simt::detail;
    return from_bits<T>(warp_collective(WarpOp::ShflUp, mask, to_bits(var), static_cast<int>(delta), width, where));
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   ls::simt::SourceLocation where = ls::simt::SourceLocation::current()) {
    using namespace ::ls::simt::detail;
    return from_bits<T>(warp_collective(WarpOp::ShflDown, mask, to_bits(var), static_cast<int>(delta), width, where));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  ls::simt::SourceLocation where = ls::simt::SourceLocation::current()) {
    using namespace ::ls::simt::detail;
    return from_bits<T>(warp_collective(WarpOp::ShflXor, mask, to_bits(var), lane_mask, width, where));
}
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              ls::simt::SourceLocation where = ls::simt::SourceLocation::current()) {
    using namespace ::ls::simt::detail;
    return static_cast<unsigned>(warp_collective(WarpOp::Ballot, mask, predicate != 0, 0, 32, where));
}
inline int __all_sync(unsigned mask, int predicate, ls::simt::SourceLocation where = ls::simt::SourceLocation::current()) {
    using namespace ::ls::simt::detail;
    return static_cast<int>(warp_collective(WarpOp::All, mask, predicate != 0, 0, 32, where));
}
inline int __any_sync(unsigned mask, int predicate, ls::simt::SourceLocation where = ls::simt::SourceLocation::current()) {
    using namespace ::ls::simt::detail;
    return static_cast<int>(warp_collective(WarpOp::Any, mask, predicate != 0, 0, 32, where));
}
inline unsigned __reduce_add_sync(unsigned mask, unsigned value,
                                  ls::simt::SourceLocation where = ls::simt::SourceLocation::current()) {
    using namespace ::ls::simt::detail;
    return static_cast<unsigned>(warp_collective(WarpOp::ReduceAdd, mask, value, 0, 32, where));
}
inline int __reduce_add_sync(unsigned mask, int value, ls::simt::SourceLocation where = ls::simt::SourceLocation::current()) {
    return static_cast<int>(__reduce_add_sync(mask, static_cast<unsigned>(value), where));
}

// ---- atomics: real atomics, since blocks run on several OS threads ------------------------------
template <class T>
T ls_simt_atomic_fetch_update(T* address, T value, T (*update)(T, T)) {
    std::atomic_ref<T> ref(*address);
    T old = ref.load(std::memory_order_relaxed);
    while (!ref.compare_exchange_weak(old, update(old, value), std::memory_order_seq_cst)) {
    }
    return old;
}
template <class T>
T atomicAdd(T* address, T value) {
    return std::atomic_ref<T>(*address).fetch_add(value, std::memory_order_seq_cst);
}
template <class T>
T atomicSub(T* address, T value) {
    return std::atomic_ref<T>(*address).fetch_sub(value, std::memory_order_seq_cst);
}
template <class T>
T atomicExch(T* address, T value) {
    return std::atomic_ref<T>(*address).exchange(value, std::memory_order_seq_cst);
}
template <class T>
T atomicMin(T* address, T value) {
    return ls_simt_atomic_fetch_update<T>(address, value, [](T a, T b) { return b < a ? b : a; });
}
template <class T>
T atomicMax(T* address, T value) {
    return ls_simt_atomic_fetch_update<T>(address, value, [](T a, T b) { return a < b ? b : a; });
}
template <class T>
T atomicAnd(T* address, T value) {
    return std::atomic_ref<T>(*address).fetch_and(value, std::memory_order_seq_cst);
}
template <class T>
T atomicOr(T* address, T value) {
    return std::atomic_ref<T>(*address).fetch_or(value, std::memory_order_seq_cst);
}
template <class T>
T atomicXor(T* address, T value) {
    return std::atomic_ref<T>(*address).fetch_xor(value, std::memory_order_seq_cst);
}
template <class T>
T atomicCAS(T* address, T compare, T value) {
    std::atomic_ref<T>(*address).compare_exchange_strong(compare, value, std::memory_order_seq_cst);
    return compare;  // holds the old value whether or not the exchange happened
}

// ---- intrinsics whose device versions have no host counterpart ---------------------------------
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float __int_as_float(int x) { return ::ls::simt::detail::from_bits<float>(static_cast<uint32_t>(x)); }
inline int __float_as_int(float x) { return static_cast<int>(::ls::simt::detail::to_bits(x)); }
inline float __uint_as_float(unsigned x) { return ::ls::simt::detail::from_bits<float>(x); }
inline unsigned __float_as_uint(float x) { return static_cast<unsigned>(::ls::simt::detail::to_bits(x)); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
// glibc declares these but does not export them; simt_runtime.cpp defines them.
extern "C" float __expf(float x) noexcept;
extern "C" float __logf(float x) noexcept;

// cuda_runtime.h offers this overload only to nvcc.
template <class T>
cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value) {
    return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attr, value);
}
