// CUDA backend: RMS_NORM (a block reduction per row), and the element-wise ops MUL, ADD, SWIGLU, GEGLU and
// the head merge, each a grid-stride loop over the output. The arithmetic is the CPU backend's,
// operation for operation (built with --fmad=false: no multiply-add that the source does not spell).
#include "kernels/cuda/elementwise.h"

#include <cmath>

#include "kernels/common/gelu.h"
#include "kernels/common/v_expf.h"

namespace ls::cuda {
namespace {

constexpr int kNormThreads = 256;  // at most; a short row gets fewer (a multiple of 32)
constexpr int kElementThreads = 256;
constexpr int64_t kElementMaxBlocks = 1024;  // grid-stride beyond 262144 threads

// ---- RMS_NORM

// The warp's sum in lane 0.
template <ReductionFault kFault>
__device__ double warp_sum(double v) {
    const int last = kFault == ReductionFault::kShuffleOffByOne ? 1 : 0;
    for (int offset = 16; offset > last; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// The block's sum, returned to every thread. blockDim.x is a multiple of 32.
template <ReductionFault kFault>
__device__ double block_sum(double v) {
    __shared__ double warp_sums[32];
    __shared__ double total;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum<kFault>(v);
    if (lane == 0) warp_sums[warp] = v;
    if constexpr (kFault != ReductionFault::kMissingSyncthreads) __syncthreads();
    if (warp == 0) {
        v = lane < static_cast<int>(blockDim.x / 32) ? warp_sums[lane] : 0.0;
        v = warp_sum<kFault>(v);
        if (lane == 0) total = v;
    }
    __syncthreads();
    return total;
}

template <ReductionFault kFault>
__global__ void __launch_bounds__(kNormThreads) rms_norm_kernel(const float* x, float* y, int64_t n, float eps) {
    const float* xr = x + static_cast<int64_t>(blockIdx.x) * n;
    float* yr = y + static_cast<int64_t>(blockIdx.x) * n;
    double sum = 0.0;  // the f32 squares in double, as the CPU (and ggml) sum them
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += static_cast<double>(xr[i] * xr[i]);
    sum = block_sum<kFault>(sum);
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * scale;
}

template <ReductionFault kFault>
cudaError_t launch_rms_norm(const float* x, float* y, int64_t n, int64_t rows, float eps, cudaStream_t stream) {
    if (n <= 0 || rows < 0 || rows > 0x7fffffff) return cudaErrorInvalidValue;
    if (rows == 0) return cudaSuccess;
    // A warp for a row shorter than one, up to kNormThreads for long rows.
    const int64_t warps = (n + 31) / 32;
    const int threads = warps >= kNormThreads / 32 ? kNormThreads : static_cast<int>(warps) * 32;
    LAUNCH_STREAM(rms_norm_kernel<kFault>, static_cast<unsigned>(rows), threads, 0, stream, x, y, n, eps);
    return cudaGetLastError();
}

// ---- element-wise ops

unsigned element_blocks(int64_t total) {
    const int64_t blocks = (total + kElementThreads - 1) / kElementThreads;
    return static_cast<unsigned>(blocks < kElementMaxBlocks ? blocks : kElementMaxBlocks);
}

__device__ int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__global__ void __launch_bounds__(kElementThreads) mul_row_kernel(const float* x, const float* w, float* y, int64_t n,
                                                                  int64_t total) {
    for (int64_t i = first_index(); i < total; i += grid_stride()) y[i] = x[i] * w[i % n];
}

__global__ void __launch_bounds__(kElementThreads) add_kernel(const float* a, const float* b, float* y, int64_t n,
                                                              int64_t total, bool b_one_row) {
    for (int64_t i = first_index(); i < total; i += grid_stride()) y[i] = a[i] + b[b_one_row ? i % n : i];
}

// ggml_v_expf (256-bit): the same polynomial, 1 added in the final multiply-add with 2^n, large |n|
// scaled in two steps.
__device__ float ggml_v_expf8(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const unsigned e = __float_as_uint(z) << 23;
    const float k = __uint_as_float(e + __float_as_uint(1.0f));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         0x1.ffffecp-1f * b);
    const float an = fabsf(n);
    if (!(an > 126.0f)) return fmaf(j, k, k);
    const unsigned g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = __uint_as_float(g + 0x7f000000u);
    const float s2 = __uint_as_float(e - g);
    if (an > 192.0f) return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

__global__ void __launch_bounds__(kElementThreads) swiglu_kernel(const float* gate, const float* up, float* y, int64_t n,
                                                                 int64_t total, int ggml_lanes) {
    // ggml's vector path covers the full groups of a row; the values after them use expf. Exact
    // mode (ggml_lanes 0) takes the 512-bit ggml_v_expf for every value.
    const int64_t vector_end = ggml_lanes > 0 ? n / ggml_lanes * ggml_lanes : n;
    for (int64_t i = first_index(); i < total; i += grid_stride()) {
        const float g = gate[i];
        float e;
        if (i % n < vector_end) e = ggml_lanes == 8 ? ggml_v_expf8(0.0f - g) : ggml_v_expf16(0.0f - g);
        else e = expf(-g);
        y[i] = g / (1.0f + e) * up[i];
    }
}

__global__ void __launch_bounds__(kElementThreads) geglu_kernel(const float* gate, const float* up, float* y, int64_t total,
                                                                int llama) {
    for (int64_t i = first_index(); i < total; i += grid_stride())
        y[i] = (llama ? gelu_tanh_llama(gate[i]) : gelu_tanh(gate[i])) * up[i];
}

__global__ void __launch_bounds__(kElementThreads) merge_heads_kernel(const float* x, float* y, int64_t head_dim,
                                                                      int64_t T, int64_t n_head, int64_t total) {
    // y index (d, h, t) reads x at (d, t, h).
    for (int64_t i = first_index(); i < total; i += grid_stride()) {
        const int64_t d = i % head_dim, h = (i / head_dim) % n_head, t = i / (head_dim * n_head);
        y[i] = x[(h * T + t) * head_dim + d];
    }
}

}  // namespace

cudaError_t cuda_rms_norm(const float* dev_x, float* dev_y, int64_t n, int64_t rows, float eps, cudaStream_t stream) {
    return launch_rms_norm<ReductionFault::kNone>(dev_x, dev_y, n, rows, eps, stream);
}

cudaError_t cuda_rms_norm_with_fault(const float* dev_x, float* dev_y, int64_t n, int64_t rows, float eps,
                                     ReductionFault fault, cudaStream_t stream) {
    switch (fault) {
        case ReductionFault::kNone: return launch_rms_norm<ReductionFault::kNone>(dev_x, dev_y, n, rows, eps, stream);
        case ReductionFault::kMissingSyncthreads:
            return launch_rms_norm<ReductionFault::kMissingSyncthreads>(dev_x, dev_y, n, rows, eps, stream);
        case ReductionFault::kShuffleOffByOne:
            return launch_rms_norm<ReductionFault::kShuffleOffByOne>(dev_x, dev_y, n, rows, eps, stream);
    }
    return cudaErrorInvalidValue;
}

cudaError_t cuda_mul_row(const float* dev_x, const float* dev_w, float* dev_y, int64_t n, int64_t rows,
                         cudaStream_t stream) {
    if (n <= 0 || rows < 0) return cudaErrorInvalidValue;
    const int64_t total = n * rows;
    if (total == 0) return cudaSuccess;
    LAUNCH_STREAM(mul_row_kernel, element_blocks(total), kElementThreads, 0, stream, dev_x, dev_w, dev_y, n, total);
    return cudaGetLastError();
}

cudaError_t cuda_add(const float* dev_a, const float* dev_b, float* dev_y, int64_t n, int64_t rows, bool b_one_row,
                     cudaStream_t stream) {
    if (n <= 0 || rows < 0) return cudaErrorInvalidValue;
    const int64_t total = n * rows;
    if (total == 0) return cudaSuccess;
    LAUNCH_STREAM(add_kernel, element_blocks(total), kElementThreads, 0, stream, dev_a, dev_b, dev_y, n, total,
                  b_one_row);
    return cudaGetLastError();
}

cudaError_t cuda_swiglu(const float* dev_gate, const float* dev_up, float* dev_y, int64_t n, int64_t rows,
                        int ggml_lanes, cudaStream_t stream) {
    if (n <= 0 || rows < 0 || (ggml_lanes != 0 && ggml_lanes != 8 && ggml_lanes != 16)) return cudaErrorInvalidValue;
    const int64_t total = n * rows;
    if (total == 0) return cudaSuccess;
    LAUNCH_STREAM(swiglu_kernel, element_blocks(total), kElementThreads, 0, stream, dev_gate, dev_up, dev_y, n, total,
                  ggml_lanes);
    return cudaGetLastError();
}

cudaError_t cuda_geglu(const float* dev_gate, const float* dev_up, float* dev_y, int64_t total, bool llama,
                       cudaStream_t stream) {
    if (total < 0 || (total > 0 && (dev_gate == nullptr || dev_up == nullptr || dev_y == nullptr))) return cudaErrorInvalidValue;
    if (total == 0) return cudaSuccess;
    LAUNCH_STREAM(geglu_kernel, element_blocks(total), kElementThreads, 0, stream, dev_gate, dev_up, dev_y, total,
                  llama ? 1 : 0);
    return cudaGetLastError();
}

cudaError_t cuda_merge_heads(const float* dev_x, float* dev_y, int64_t head_dim, int64_t T, int64_t n_head,
                             cudaStream_t stream) {
    if (head_dim <= 0 || T < 0 || n_head <= 0) return cudaErrorInvalidValue;
    const int64_t total = head_dim * T * n_head;
    if (total == 0) return cudaSuccess;
    LAUNCH_STREAM(merge_heads_kernel, element_blocks(total), kElementThreads, 0, stream, dev_x, dev_y, head_dim, T,
                  n_head, total);
    return cudaGetLastError();
}

}  // namespace ls::cuda
