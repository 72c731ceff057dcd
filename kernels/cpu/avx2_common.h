// What the AVX2 kernels (vec_dot_avx2.cpp, vec_dot_f32_avx2.cpp) share: the target attribute that
// compiles only them for AVX2, FMA and F16C (the inline helpers they share with the rest of the
// program stay baseline code), and the horizontal sums in the orders the portable code fixes.
#pragma once

#include <immintrin.h>

#include "kernels/cpu/ggml_order.h"

#define LS_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace ls::avx2 {

// hsum_float_8 of the register, in the emulation's order.
LS_AVX2 inline float hsum8(__m256 acc) {
    alignas(32) float v[8];
    _mm256_store_ps(v, acc);
    return ggml_order::hsum8(v);
}

// Exact mode's fold of an output's sixteen lanes (two registers): lane l + lane l + 8, then
// ((0+1)+(2+3))+((4+5)+(6+7)) (exact_order.h).
LS_AVX2 inline float lane_sum(__m256 lo, __m256 hi) {
    alignas(32) float l[8];
    _mm256_store_ps(l, _mm256_add_ps(lo, hi));
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

}  // namespace ls::avx2
