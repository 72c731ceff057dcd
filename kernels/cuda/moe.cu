// CUDA backend: the ops around the mixture-of-experts router. The element-wise ops are grid-stride
// loops over the output with kernels/host_ops.cpp's arithmetic, operation for operation (built with
// --fmad=false); SUM_ROWS sums in double like the host, a warp per row; ARGSORT finds each column's
// rank in its row, which makes the order stable by construction.
#include "kernels/cuda/moe.h"

#include <cmath>

#include "kernels/common/v_expf.h"

namespace ls::cuda {
namespace {

constexpr int kElementThreads = 256;
constexpr int64_t kElementMaxBlocks = 1024;  // grid-stride beyond 262144 threads
constexpr int kSumThreads = 128;
constexpr int kSumRowsPerBlock = kSumThreads / 32;  // a warp per row
constexpr int kSortMaxThreads = 256;

unsigned element_blocks(int64_t total) {
    const int64_t blocks = (total + kElementThreads - 1) / kElementThreads;
    return static_cast<unsigned>(blocks < kElementMaxBlocks ? blocks : kElementMaxBlocks);
}

__device__ int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

struct Shape4 {
    int64_t ne[4];
};

__global__ void __launch_bounds__(kElementThreads) binary_kernel(Op op, const float* a, Shape4 an, const float* b,
                                                                 Shape4 bn, float* y, int64_t total) {
    for (int64_t i = first_index(); i < total; i += grid_stride()) {
        const int64_t i0 = i % an.ne[0], i1 = (i / an.ne[0]) % an.ne[1], i2 = (i / (an.ne[0] * an.ne[1])) % an.ne[2],
                      i3 = i / (an.ne[0] * an.ne[1] * an.ne[2]);
        const int64_t j = (((i3 % bn.ne[3]) * bn.ne[2] + i2 % bn.ne[2]) * bn.ne[1] + i1 % bn.ne[1]) * bn.ne[0] + i0 % bn.ne[0];
        const float u = a[i], v = b[j];
        y[i] = op == Op::kAdd ? u + v : op == Op::kMul ? u * v : u / v;
    }
}

__global__ void __launch_bounds__(kElementThreads) unary_kernel(Op op, const float* x, float* y, int64_t n, float p0,
                                                                float p1) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        const float v = x[i];
        if (op == Op::kSigmoid) {
            y[i] = 1.0f / (1.0f + expf(-v));
        } else if (op == Op::kScale) {
            y[i] = v * p0;
        } else if (op == Op::kTanh) {
            y[i] = tanhf(v);
        } else if (op == Op::kSoftplus) {
            y[i] = v > 20.0f ? v : logf(1.0f + expf(v));
        } else {
            const float lo = p1 < v ? p1 : v;  // std::max(std::min(v, p1), p0), NaN passing through
            y[i] = lo < p0 ? p0 : lo;
        }
    }
}

__global__ void __launch_bounds__(kElementThreads) swiglu_oai_kernel(const float* gate, const float* up, float* y,
                                                                     int64_t n, float alpha, float limit, int llama) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        const float g = gate[i], v = up[i];
        const float x = limit < g ? limit : g;                           // std::min(g, limit)
        const float u = v < -limit ? -limit : (limit < v ? limit : v);  // std::clamp(v, -limit, limit)
        const float e = llama ? expf(alpha * (-x)) : ggml_v_expf16(alpha * (-x));
        y[i] = x / (1.0f + e) * (u + 1.0f);
    }
}

__global__ void __launch_bounds__(kElementThreads) add_id_kernel(const float* a, int64_t n, int64_t total,
                                                                 const float* table, int64_t n_rows, const int32_t* ids,
                                                                 float* y) {
    for (int64_t i = first_index(); i < total; i += grid_stride()) {
        const int32_t id = ids[i / n];
        y[i] = id >= 0 && id < n_rows ? a[i] + table[id * n + i % n] : a[i];
    }
}

__global__ void __launch_bounds__(kSumThreads) sum_rows_kernel(const float* x, float* y, int64_t n, int64_t rows) {
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kSumRowsPerBlock + threadIdx.x / 32;
    double sum = 0.0;
    if (r < rows)
        for (int64_t i = lane; i < n; i += 32) sum += static_cast<double>(x[r * n + i]);
    // Every lane takes part in the shuffles, those of a row past the last too.
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0 && r < rows) y[r] = static_cast<float>(sum);
}

// Whether column j (value w) comes before column i (value v) in the descending order: a larger
// value first, NaN after every number, equal values (and NaNs) in column order.
__device__ bool comes_before(float w, int64_t j, float v, int64_t i) {
    const bool w_nan = w != w, v_nan = v != v;
    if (w_nan != v_nan) return v_nan;
    if (!w_nan && w != v) return w > v;
    return j < i;
}

