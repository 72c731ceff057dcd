// Arithmetic in exactly the order and approximations of ggml's x86 CPU builds, so that llama mode
// reproduces llama.cpp's CPU results bit for bit. Three builds differ (LlamaIsa):
//  - AVX-512 with AVX512-FP16 (the functions without a suffix below, plus the native-f16 ones);
//  - AVX-512F without FP16: f32 orders as above, f16 dots and flash attention's f16 updates in f32
//    (the *_f32acc functions);
//  - AVX2+FMA+F16C: 8-lane f32 orders, ggml's 256-bit expf (the *_avx2 functions).
// Quantized dot products run ggml's AVX2 code in all three (kernels/cpu/vec_dot_x86.h).
// The AVX-512 dot products:
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
#include "kernels/common/v_expf.h"

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

// hsum_float_8 (tinyBLAS, quantized dots, softmax's sum): a_i = x[4+i] + x[i], (a0+a2) + (a1+a3).
inline float hsum8(const float* v) {
    float a[4];
    for (int i = 0; i < 4; ++i) a[i] = v[4 + i] + v[i];
    return (a[0] + a[2]) + (a[1] + a[3]);
}

// GGML_F32x8_REDUCE's last step (two _mm_hadd_ps): t_i = x[i] + x[4+i], (t0+t1) + (t2+t3).
inline float hadd8(const float* v) {
    float t[4];
    for (int i = 0; i < 4; ++i) t[i] = v[i] + v[4 + i];
    return (t[0] + t[1]) + (t[2] + t[3]);
}

// The blocked part of ggml_vec_dot_f32/_f16 with L-lane vectors (16 on AVX-512, 8 on AVX2): four
// accumulators over blocks of 4L, x0 += x2, x1 += x3, x0 += x1, then the build's reduction
// (_mm512_reduce_add_ps, or GGML_F32x8_REDUCE's hadd). Returns the sum of the first np elements.
template <int L>
inline float dot_blocks(const float* a, const float* b, int64_t np) {
    float sum[4][L] = {};
    for (int64_t i = 0; i < np; i += 4 * L)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < L; ++l) sum[j][l] = std::fma(a[i + j * L + l], b[i + j * L + l], sum[j][l]);
    for (int l = 0; l < L; ++l) {
        sum[0][l] = sum[0][l] + sum[2][l];
        sum[1][l] = sum[1][l] + sum[3][l];
    }
    for (int l = 0; l < L; ++l) sum[0][l] = sum[0][l] + sum[1][l];
    if constexpr (L == 16) return reduce_add16(sum[0]);
    else return hadd8(sum[0]);
}

// ggml_vec_dot_f32 (float accumulator; the leftovers multiplied and added separately: llama.cpp's
// build does not fuse them, which its dumps of F32 models show).
inline float vec_dot_f32(const float* a, const float* b, int64_t n) {
    const int64_t np = n & ~int64_t(63);
    float sum = dot_blocks<16>(a, b, np);
    for (int64_t i = np; i < n; ++i) sum = sum + a[i] * b[i];
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
inline float v_expf(float x) { return ggml_v_expf16(x); }

// ---- AVX2 (256-bit) orders

// tinyBLAS with __m256: one 8-lane FMA chain per output, hsum8. k must be a multiple of 8.
inline float dot_tinyblas8(const float* a, const float* b, int64_t k) {
    float lane[8] = {};
    for (int64_t l = 0; l < k; l += 8)
        for (int i = 0; i < 8; ++i) lane[i] = std::fma(a[l + i], b[l + i], lane[i]);
    return hsum8(lane);
}

// ggml_vec_dot_f32 on AVX2: float accumulator, leftovers multiplied and added separately.
inline float vec_dot_f32_avx2(const float* a, const float* b, int64_t n) {
    const int64_t np = n & ~int64_t(31);
    float sum = dot_blocks<8>(a, b, np);
    for (int64_t i = np; i < n; ++i) sum = sum + a[i] * b[i];
    return sum;
}

// ggml_vec_dot_f16 without native f16 arithmetic (AVX2+F16C: 8 lanes; AVX-512F: 16 lanes): the
// widened values in the f32 order of vec_dot_f32, the leftovers added in double.
inline float vec_dot_f16_f32acc(const float* a, const float* b, int64_t n, bool avx512) {
    const int64_t step = avx512 ? 64 : 32;
    const int64_t np = n & ~(step - 1);
    double sum = avx512 ? dot_blocks<16>(a, b, np) : dot_blocks<8>(a, b, np);
    for (int64_t i = np; i < n; ++i) sum += static_cast<double>(a[i] * b[i]);
    return static_cast<float>(sum);
}

// ggml_vec_mad_f16 / ggml_vec_scale_f16 without native f16: element by element in f32, each
// result rounded to f16 (the vector width does not matter).
inline void vec_mad_f16_f32acc(float* y, const float* x, int64_t n, float v) {
    for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(fp32_to_fp16(std::fma(x[i], v, y[i])));
}
inline void vec_scale_f16_f32acc(float* y, int64_t n, float v) {
    for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(fp32_to_fp16(y[i] * v));
}

// ggml_v_expf for __m256: the same polynomial as v_expf, but 1 is added in the final FMA with
// 2^n (k + k*j) and large |n| is handled with two scale factors, so results can differ by 1 ulp.
inline float v_expf_avx2(float x) {
    auto bits = [](float f) {
        uint32_t u;
        std::memcpy(&u, &f, sizeof u);
        return u;
    };
    auto from_bits = [](uint32_t u) {
        float f;
        std::memcpy(&f, &u, sizeof f);
        return f;
    };
    const float r = 0x1.8p23f;
    const float z = std::fma(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
    const uint32_t e = bits(z) << 23;
    const float k = from_bits(e + bits(1.0f));
    const float u = b * b;
    const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                             u, 0x1.ffffecp-1f * b);
    const float an = std::fabs(n);
    if (!(an > 126.0f)) return std::fma(j, k, k);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = from_bits(g + 0x7f000000u);
    const float s2 = from_bits(e - g);
    if (an > 192.0f) return s1 * s1;
    return std::fma(s2, j, s2) * s1;
}

inline float v_silu_avx2(float x) { return x / (1.0f + v_expf_avx2(0.0f - x)); }

// ggml_vec_swiglu_f32 on AVX2: vector path for each full group of 8, libm expf after.
inline void swiglu_row_avx2(const float* x, const float* g, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 7 < n; i += 8)
        for (int l = 0; l < 8; ++l) y[i + l] = v_silu_avx2(x[i + l]) * g[i + l];
    for (; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i])) * g[i];
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
