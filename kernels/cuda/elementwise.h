// CUDA backend: the element-wise and normalisation ops (RMS_NORM, MUL by one row, ADD, SWIGLU, the
// head merge of CONT). Included by .cu sources (built by nvcc into the CUDA module, or as C++
// against the SIMT emulator for tests). Tensors are packed f32 rows in device memory; every
// function is asynchronous on `stream` and returns the launch's error.
#pragma once

#include <cstdint>

#include "kernels/simt/simt.h"

namespace ls::cuda {

// RMS_NORM: y[:, r] = x[:, r] / sqrt(mean(x[:, r]^2) + eps) for `rows` rows of n. One CUDA block per
// row: the f32 squares summed in double per thread, then across the warp by shuffles and across
// the warps through shared memory (as the CPU sums them in double).
cudaError_t cuda_rms_norm(const float* dev_x, float* dev_y, int64_t n, int64_t rows, float eps, cudaStream_t stream);

// MUL: y[:, r] = x[:, r] * w, w one row of n.
cudaError_t cuda_mul_row(const float* dev_x, const float* dev_w, float* dev_y, int64_t n, int64_t rows,
                         cudaStream_t stream);

// ADD: y = a + b, b either the same shape or one row of n broadcast over the rows of a.
cudaError_t cuda_add(const float* dev_a, const float* dev_b, float* dev_y, int64_t n, int64_t rows, bool b_one_row,
                     cudaStream_t stream);

// SWIGLU: y = silu(gate) * up, silu(g) = g / (1 + e^-g). ggml_lanes 0 (exact mode): e^-g by the
// 512-bit ggml_v_expf for every value. 8 or 16: ggml's CPU swiglu, whose vector path (each full
// group of ggml_lanes values of a row) uses ggml_v_expf (the 256-bit variant for 8 lanes, the
// 512-bit one for 16) and expf for the rest of the row.
cudaError_t cuda_swiglu(const float* dev_gate, const float* dev_up, float* dev_y, int64_t n, int64_t rows,
                        int ggml_lanes, cudaStream_t stream);

// GEGLU: y = gelu(gate) * up, GELU's tanh form: `llama` as ggml's CPU build (gelu_tanh_llama),
// else gelu_tanh in f32 (kernels/common/gelu.h).
cudaError_t cuda_geglu(const float* dev_gate, const float* dev_up, float* dev_y, int64_t total, bool llama,
                       cudaStream_t stream);

// CONT of ggml's permute(0, 2, 1, 3): y {head_dim * n_head, T} from x {head_dim, T, n_head}.
cudaError_t cuda_merge_heads(const float* dev_x, float* dev_y, int64_t head_dim, int64_t T, int64_t n_head,
                             cudaStream_t stream);

// For the tests that prove the emulator catches broken reductions: RMS_NORM with a known bug
// injected into its block reduction. Production code always runs kNone.
enum class ReductionFault {
    kNone,
    kMissingSyncthreads,  // warp 0 reads the other warps' partial sums without a barrier first
    kShuffleOffByOne,     // the warp reduction stops one step early (offset 1 is never added)
};
cudaError_t cuda_rms_norm_with_fault(const float* dev_x, float* dev_y, int64_t n, int64_t rows, float eps,
                                     ReductionFault fault, cudaStream_t stream);

}  // namespace ls::cuda
