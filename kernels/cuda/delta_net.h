// CUDA backend: qwen35's Gated DeltaNet ops (SILU, SSM_CONV, GATED_DELTA_NET in both forms),
// computing what kernels/host_ops.h's host_silu, host_ssm_conv, host_gated_delta_net and
// host_gated_delta_net_chunked define. Included by .cu
// sources (built by nvcc into the CUDA module, or as C++ against the SIMT emulator for tests).
// Tensors are packed f32 in device memory; every function is asynchronous on `stream` and returns
// the launch's error. SOFTPLUS is cuda_unary (kernels/cuda/moe.h).
#pragma once

#include <cstdint>

#include "kernels/simt/simt.h"

namespace ls::cuda {

// SILU: y = x / (1 + e^-x) for n values. `llama`: CUDA's expf (libm's on the host), else the
// 512-bit ggml_v_expf for every value, as the CPU's exact mode.
cudaError_t cuda_silu(const float* dev_x, float* dev_y, int64_t n, bool llama, cudaStream_t stream);

// SSM_CONV: y[t * channels + c] = sum over i < d_conv of x[c * (d_conv - 1 + T) + t + i] *
// w[c * d_conv + i], in order of i, each product rounded before it is added (ggml's CPU op).
// x {d_conv - 1 + T, channels}, w {d_conv, channels}, y {channels, T}.
cudaError_t cuda_ssm_conv(const float* dev_x, const float* dev_w, float* dev_y, int64_t d_conv, int64_t channels,
                          int64_t T, cudaStream_t stream);

// GATED_DELTA_NET, token by token: per value head h the state (S x S, stored transposed:
// state[h S S + j S + i] = S[i][j]) decays by e^g, then delta = (v - S^T k) beta, S += k delta^T,
// out = S^T q / sqrt(S); value head h reads q/k head h % H_k. q, k {S, H_k, T}; v, out {S, H_v, T};
// g, beta {H_v, T}; state {S, S, H_v}, updated in place. Every sum is one fused multiply-add after
// another, as the CPU's exact mode (both math modes).
cudaError_t cuda_gated_delta_net(const float* dev_q, const float* dev_k, const float* dev_v, const float* dev_g,
                                 const float* dev_beta, float* dev_state, float* dev_out, int64_t S, int64_t H_k,
                                 int64_t H_v, int64_t T, cudaStream_t stream);

// The same rule in its chunked form (chunks of `chunk` <= 64 tokens solved at once, in double), as
// delta_net::gated_delta_net_chunked computes it up to the order of its double sums; `in_chunk_decay`
// false leaves the decay between a chunk's tokens out (the delta-chunk-decay fault). S <= 256
// (cudaErrorInvalidValue beyond: the backend then computes it on the host).
cudaError_t cuda_gated_delta_net_chunked(const float* dev_q, const float* dev_k, const float* dev_v, const float* dev_g,
                                         const float* dev_beta, float* dev_state, float* dev_out, int64_t S, int64_t H_k,
                                         int64_t H_v, int64_t T, int64_t chunk, bool in_chunk_decay, cudaStream_t stream);

}  // namespace ls::cuda
