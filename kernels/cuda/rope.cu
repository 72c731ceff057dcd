// CUDA backend: ROPE as the CPU backend computes it: theta advanced from the position by repeated
// multiplication (pair i multiplies i times), divided by the pair's frequency factor, the YaRN
// ramp, cos/sin scaled by mscale, then the rotation of each pair (fused in llama mode). Built with --fmad=false: no multiply-add that the
// source does not spell.
#include "kernels/cuda/rope.h"

#include <cmath>

namespace ls::cuda {
namespace {

constexpr int kRopeThreads = 64;        // at most; one thread per rotated pair
constexpr int kRopeHeadsPerBlock = 4;   // heads of one token rotated by one block

// YaRN: the dims where interpolation gives way to extrapolation (as ggml computes them).
float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * std::log(n_ctx_orig / (n_rot * 2 * static_cast<float>(M_PI))) / (2 * std::log(base));
}

// Block (t, g) rotates the heads [g * kRopeHeadsPerBlock, +kRopeHeadsPerBlock) of token t.
__global__ void __launch_bounds__(kRopeThreads) rope_kernel(float* x, const int32_t* pos, const float* freq_factors,
                                                            int64_t n_head, int64_t head_stride, int64_t token_stride,
                                                            RopeArgs a) {
    const int64_t t = blockIdx.x;
    const int64_t h_begin = static_cast<int64_t>(blockIdx.y) * kRopeHeadsPerBlock;
    const int64_t h_end = h_begin + kRopeHeadsPerBlock < n_head ? h_begin + kRopeHeadsPerBlock : n_head;
    const int half = a.n_rot / 2;
    const float p = static_cast<float>(pos[t]);
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        float theta_extrap = p;
        for (int k = 0; k < i; ++k) theta_extrap *= a.theta_scale;
        if (freq_factors) theta_extrap = theta_extrap / freq_factors[i];
        float theta = a.freq_scale * theta_extrap;
        if (a.ext_factor != 0.0f) {
            const float y = (i - a.corr_lo) / fmaxf(0.001f, a.corr_hi - a.corr_lo);
            const float ramp_mix = (1 - fminf(1.0f, fmaxf(0.0f, y))) * a.ext_factor;
            theta = a.fused ? fmaf(theta, 1 - ramp_mix, theta_extrap * ramp_mix) : theta * (1 - ramp_mix) + theta_extrap * ramp_mix;
        }
        const float c = cosf(theta) * a.mscale, s = sinf(theta) * a.mscale;
        const int ia = a.neox ? i : 2 * i, ib = a.neox ? i + half : 2 * i + 1;
        for (int64_t h = h_begin; h < h_end; ++h) {
            float* v = x + t * token_stride + h * head_stride;
            const float x0 = v[ia], x1 = v[ib];
            if (a.fused) {
                v[ia] = fmaf(x0, c, -(x1 * s));
                v[ib] = fmaf(x0, s, x1 * c);
            } else {
                v[ia] = x0 * c - x1 * s;
                v[ib] = x0 * s + x1 * c;
            }
        }
    }
}

}  // namespace

RopeArgs cuda_rope_args(bool neox, bool fused, int n_rot, float freq_base, float freq_scale, int n_ctx_orig,
                        float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
    RopeArgs a;
    a.neox = neox;
    a.fused = fused;
    a.n_rot = n_rot;
    a.theta_scale = std::pow(freq_base, -2.0f / n_rot);
    a.freq_scale = freq_scale;
    a.ext_factor = ext_factor;
    a.mscale = attn_factor;
    if (ext_factor != 0.0f) {
        const float start = std::floor(yarn_corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base));
        const float end = std::ceil(yarn_corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base));
        a.corr_lo = start > 0.0f ? start : 0.0f;
        a.corr_hi = end < static_cast<float>(n_rot - 1) ? end : static_cast<float>(n_rot - 1);
        a.mscale *= 1.0f + 0.1f * std::log(1.0f / freq_scale);
    }
    return a;
}

cudaError_t cuda_rope(float* dev_x, const int32_t* dev_pos, const float* dev_freq_factors, int64_t n_head, int64_t T,
                      int64_t head_stride, int64_t token_stride, const RopeArgs& args, cudaStream_t stream) {
    if (args.n_rot <= 0 || args.n_rot % 2 != 0 || n_head <= 0 || T < 0 || T > 0x7fffffff) return cudaErrorInvalidValue;
    if (T == 0) return cudaSuccess;
    const int64_t groups = (n_head + kRopeHeadsPerBlock - 1) / kRopeHeadsPerBlock;
    if (groups > 65535) return cudaErrorInvalidValue;
    const int half = args.n_rot / 2;
    const int threads = half >= kRopeThreads ? kRopeThreads : (half + 31) / 32 * 32;
    LAUNCH_STREAM(rope_kernel, dim3(static_cast<unsigned>(T), static_cast<unsigned>(groups)), threads, 0, stream, dev_x,
                  dev_pos, dev_freq_factors, n_head, head_stride, token_stride, args);
    return cudaGetLastError();
}

}  // namespace ls::cuda