__global__ void __launch_bounds__(kSortMaxThreads) argsort_desc_kernel(const float* x, int32_t* idx, int64_t n) {
    const float* row = x + static_cast<int64_t>(blockIdx.x) * n;
    int32_t* out = idx + static_cast<int64_t>(blockIdx.x) * n;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = row[i];
        int64_t rank = 0;
        for (int64_t j = 0; j < n; ++j) rank += comes_before(row[j], j, v, i) ? 1 : 0;
        out[rank] = static_cast<int32_t>(i);
    }
}

}  // namespace

cudaError_t cuda_binary(Op op, const float* dev_a, const int64_t a_ne[4], const float* dev_b, const int64_t b_ne[4],
                        float* dev_y, cudaStream_t stream) {
    if (op != Op::kAdd && op != Op::kMul && op != Op::kDiv) return cudaErrorInvalidValue;
    Shape4 an{}, bn{};
    int64_t total = 1;
    for (int d = 0; d < 4; ++d) {
        if (a_ne[d] < 0 || b_ne[d] < 1) return cudaErrorInvalidValue;
        an.ne[d] = a_ne[d], bn.ne[d] = b_ne[d];
        total *= a_ne[d];
    }
    if (total == 0) return cudaSuccess;
    LAUNCH_STREAM(binary_kernel, element_blocks(total), kElementThreads, 0, stream, op, dev_a, an, dev_b, bn, dev_y,
                  total);
    return cudaGetLastError();
}

cudaError_t cuda_unary(Op op, const float* dev_x, float* dev_y, int64_t n, float p0, float p1, cudaStream_t stream) {
    if ((op != Op::kSigmoid && op != Op::kScale && op != Op::kClamp && op != Op::kTanh && op != Op::kSoftplus) || n < 0)
        return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    LAUNCH_STREAM(unary_kernel, element_blocks(n), kElementThreads, 0, stream, op, dev_x, dev_y, n, p0, p1);
    return cudaGetLastError();
}

cudaError_t cuda_swiglu_oai(const float* dev_gate, const float* dev_up, float* dev_y, int64_t n, float alpha, float limit,
                            bool llama, cudaStream_t stream) {
    if (n < 0) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    LAUNCH_STREAM(swiglu_oai_kernel, element_blocks(n), kElementThreads, 0, stream, dev_gate, dev_up, dev_y, n, alpha,
                  limit, llama ? 1 : 0);
    return cudaGetLastError();
}

cudaError_t cuda_add_id(const float* dev_a, int64_t n, int64_t cols, const float* dev_table, int64_t n_rows,
                        const int32_t* dev_ids, float* dev_y, cudaStream_t stream) {
    if (n < 0 || cols < 0 || n_rows < 0) return cudaErrorInvalidValue;
    if (n == 0 || cols == 0) return cudaSuccess;
    LAUNCH_STREAM(add_id_kernel, element_blocks(n * cols), kElementThreads, 0, stream, dev_a, n, n * cols, dev_table,
                  n_rows, dev_ids, dev_y);
    return cudaGetLastError();
}

cudaError_t cuda_sum_rows(const float* dev_x, float* dev_y, int64_t n, int64_t rows, cudaStream_t stream) {
    if (n < 0 || rows < 0) return cudaErrorInvalidValue;
    if (rows == 0) return cudaSuccess;
    const int64_t grid = (rows + kSumRowsPerBlock - 1) / kSumRowsPerBlock;
    if (grid > 0x7fffffff) return cudaErrorInvalidValue;
    LAUNCH_STREAM(sum_rows_kernel, static_cast<unsigned>(grid), kSumThreads, 0, stream, dev_x, dev_y, n, rows);
    return cudaGetLastError();
}

cudaError_t cuda_argsort_desc(const float* dev_x, int32_t* dev_idx, int64_t n, int64_t rows, cudaStream_t stream) {
    if (n < 0 || rows < 0 || rows > 0x7fffffff || n > 0x7fffffff) return cudaErrorInvalidValue;
    if (n == 0 || rows == 0) return cudaSuccess;
    const int64_t warps = (n + 31) / 32;
    const int threads = warps >= kSortMaxThreads / 32 ? kSortMaxThreads : static_cast<int>(warps) * 32;
    LAUNCH_STREAM(argsort_desc_kernel, static_cast<unsigned>(rows), threads, 0, stream, dev_x, dev_idx, n);
    return cudaGetLastError();
}

}  // namespace ls::cuda
