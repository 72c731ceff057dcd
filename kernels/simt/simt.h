// The one header a kernel source (.cu) includes: under nvcc it is a thin pass-through to CUDA;
// under a plain C++ compiler it maps the CUDA language onto the CPU SIMT emulator.
#pragma once

#include <atomic>

#include "kernels/common/hd.h"

namespace ls {
// The kernels this module launched through LAUNCH / LAUNCH_STREAM, and the cuBLAS calls and
// memsets counted with count_device_launch(): the CUDA backends' device counters read it. One
// count per module (the loaded CUDA module; the process for the emulator).
inline std::atomic<long long>& device_launches() {
    static std::atomic<long long> n{0};
    return n;
}
inline void count_device_launch() { device_launches().fetch_add(1, std::memory_order_relaxed); }
}  // namespace ls

#if defined(__CUDACC__)

#include <cuda_runtime.h>

// LAUNCH(kernel, grid, block, smem_bytes, args...): a kernel launch on the default stream.
// Template kernels whose arguments contain commas go in parentheses: LAUNCH((k<A, B>), ...).
#define LAUNCH(kernel, grid, block, smem, ...)                \
    do {                                                     \
        ::ls::count_device_launch();                         \
        kernel<<<(grid), (block), (smem)>>>(__VA_ARGS__); \
    } while (0)
#define LAUNCH_STREAM(kernel, grid, block, smem, stream, ...)          \
    do {                                                               \
        ::ls::count_device_launch();                                   \
        kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__); \
    } while (0)

// DYNAMIC_SHARED(T, name): the block's dynamic shared memory seen as T* name. One byte array
// under the hood, because nvcc rejects extern __shared__ arrays of different types in one file.
#define DYNAMIC_SHARED(T, name)                                          \
    extern __shared__ __align__(16) unsigned char ls_dynamic_shared_bytes[]; \
    T* name = reinterpret_cast<T*>(ls_dynamic_shared_bytes)

#define LS_SIMT_EMULATED 0

#else  // the CPU emulator

#define LS_SIMT_EMULATED 1
#include "kernels/simt/simt_emulator.h"

#define LAUNCH(kernel, grid, block, smem, ...)                                                     \
    do {                                                                                          \
        ::ls::count_device_launch();                                                              \
        ::ls::simt::launch(kernel, ::ls::simt::LaunchSite{#kernel, __FILE__, __LINE__}, (grid), \
                           (block), (smem), nullptr, ##__VA_ARGS__);                              \
    } while (0)
#define LAUNCH_STREAM(kernel, grid, block, smem, stream, ...)                                     \
    do {                                                                                          \
        ::ls::count_device_launch();                                                              \
        ::ls::simt::launch(kernel, ::ls::simt::LaunchSite{#kernel, __FILE__, __LINE__}, (grid), \
                           (block), (smem), (stream), ##__VA_ARGS__);                             \
    } while (0)

// Exact size, poisoned at block start and guarded by redzones that are checked at block end.
#define DYNAMIC_SHARED(T, name) \
    T* name = reinterpret_cast<T*>(::ls::simt::dynamic_shared_memory())

#endif
