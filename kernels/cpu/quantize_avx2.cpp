// Compiled with -ffp-contract=off: every multiply and add below stays one, as in ggml's build of
// make_qkx2_quants (which has no FMA).
#include "kernels/cpu/quantize_avx2.h"

#include <immintrin.h>

#define LS_AVX2 __attribute__((target("avx2")))

namespace ls {

namespace {

// ggml's nearest_int, lane by lane: adding 1.5 * 2^23 leaves round-half-even(f) in the low
// mantissa bits.
LS_AVX2 inline __m256i nearest_int8(__m256 f) {
    const __m256i bits = _mm256_castps_si256(_mm256_add_ps(f, _mm256_set1_ps(12582912.f)));
    return _mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x00400000));
}

LS_AVX2 inline __m256i clamp_quant(__m256i l, int nmax) {
    return _mm256_max_epi32(_mm256_setzero_si256(), _mm256_min_epi32(_mm256_set1_epi32(nmax), l));
}

}  // namespace

LS_AVX2 void scale_min_search_avx2(const float* x, int nmax, float rmin, float rdelta, int nstep, float scales[8],
                                   float mins[8], uint8_t L[256]) {
    // xs[i]: element i of every sub-block (lane j: x[32 j + i]).
    __m256 xs[32], ws[32];
    __m256i best_l[32], aux_l[32];
    const __m256i stride = _mm256_setr_epi32(0, 32, 64, 96, 128, 160, 192, 224);
    for (int i = 0; i < 32; ++i) xs[i] = _mm256_i32gather_ps(x + i, stride, 4);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 sum_x2 = _mm256_setzero_ps();
    for (int i = 0; i < 32; ++i) sum_x2 = _mm256_add_ps(sum_x2, _mm256_mul_ps(xs[i], xs[i]));
    const __m256 av_x = _mm256_sqrt_ps(_mm256_div_ps(sum_x2, _mm256_set1_ps(32.f)));
    for (int i = 0; i < 32; ++i) ws[i] = _mm256_add_ps(av_x, _mm256_andnot_ps(sign, xs[i]));

    // make_qkx2_quants: the range and the weighted sums, in element order.
    __m256 min = xs[0], max = xs[0], sum_w = ws[0], sum_x = _mm256_mul_ps(ws[0], xs[0]);
    for (int i = 1; i < 32; ++i) {
        min = _mm256_min_ps(xs[i], min);  // x < min ? x : min, as `if (x < min) min = x`
        max = _mm256_max_ps(xs[i], max);
        sum_w = _mm256_add_ps(sum_w, ws[i]);
        sum_x = _mm256_add_ps(sum_x, _mm256_mul_ps(ws[i], xs[i]));
    }
    const __m256 zero = _mm256_setzero_ps();
    min = _mm256_blendv_ps(min, zero, _mm256_cmp_ps(min, zero, _CMP_GT_OQ));  // keeps -0.0, as `if (min > 0)`
    const __m256 flat = _mm256_cmp_ps(max, min, _CMP_EQ_OQ), flat_min = min;
    const __m256 fmax = _mm256_set1_ps(static_cast<float>(nmax));
    __m256 iscale = _mm256_div_ps(fmax, _mm256_sub_ps(max, min));
    __m256 scale = _mm256_div_ps(_mm256_set1_ps(1.0f), iscale);
    __m256 best_error = zero;
    for (int i = 0; i < 32; ++i) {
        best_l[i] = clamp_quant(nearest_int8(_mm256_mul_ps(iscale, _mm256_sub_ps(xs[i], min))), nmax);
        __m256 diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(scale, _mm256_cvtepi32_ps(best_l[i])), min), xs[i]);
        diff = _mm256_mul_ps(diff, diff);
        best_error = _mm256_add_ps(best_error, _mm256_mul_ps(ws[i], diff));
    }
    for (int is = 0; is <= nstep; ++is) {
        const float numerator = rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax);
        // As make_qkx2_quants: over max - min with the min of the best candidate so far.
        iscale = _mm256_div_ps(_mm256_set1_ps(numerator), _mm256_sub_ps(max, min));
        __m256 sum_l = zero, sum_l2 = zero, sum_xl = zero;
        for (int i = 0; i < 32; ++i) {
            aux_l[i] = clamp_quant(nearest_int8(_mm256_mul_ps(iscale, _mm256_sub_ps(xs[i], min))), nmax);
            const __m256 l = _mm256_cvtepi32_ps(aux_l[i]);
            const __m256 wl = _mm256_mul_ps(ws[i], l);
            sum_l = _mm256_add_ps(sum_l, wl);
            sum_l2 = _mm256_add_ps(sum_l2, _mm256_mul_ps(wl, l));
            sum_xl = _mm256_add_ps(sum_xl, _mm256_mul_ps(wl, xs[i]));
        }
        const __m256 D = _mm256_sub_ps(_mm256_mul_ps(sum_w, sum_l2), _mm256_mul_ps(sum_l, sum_l));
        const __m256 solvable = _mm256_cmp_ps(D, zero, _CMP_GT_OQ);
        if (_mm256_movemask_ps(solvable) == 0) continue;
        __m256 this_scale = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sum_w, sum_xl), _mm256_mul_ps(sum_x, sum_l)), D);
        __m256 this_min = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sum_l2, sum_x), _mm256_mul_ps(sum_l, sum_xl)), D);
        const __m256 positive = _mm256_cmp_ps(this_min, zero, _CMP_GT_OQ);
        this_min = _mm256_blendv_ps(this_min, zero, positive);
        this_scale = _mm256_blendv_ps(this_scale, _mm256_div_ps(sum_xl, sum_l2), positive);
        __m256 cur_error = zero;
        for (int i = 0; i < 32; ++i) {
            __m256 diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(this_scale, _mm256_cvtepi32_ps(aux_l[i])), this_min), xs[i]);
            diff = _mm256_mul_ps(diff, diff);
            cur_error = _mm256_add_ps(cur_error, _mm256_mul_ps(ws[i], diff));
        }
        const __m256 better = _mm256_and_ps(solvable, _mm256_cmp_ps(cur_error, best_error, _CMP_LT_OQ));
        if (_mm256_movemask_ps(better) == 0) continue;
        const __m256i take = _mm256_castps_si256(better);
        for (int i = 0; i < 32; ++i) best_l[i] = _mm256_blendv_epi8(best_l[i], aux_l[i], take);
        best_error = _mm256_blendv_ps(best_error, cur_error, better);
        scale = _mm256_blendv_ps(scale, this_scale, better);
        min = _mm256_blendv_ps(min, this_min, better);
    }
    // A flat sub-block (max == min) returns before the search: scale 0, its min, every quant 0.
    scale = _mm256_blendv_ps(scale, zero, flat);
    min = _mm256_blendv_ps(min, flat_min, flat);
    const __m256i flat_i = _mm256_castps_si256(flat);
    _mm256_storeu_ps(scales, scale);
    _mm256_storeu_ps(mins, _mm256_xor_ps(min, sign));
    alignas(32) int32_t lanes[8];
    for (int i = 0; i < 32; ++i) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_andnot_si256(flat_i, best_l[i]));
        for (int j = 0; j < 8; ++j) L[32 * j + i] = static_cast<uint8_t>(lanes[j]);
    }
}

}  // namespace ls
