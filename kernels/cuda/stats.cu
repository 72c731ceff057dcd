// CUDA backend: tensor statistics in two launches, each a block reduction (per-thread partials,
// warp shuffles, shared memory across warps): first one partial per block, then one over those.
// Fixed reduction order, no float atomics: the same tensor always gives the same sums.
#include "kernels/cuda/stats.h"

#include <cmath>

namespace ls::cuda {
namespace {

constexpr int kStatsThreads = 256;
constexpr int kStatsMaxBlocks = 1024;  // partials reduced by one block of 1024 threads

__device__ void combine(TensorStats& a, const TensorStats& b) {
    a.min = fminf(a.min, b.min);
    a.max = fmaxf(a.max, b.max);
    a.sum += b.sum;
    a.sumsq += b.sumsq;
    a.nan_count += b.nan_count;
    a.inf_count += b.inf_count;
}

__device__ TensorStats empty_stats() {
    TensorStats s;
    s.min = INFINITY;
    s.max = -INFINITY;
    s.sum = 0.0;
    s.sumsq = 0.0;
    s.nan_count = 0;
    s.inf_count = 0;
    return s;
}

__device__ TensorStats shuffle_down(const TensorStats& s, int offset) {
    TensorStats o;
    o.min = __shfl_down_sync(0xffffffffu, s.min, offset);
    o.max = __shfl_down_sync(0xffffffffu, s.max, offset);
    o.sum = __shfl_down_sync(0xffffffffu, s.sum, offset);
    o.sumsq = __shfl_down_sync(0xffffffffu, s.sumsq, offset);
    o.nan_count = __shfl_down_sync(0xffffffffu, s.nan_count, offset);
    o.inf_count = __shfl_down_sync(0xffffffffu, s.inf_count, offset);
    return o;
}

// The whole block's stats, valid in thread 0. blockDim.x is a multiple of 32.
__device__ TensorStats block_reduce(TensorStats s) {
    __shared__ TensorStats warp_stats[32];
    for (int offset = 16; offset > 0; offset /= 2) combine(s, shuffle_down(s, offset));
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) warp_stats[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < static_cast<int>(blockDim.x / 32) ? warp_stats[lane] : empty_stats();
        for (int offset = 16; offset > 0; offset /= 2) combine(s, shuffle_down(s, offset));
    }
    return s;
}

__global__ void __launch_bounds__(kStatsThreads) stats_partial_kernel(const float* x, int64_t n, TensorStats* partials) {
    TensorStats s = empty_stats();
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = x[i];
        // Exponent bits all ones: NaN or Inf. Bit tests stay right under fast-math flags.
        const unsigned bits = __float_as_uint(v);
        if ((bits & 0x7f800000u) == 0x7f800000u) {
            if (bits & 0x007fffffu) ++s.nan_count;
            else ++s.inf_count;
        } else {
            s.min = fminf(s.min, v);
            s.max = fmaxf(s.max, v);
            s.sum += v;
            s.sumsq += static_cast<double>(v) * v;
        }
    }
    s = block_reduce(s);
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void __launch_bounds__(kStatsMaxBlocks) stats_final_kernel(const TensorStats* partials, int count,
                                                                      TensorStats* out) {
    TensorStats s = threadIdx.x < static_cast<unsigned>(count) ? partials[threadIdx.x] : empty_stats();
    s = block_reduce(s);
    if (threadIdx.x == 0) *out = s;
}

// The bounds and scale from the statistics on the device, as the host derives them from a copy:
// the RMS of the finite values in double, then rounded to float (1 when it is 0). With no finite
// value nothing is counted (every block returns: the statistics are the same for all). Counts per
// block in shared memory, then one atomic add per bin and block.
__global__ void __launch_bounds__(kStatsThreads) histogram_from_stats_kernel(const float* x, int64_t n,
                                                                             const TensorStats* stats,
                                                                             unsigned long long* hist) {
    __shared__ unsigned long long counts[kHistogramBinCount];
    const TensorStats s = *stats;
    const int64_t finite = n - static_cast<int64_t>(s.nan_count) - static_cast<int64_t>(s.inf_count);
    if (finite <= 0) return;
    const float scale = histogram_scale(histogram_rms(s.sumsq, static_cast<double>(finite)));
    for (int b = threadIdx.x; b < kHistogramBinCount; b += blockDim.x) counts[b] = 0;
    __syncthreads();
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = x[i];
        if ((__float_as_uint(v) & 0x7f800000u) == 0x7f800000u) continue;  // NaN or Inf
        atomicAdd(&counts[histogram_bin_of(v, s.min, s.max, scale)], 1ull);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < kHistogramBinCount; b += blockDim.x)
        if (counts[b] != 0) atomicAdd(&hist[b], counts[b]);
}

}  // namespace

cudaError_t cuda_tensor_histogram_from_stats(const float* dev_x, int64_t n, const TensorStats* dev_stats,
                                             unsigned long long* dev_hist, cudaStream_t stream) {
    if (n < 0 || dev_stats == nullptr || dev_hist == nullptr) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    int64_t blocks = (n + kStatsThreads - 1) / kStatsThreads;
    blocks = blocks > kStatsMaxBlocks ? kStatsMaxBlocks : blocks;
    LAUNCH_STREAM(histogram_from_stats_kernel, static_cast<unsigned>(blocks), kStatsThreads, 0, stream, dev_x, n,
                  dev_stats, dev_hist);
    return cudaGetLastError();
}

size_t cuda_tensor_stats_workspace_bytes() { return kStatsMaxBlocks * sizeof(TensorStats); }

cudaError_t cuda_tensor_stats(const float* dev_x, int64_t n, void* dev_workspace, TensorStats* dev_out,
                              cudaStream_t stream) {
    if (n < 0 || dev_workspace == nullptr || dev_out == nullptr) return cudaErrorInvalidValue;
    int64_t blocks = (n + kStatsThreads - 1) / kStatsThreads;
    blocks = blocks < 1 ? 1 : (blocks > kStatsMaxBlocks ? kStatsMaxBlocks : blocks);
    auto* partials = static_cast<TensorStats*>(dev_workspace);
    LAUNCH_STREAM(stats_partial_kernel, static_cast<unsigned>(blocks), kStatsThreads, 0, stream, dev_x, n, partials);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    LAUNCH_STREAM(stats_final_kernel, 1, kStatsMaxBlocks, 0, stream, partials, static_cast<int>(blocks), dev_out);
    return cudaGetLastError();
}

}  // namespace ls::cuda
