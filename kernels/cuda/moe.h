// CUDA backend: the mixture-of-experts ops around the router (ADD/MUL/DIV with ggml's broadcasting,
// SIGMOID, SCALE, CLAMP, SUM_ROWS, ARGSORT descending), computing what kernels/host_ops.h defines.
// Included by .cu sources (built by nvcc into the CUDA module, or as C++ against the SIMT emulator
// for tests). Tensors are packed in device memory; every function is asynchronous on `stream` and
// returns the launch's error. MUL_MAT_ID is cuda_matmul_id (kernels/cuda/matmul.h).
#pragma once

#include <cstdint>

#include "kernels/ops.h"
#include "kernels/simt/simt.h"

namespace ls::cuda {

// y = a op b for op ADD, MUL or DIV: a and y {a_ne}, b {b_ne}, b's index along each axis is a's
// modulo b_ne (each b_ne[d] >= 1).
cudaError_t cuda_binary(Op op, const float* dev_a, const int64_t a_ne[4], const float* dev_b, const int64_t b_ne[4],
                        float* dev_y, cudaStream_t stream);

// y = f(x) for n values: SIGMOID (1 / (1 + expf(-x))), SCALE (x * p0), CLAMP (to [p0, p1]).
cudaError_t cuda_unary(Op op, const float* dev_x, float* dev_y, int64_t n, float p0, float p1, cudaStream_t stream);

// y[r] = the sum of row r's n values, accumulated in double (a warp per row).
// SWIGLU_OAI: host_swiglu_oai's arithmetic; `llama`: CUDA's expf (libm's on the host), else the
// 512-bit ggml_v_expf as exact mode everywhere.
cudaError_t cuda_swiglu_oai(const float* dev_gate, const float* dev_up, float* dev_y, int64_t n, float alpha, float limit,
                            bool llama, cudaStream_t stream);

// ADD_ID: y[:, c] = a[:, c] + table[:, ids[c]] for the `cols` columns of n values; an id outside
// [0, n_rows) leaves its column as a's.
cudaError_t cuda_add_id(const float* dev_a, int64_t n, int64_t cols, const float* dev_table, int64_t n_rows,
                        const int32_t* dev_ids, float* dev_y, cudaStream_t stream);

cudaError_t cuda_sum_rows(const float* dev_x, float* dev_y, int64_t n, int64_t rows, cudaStream_t stream);

// Per row of n values: the columns from the largest value to the smallest, equal values in
// column order (NaN after every number). A block per row; each column finds its own rank, so
// rows are meant to be short (a router's experts).
cudaError_t cuda_argsort_desc(const float* dev_x, int32_t* dev_idx, int64_t n, int64_t rows, cudaStream_t stream);

}  // namespace ls::cuda
