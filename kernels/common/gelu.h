// GELU with the tanh approximation as ggml computes it (gemma's GEGLU feed-forward), shared by the
// CPU and CUDA kernels.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/fp16.h"
#include "kernels/common/hd.h"

namespace ls {

// ggml's ggml_gelu_f32: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))), in f32.
LS_HD inline float gelu_tanh(float x) {
    constexpr float kCoefA = 0.044715f;
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

// GEGLU's gate value in llama mode, as ggml's CPU build (GGML_GELU_FP16) computes it: 0 at or below
// -10, x itself at or above 10, else GELU of x rounded to f16, the result rounded to f16 (ggml looks
// it up in a table of every f16 value made that way).
LS_HD inline float gelu_tanh_llama(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return fp16_to_fp32(fp32_to_fp16(gelu_tanh(fp16_to_fp32(fp32_to_fp16(x)))));
}

}  // namespace ls
