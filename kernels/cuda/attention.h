// CUDA backend: attention over the KV cache (the cache store, scores, masked softmax, values and
// flash attention), with the CPU backend's semantics in both math modes. Included by .cu sources
// (built by nvcc into the CUDA module, or as C++ against the SIMT emulator for tests).
#pragma once

#include <cstdint>

#include "kernels/simt/simt.h"

namespace ls::cuda {

// Every tensor is contiguous, laid out as the backend interface says (kernels/backend.h):
// q {hd_k, n_head, T}, the caches {hd_k or hd_v, n_head_kv, cells}, scores and probabilities
// {n_kv, T, n_head}. Head h reads kv head h / (n_head / n_head_kv).
struct AttnDims {
    int64_t hd_k = 0, hd_v = 0;
    int64_t n_head = 0, n_head_kv = 0;
    int64_t T = 0;     // tokens
    int64_t n_kv = 0;  // cells attended
};

// dst[i] = src[i] for n floats, rounded to f16 when `to_f16` (llama mode's f16 cache).
// Asynchronous on `stream`.
cudaError_t cuda_store_cells(const float* dev_src, float* dev_dst, int64_t n, bool to_f16, cudaStream_t stream);

// kq {n_kv, T, n_head} = K^T q per head. `llama`: q rounded to f16 first, as ggml converts it for
// the f16 cache. dev_k holds f32 values, or f16 bits when `k_is_f16` (F16 weight rows).
cudaError_t cuda_attn_scores(const float* dev_q, const void* dev_k, bool k_is_f16, float* dev_kq, const AttnDims& d,
                             bool llama, cudaStream_t stream);

// p = softmax(kq * scale + mask) over ne0 for every row of kq {n_kv, T, rows / T}; cell j is
// visible to token t when j <= pos[t] (or always when !causal) and, with n_swa > 0, pos[t] - j <
// n_swa (the sliding window). One block per row.
cudaError_t cuda_softmax_masked(const float* dev_kq, const int32_t* dev_pos, float* dev_p, int64_t n_kv, int64_t T,
                                int64_t rows, float scale, bool causal, int64_t n_swa, const float* dev_sinks,
                                cudaStream_t stream);

// kqv {hd_v, T, n_head} = V p per head. `llama`: p rounded to f16 first.
cudaError_t cuda_attn_values(const float* dev_p, const float* dev_v, float* dev_kqv, const AttnDims& d, bool llama,
                             cudaStream_t stream);

// out {hd_v, n_head, T} = softmax(q K^T * scale + mask) V as ggml's CPU flash-attention kernel
// computes it: q rounded to f16, the online softmax in f32 cell by cell in order, V accumulated
// in f16 (every update rounded), masked cells (as cuda_softmax_masked's) skipped. softcap != 0:
// each score is softcap * tanh(s * scale / softcap) (ggml's logit_softcap). `f32_path`: as ggml's
// tiled kernel for prompts of 64 rows or more, q and the accumulator in f32 (its tile-wise
// softmax and FMA orders are the CPU backend's alone). dev_sinks (f32 {n_head}, or nullptr): each
// head's sink joins the softmax after the cells, as in cuda_softmax_masked.
cudaError_t cuda_attn_flash(const float* dev_q, const float* dev_k, const float* dev_v, const int32_t* dev_pos,
                            float* dev_out, const AttnDims& d, float scale, bool causal, int64_t n_swa, float softcap,
                            bool f32_path, const float* dev_sinks, cudaStream_t stream);

}  // namespace ls::cuda
