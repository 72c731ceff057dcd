// CUDA backend: y = W x for weights of any supported format. Decode-sized batches run a
// dequantize-on-the-fly mat-vec kernel; larger batches decode the weight to f32 tiles on the device
// and multiply them with cuBLAS. Included by .cu sources (built by nvcc into the CUDA module, or as
// C++ against the SIMT emulator for tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/common/ggml_type.h"
#include "kernels/simt/simt.h"
#include "kernels/simt/simt_cublas.h"

namespace ls::cuda {

// Batches of at most this many columns take the mat-vec kernel; larger ones cuBLAS.
inline constexpr int64_t kMatvecMaxColumns = 8;

// True when cuda_matmul handles weights of `type` (every format cuda_dequantize_rows decodes).
bool cuda_can_matmul(GgmlType type);

// The arguments of one column-major cuBLAS GEMM call.
struct GemmCall {
    cublasOperation_t transa, transb;
    int m, n, k, lda, ldb, ldc;
};

// The one place where the row-major GGUF layout meets column-major cuBLAS. y = W x with
//   W: n_rows rows of K f32, row r at W + r * ldw (a GGUF weight {K, n_rows});
//   x: T columns of K f32, column t at x + t * ldx (activations {K, T});
//   y: T columns of n_rows f32, column t at y + t * ldy (output {n_rows, T}).
// W's memory is the column-major K x n_rows matrix with leading dimension ldw, so op(A) = A^T;
// x's and y's memory are column-major as they are. Fails, naming the argument, when a leading
// dimension is smaller than its rows or a size does not fit cuBLAS's int.
bool weight_gemm_call(int64_t n_rows, int64_t T, int64_t K, int64_t ldw, int64_t ldx, int64_t ldy, GemmCall* call,
                      std::string* why);

// Runs `call` as cublasGemmEx on f32 operands (f32 compute): C = A' B'.
cublasStatus_t run_gemm_f32(cublasHandle_t handle, const GemmCall& call, const float* A, const float* B, float* C);

// Scratch device memory the GEMM path decodes weights into; grown on demand, owned by the caller.
struct MatmulScratch {
    float* data = nullptr;
    size_t bytes = 0;
};

// y {N, T} (packed) = W {K, N} (rows w_row_bytes apart, any supported format) times x {K, T}
// (packed f32). T <= kMatvecMaxColumns: the mat-vec kernel; otherwise W is decoded to f32 in tiles
// of rows (scratch grows to at most 64 MiB, or one row) and each tile multiplied by cuBLAS on
// `stream`. Throws std::runtime_error naming the failing CUDA or cuBLAS call.
void cuda_matmul(cublasHandle_t handle, MatmulScratch& scratch, GgmlType type, const void* w, size_t w_row_bytes,
                 const float* x, float* y, int64_t K, int64_t N, int64_t T, cudaStream_t stream);

// MUL_MAT_ID's device scratch (the columns grouped by expert), grown as needed.
struct MatmulIdScratch {
    int32_t* data = nullptr;
    size_t bytes = 0;
};

// MUL_MAT_ID: y[:, s, t] = W[ids[s, t]] x[:, s % x_cols, t] for n_used slots and T tokens, W
// n_expert matrices {K, N} (rows w_row_bytes apart, matrices w_expert_bytes apart), x {K, x_cols,
// T} and y {N, n_used, T} packed f32, ids I32 {n_used, T} on the device. Each column is the mat-vec
// kernel's product (the same bits as cuda_matmul of that expert and column); the ids are read on
// the device, never copied to the host. With T >= 2 the columns are grouped by expert on the
// device first (in `scratch`), and each expert's weight rows are decoded once for up to 8 of its
// columns. An id outside [0, n_expert) makes its column NaN and is recorded in dev_error (three
// ints, zeroed by the caller: 1, then the id and its column) for the caller to report.
cudaError_t cuda_matmul_id(GgmlType type, const void* w, size_t w_row_bytes, size_t w_expert_bytes, int64_t n_expert,
                           const float* x, int64_t x_cols, const int32_t* ids, int64_t n_used, float* y, int64_t K,
                           int64_t N, int64_t T, int* dev_error, MatmulIdScratch& scratch, cudaStream_t stream);

}  // namespace ls::cuda
