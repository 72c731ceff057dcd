// tensor_stats' moments and histogram on AVX2 instructions. Every step is the IEEE operation the
// scalar loop in kernels/backend.cpp performs, on eight values at once: maxps/minps are exactly
// `a > b ? a : b` and `a < b ? a : b`, float-to-double conversions are exact, and the file is built
// without FMA contraction, so each lane rounds as the scalar code does. Only these functions are
// compiled for AVX2 (a target attribute, so that the inline helpers of histogram.h stay baseline
// code); tensor_stats calls them only on processors that have the instructions.
#include "kernels/cpu/stats_avx2.h"

#include <immintrin.h>

#include "kernels/cpu/stats_lanes_x86.h"

namespace ls {

#define LS_AVX2 __attribute__((target("avx2")))

bool stats_avx2_usable() {
    static const bool yes = __builtin_cpu_supports("avx2");
    return yes;
}

namespace {

// All ones in the lanes whose value is finite (exponent bits not all set).
LS_AVX2 inline __m256i finite_mask(__m256 f) {
    const __m256i exponent = _mm256_set1_epi32(0x7f800000);
    return _mm256_xor_si256(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(f), exponent), exponent),
                            _mm256_set1_epi32(-1));
}

// The bins of four values from the float steps of histogram_axis_at (e: the bits of `above` less
// those of 1.0f): copysign(e * 2^-23 + below, u), then (axis - lo) * per_bin clamped to the bins.
LS_AVX2 inline __m128i bins_of(__m128i e, __m128 below, __m128 u, __m256d lo, __m256d per_bin) {
    const __m256d mag = _mm256_add_pd(_mm256_mul_pd(_mm256_cvtepi32_pd(e), _mm256_set1_pd(1.0 / 8388608.0)),
                                      _mm256_cvtps_pd(below));
    // mag is +0 or positive (e >= 0 and below is +-0 or positive), so or-ing in u's sign is copysign.
    const __m256d a = _mm256_or_pd(mag, _mm256_and_pd(_mm256_cvtps_pd(u), _mm256_set1_pd(-0.0)));
    const __m256d f = _mm256_mul_pd(_mm256_sub_pd(a, lo), per_bin);
    const __m256d low = _mm256_max_pd(f, _mm256_setzero_pd());  // f > 0 ? f : 0
    return _mm256_cvttpd_epi32(_mm256_min_pd(low, _mm256_set1_pd(kHistogramBinCount - 1)));
}

}  // namespace

// The scalar step per lane: ok = isfinite(f); d = ok ? f : 0.0; sum += d; sumsq += d * d;
// min = ok && f < min ? f : min; max likewise; finite += ok; nan += f != f.
LS_AVX2 int64_t stats_moments_avx2(const float* v, int64_t n, StatsLanes* lanes) {
    __m256d sum_lo = _mm256_loadu_pd(lanes->sum), sum_hi = _mm256_loadu_pd(lanes->sum + 4);
    __m256d sq_lo = _mm256_loadu_pd(lanes->sumsq), sq_hi = _mm256_loadu_pd(lanes->sumsq + 4);
    __m256 mn = _mm256_loadu_ps(lanes->min), mx = _mm256_loadu_ps(lanes->max);
    // Counts of this call in 32 bits: a chunk has kStatsChunk values, far below their range.
    __m256i finite = _mm256_setzero_si256(), nan = _mm256_setzero_si256();
    const __m256 pos_inf = _mm256_set1_ps(INFINITY), neg_inf = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 f = _mm256_loadu_ps(v + i);
        const __m256i ok = finite_mask(f);
        const __m256 ok_ps = _mm256_castsi256_ps(ok);
        const __m256 d = _mm256_and_ps(f, ok_ps);  // non-finite values count as +0
        const __m256d d_lo = _mm256_cvtps_pd(_mm256_castps256_ps128(d));
        const __m256d d_hi = _mm256_cvtps_pd(_mm256_extractf128_ps(d, 1));
        sum_lo = _mm256_add_pd(sum_lo, d_lo);
        sum_hi = _mm256_add_pd(sum_hi, d_hi);
        sq_lo = _mm256_add_pd(sq_lo, _mm256_mul_pd(d_lo, d_lo));
        sq_hi = _mm256_add_pd(sq_hi, _mm256_mul_pd(d_hi, d_hi));
        // A non-finite value becomes +inf for the minimum and -inf for the maximum: never taken.
        mn = _mm256_min_ps(_mm256_blendv_ps(pos_inf, f, ok_ps), mn);
        mx = _mm256_max_ps(_mm256_blendv_ps(neg_inf, f, ok_ps), mx);
        finite = _mm256_sub_epi32(finite, ok);
        nan = _mm256_sub_epi32(nan, _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)));
    }
    _mm256_storeu_pd(lanes->sum, sum_lo);
    _mm256_storeu_pd(lanes->sum + 4, sum_hi);
    _mm256_storeu_pd(lanes->sumsq, sq_lo);
    _mm256_storeu_pd(lanes->sumsq + 4, sq_hi);
    store_lane_extremes_and_counts(lanes, mn, mx, finite, nan);
    return i;
}

// histogram_axis_at and histogram_bin_on, step by step, in doubles four at a time.
LS_AVX2 int64_t stats_histogram_avx2(const float* v, int64_t n, const HistogramAxis& axis,
                                     int32_t h[8][kHistogramBinCount + 1]) {
    const __m256 inv_scale = _mm256_set1_ps(axis.inv_scale), one = _mm256_set1_ps(1.0f), zero_ps = _mm256_setzero_ps();
    const __m256 sign_ps = _mm256_set1_ps(-0.0f);
    const __m256i one_bits = _mm256_set1_epi32(0x3f800000), scratch = _mm256_set1_epi32(kHistogramBinCount);
    const __m256d lo = _mm256_set1_pd(axis.lo), per_bin = _mm256_set1_pd(axis.per_bin);
    alignas(32) int32_t bins[8];
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 f = _mm256_loadu_ps(v + i);
        const __m256 u = _mm256_mul_ps(f, inv_scale);
        const __m256 m = _mm256_blendv_ps(u, _mm256_xor_ps(u, sign_ps), _mm256_cmp_ps(u, zero_ps, _CMP_LT_OQ));
        const __m256 above = _mm256_max_ps(m, one), below = _mm256_min_ps(m, one);
        const __m256i e = _mm256_sub_epi32(_mm256_castps_si256(above), one_bits);
        const __m128i b_lo =
            bins_of(_mm256_castsi256_si128(e), _mm256_castps256_ps128(below), _mm256_castps256_ps128(u), lo, per_bin);
        const __m128i b_hi =
            bins_of(_mm256_extracti128_si256(e, 1), _mm256_extractf128_ps(below, 1), _mm256_extractf128_ps(u, 1), lo, per_bin);
        // Non-finite values go to the scratch bin.
        const __m256i b = _mm256_blendv_epi8(scratch, _mm256_set_m128i(b_hi, b_lo), finite_mask(f));
        _mm256_store_si256(reinterpret_cast<__m256i*>(bins), b);
        // One table per lane: a run of values in one bin does not wait on its own increments.
        for (int l = 0; l < 8; ++l) ++h[l][bins[l]];
    }
    return i;
}

}  // namespace ls
