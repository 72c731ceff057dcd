// ggml_v_expf (its 512-bit form) for host and device code: range reduction by ln 2, a polynomial,
// then scaling by 2^n. The CUDA kernels take it where exact mode must give the CPU's bits
// (kernels/cpu/ggml_order.h's v_expf is this function).
#pragma once

#include <cmath>

#include "kernels/common/hd.h"

namespace ls {

// static: every translation unit keeps its own copy, so the CPU backend built with FMA instructions
// (kernels/CMakeLists.txt) never calls the copy built without them.
LS_HD static inline float ggml_v_expf16(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;  // round(x / ln 2)
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         fmaf(0x1.ffffecp-1f, b, 1.0f));
    // A NaN x makes j NaN, whatever the exponent; converting a NaN n to int would be undefined.
    return ldexpf(j, n == n ? static_cast<int>(n) : 0);
}

}  // namespace ls
