// The one header a kernel source (.cu) includes: under nvcc it is a thin pass-through to CUDA;
// under a plain C++ compiler it maps the CUDA language onto the CPU SIMT emulator.
#pragma once

#include "kernels/common/hd.h"

#if defined(__CUDACC__)

#include <cuda_runtime.h>

// LAUNCH(kernel, grid, block, smem_bytes, args...): a kernel launch on the default stream.
// Template kernels whose arguments contain commas go in parentheses: LAUNCH((k<A, B>), ...).
#define LAUNCH(kernel, grid, block, smem, ...) kernel<<<(grid), (block), (smem)>>>(__VA_ARGS__)
#define LAUNCH_STREAM(kernel, grid, block, smem, stream, ...) \
    kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)

// DYNAMIC_SHARED(T, name): the block's dynamic shared memory seen as T* name. One byte array
// under the hood, because nvcc rejects extern __shared__ arrays of different types in one file.
#define DYNAMIC_SHARED(T, name)                                          \
    extern __shared__ __align__(16) unsigned char ls_dynamic_shared_bytes[]; \
    T* name = reinterpret_cast<T*>(ls_dynamic_shared_bytes)

#define LS_SIMT_EMULATED 0

#else  // the CPU emulator

#define LS_SIMT_EMULATED 1
#include "kernels/simt/simt_emulator.h"

#define LAUNCH(kernel, grid, block, smem, ...)                                                 \
    ::ls::simt::launch(kernel, ::ls::simt::LaunchSite{#kernel, __FILE__, __LINE__}, (grid), \
                       (block), (smem), nullptr, ##__VA_ARGS__)
#define LAUNCH_STREAM(kernel, grid, block, smem, stream, ...)                                  \
    ::ls::simt::launch(kernel, ::ls::simt::LaunchSite{#kernel, __FILE__, __LINE__}, (grid), \
                       (block), (smem), (stream), ##__VA_ARGS__)

// Exact size, poisoned at block start and guarded by redzones that are checked at block end.
#define DYNAMIC_SHARED(T, name) \
    T* name = reinterpret_cast<T*>(::ls::simt::dynamic_shared_memory())

#endif
