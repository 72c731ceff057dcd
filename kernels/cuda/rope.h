// CUDA backend: ROPE (NORM and NEOX pairings, frequency factors, linear scaling and YaRN) in place on the device.
// Included by .cu sources (built by nvcc into the CUDA module, or as C++ against the SIMT emulator).
#pragma once

#include <cstdint>

#include "kernels/simt/simt.h"

namespace ls::cuda {

// What the kernel needs of RopeParams, with the per-call constants computed on the host exactly
// as the CPU backend computes them (cuda_rope_constants in rope.cu).
struct RopeArgs {
    bool neox = false;       // pairs (i, i + n_rot/2) instead of (2i, 2i+1)
    bool fused = false;      // llama mode: the rotation's first product fused (fmaf), as ggml's build does
    int n_rot = 0;           // rotated dims per head, even
    float theta_scale = 1;   // freq_base^(-2/n_rot)
    float freq_scale = 1;
    float ext_factor = 0;    // YaRN ramp on when not 0
    float corr_lo = 0, corr_hi = 0;  // YaRN: the dims where interpolation gives way to extrapolation
    float mscale = 1;        // attn_factor, times YaRN's magnitude correction when ext_factor is not 0
};

RopeArgs cuda_rope_args(bool neox, bool fused, int n_rot, float freq_base, float freq_scale, int n_ctx_orig,
                        float ext_factor, float attn_factor, float beta_fast, float beta_slow);

// Rotates the first n_rot dims of every head of dev_x {head_dim, n_head, T} in place; heads are
// head_stride floats apart and tokens token_stride floats apart; dev_pos: T positions (i32);
// dev_freq_factors: n_rot/2 divisors of the pairs' angles, or nullptr.
cudaError_t cuda_rope(float* dev_x, const int32_t* dev_pos, const float* dev_freq_factors, int64_t n_head, int64_t T,
                      int64_t head_stride,
                      int64_t token_stride, const RopeArgs& args, cudaStream_t stream);

}  // namespace ls::cuda
