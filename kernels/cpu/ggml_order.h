// Arithmetic in exactly the order and approximations of ggml's x86 AVX-512 CPU build, so that
// llama mode reproduces llama.cpp's CPU results bit for bit. Dot products:
//  - tinyBLAS (llamafile sgemm), used when a matmul has >= 2 columns and k % 16 == 0: one
//    16-lane FMA chain per output, then _mm512_reduce_add_ps;
//  - ggml_vec_dot_f32 otherwise: four 16-lane FMA chains over blocks of 64, a pairwise tree,
//    _mm512_reduce_add_ps, then the leftovers with f32 FMAs;
//  - ggml_vec_dot_f16 otherwise: native f16 arithmetic (AVX512-FP16), see below.
// Inputs are f32 (f16 operands already widened). Compiled with -ffp-contract=off: every FMA is
// explicit.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/common/fp16.h"

namespace ls::ggml_order {
// The CPU backend is compiled with and without FMA instructions: each copy gets its own inline
// functions.
#if defined(__FMA__)
inline namespace with_fma {
#else
inline namespace without_fma {
#endif

inline constexpr int kLanes = 16;

// _mm512_reduce_add_ps: halves of 8, then of 4, then (0+2, 1+3), then the two.
inline float reduce_add16(const float* v) {
    float t3[8], t6[4];
    for (int i = 0; i < 8; ++i) t3[i] = v[8 + i] + v[i];
    for (int i = 0; i < 4; ++i) t6[i] = t3[4 + i] + t3[i];
    const float t8_0 = t6[0] + t6[2], t8_1 = t6[1] + t6[3];
    return t8_0 + t8_1;
}

// tinyBLAS: k must be a multiple of 16.
inline float dot_tinyblas(const float* a, const float* b, int64_t k) {
    float lane[kLanes] = {};
    for (int64_t l = 0; l < k; l += kLanes)
        for (int i = 0; i < kLanes; ++i) lane[i] = std::fma(a[l + i], b[l + i], lane[i]);
    return reduce_add16(lane);
}

// The blocked part of ggml_vec_dot_f32/_f16: returns the reduced sum of the first np elements.
inline float dot_blocks64(const float* a, const float* b, int64_t np) {
    float sum[4][kLanes] = {};
    for (int64_t i = 0; i < np; i += 64)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < kLanes; ++l) sum[j][l] = std::fma(a[i + j * kLanes + l], b[i + j * kLanes + l], sum[j][l]);
    for (int l = 0; l < kLanes; ++l) {
        sum[0][l] = sum[0][l] + sum[2][l];
        sum[1][l] = sum[1][l] + sum[3][l];
    }
    for (int l = 0; l < kLanes; ++l) sum[0][l] = sum[0][l] + sum[1][l];
    return reduce_add16(sum[0]);
}

// ggml_vec_dot_f32 (float accumulator; GCC contracts the leftover loop into FMAs).
inline float vec_dot_f32(const float* a, const float* b, int64_t n) {
    const int64_t np = n & ~int64_t(63);
    float sum = dot_blocks64(a, b, np);
    for (int64_t i = np; i < n; ++i) sum = std::fma(a[i], b[i], sum);
    return sum;
}

// Rounds a double to the nearest f16 value (ties to even), returned as float. Used to emulate
// native f16 arithmetic: a double holds the exact sum or product of f16 operands.
inline float round_to_f16(double v) {
    // Round to odd into f32 first (the 13 extra bits keep the sticky information), then to
    // nearest even into f16: the same as one correct rounding, and much cheaper.
    float f = static_cast<float>(v);
    if (static_cast<double>(f) != v) {
        uint32_t bits;
        std::memcpy(&bits, &f, sizeof bits);
        if (std::fabs(static_cast<double>(f)) > std::fabs(v)) --bits;  // toward zero
        bits |= 1u;                                                   // odd
        std::memcpy(&f, &bits, sizeof f);
    }
    return fp16_to_fp32(fp32_to_fp16(f));
}

// _mm512_reduce_add_ph over 32 f16 lanes: 16+16, 8+8, 4+4, (0+2, 1+3), then the two, each
// addition rounded to f16.
inline float reduce_add32_f16(const float* v) {
    float t3[16], t6[8], t8[4];
    for (int i = 0; i < 16; ++i) t3[i] = round_to_f16(static_cast<double>(v[i]) + v[16 + i]);
    for (int i = 0; i < 8; ++i) t6[i] = round_to_f16(static_cast<double>(t3[i]) + t3[8 + i]);
    for (int i = 0; i < 4; ++i) t8[i] = round_to_f16(static_cast<double>(t6[i]) + t6[4 + i]);
    const float t10_0 = round_to_f16(static_cast<double>(t8[0]) + t8[2]);
    const float t10_1 = round_to_f16(static_cast<double>(t8[1]) + t8[3]);
    return round_to_f16(static_cast<double>(t10_0) + t10_1);
}

// ggml_vec_dot_f16 on a CPU with AVX512-FP16: native f16 FMAs in four 32-lane accumulators over
// blocks of 128, an f16 tree and reduction, then the leftovers in double (products of f16 values
// are exact in f32). Inputs are f16 values widened to f32.
inline float vec_dot_f16(const float* a, const float* b, int64_t n) {
    const int64_t np = n & ~int64_t(127);
    double sum = 0.0;
    if (np > 0) {
        float acc[4][32] = {};
        for (int64_t i = 0; i < np; i += 128)
            for (int j = 0; j < 4; ++j)
                for (int l = 0; l < 32; ++l) {
                    const int64_t k = i + j * 32 + l;
                    acc[j][l] = round_to_f16(static_cast<double>(a[k]) * b[k] + acc[j][l]);
                }
        for (int l = 0; l < 32; ++l) {
            acc[0][l] = round_to_f16(static_cast<double>(acc[0][l]) + acc[2][l]);
            acc[1][l] = round_to_f16(static_cast<double>(acc[1][l]) + acc[3][l]);
        }
        for (int l = 0; l < 32; ++l) acc[0][l] = round_to_f16(static_cast<double>(acc[0][l]) + acc[1][l]);
        sum = reduce_add32_f16(acc[0]);
    }
    for (int64_t i = np; i < n; ++i) sum += static_cast<double>(a[i] * b[i]);
    return static_cast<float>(sum);
}

// ggml_vec_scale_f16 (y *= v) and ggml_vec_mad_f16 (y += x * v) on f16 rows held as floats:
// native f16 vectors of 32 over blocks of 128 (v converted to f16), f32 arithmetic rounded to
// f16 for the leftovers.
inline void vec_scale_f16(float* y, int64_t n, float v) {
    const int64_t np = n & ~int64_t(127);
    const double vh = round_to_f16(v);
    for (int64_t i = 0; i < np; ++i) y[i] = round_to_f16(y[i] * vh);
    for (int64_t i = np; i < n; ++i) y[i] = round_to_f16(y[i] * v);
}
inline void vec_mad_f16(float* y, const float* x, int64_t n, float v) {
    const int64_t np = n & ~int64_t(127);
    const double vh = round_to_f16(v);
    for (int64_t i = 0; i < np; ++i) y[i] = round_to_f16(x[i] * vh + y[i]);
    for (int64_t i = np; i < n; ++i) y[i] = round_to_f16(std::fma(x[i], v, y[i]));
}

// ggml_v_expf: ggml's vectorized expf (a polynomial after range reduction by ln 2; at most
// ~1.5 ulp from the true value), used 16 values at a time by softmax and SiLU.
inline float v_expf(float x) {
    const float r = 0x1.8p23f;
    const float z = std::fma(x, 0x1.715476p+0f, r);
    const float n = z - r;  // round(x / ln 2)
    const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
    if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    const float u = b * b;
    const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                             u, std::fma(0x1.ffffecp-1f, b, 1.0f));
    return std::ldexp(j, static_cast<int>(n));  // _mm512_scalef_ps
}

// ggml_v_silu: x / (1 + v_expf(-x)).
inline float v_silu(float x) { return x / (1.0f + v_expf(0.0f - x)); }

// ggml_vec_swiglu_f32 over one row: vector path for each full group of 16, scalar expf after.
inline void swiglu_row(const float* x, const float* g, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 15 < n; i += 16)
        for (int l = 0; l < 16; ++l) y[i + l] = v_silu(x[i + l]) * g[i + l];
    for (; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i])) * g[i];
}

}  // inline namespace
}  // namespace ls::ggml_order
