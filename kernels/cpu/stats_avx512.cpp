// tensor_stats' moments and histogram on AVX-512 instructions (see stats_avx2.cpp for why each
// step is the scalar loop's IEEE operation); built without FMA contraction.
#include "kernels/cpu/stats_avx512.h"

// GCC 12's AVX-512 intrinsics start many results from _mm512_undefined_*(), which its
// -Wmaybe-uninitialized then reports at every use (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/stats_lanes_x86.h"

namespace ls {

#define LS_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2")))

namespace {

// The lanes whose value is not finite (NaN or an infinity).
LS_AVX512 inline __mmask8 not_finite(__m256 f) { return _mm256_fpclass_ps_mask(f, 0x01 | 0x08 | 0x10 | 0x80); }

}  // namespace

LS_AVX512 int64_t stats_moments_avx512(const float* v, int64_t n, StatsLanes* lanes) {
    __m512d sum = _mm512_loadu_pd(lanes->sum), sq = _mm512_loadu_pd(lanes->sumsq);
    __m256 mn = _mm256_loadu_ps(lanes->min), mx = _mm256_loadu_ps(lanes->max);
    // Counts of this call in 32 bits: a chunk has kStatsChunk values, far below their range.
    __m256i finite = _mm256_setzero_si256(), nan = _mm256_setzero_si256();
    const __m256 pos_inf = _mm256_set1_ps(INFINITY), neg_inf = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 f = _mm256_loadu_ps(v + i);
        const __mmask8 ok = static_cast<__mmask8>(~not_finite(f));
        const __m512d d = _mm512_cvtps_pd(_mm256_maskz_mov_ps(ok, f));  // non-finite values count as +0
        sum = _mm512_add_pd(sum, d);
        sq = _mm512_add_pd(sq, _mm512_mul_pd(d, d));
        // A non-finite value becomes +inf for the minimum and -inf for the maximum: never taken.
        mn = _mm256_min_ps(_mm256_mask_blend_ps(ok, pos_inf, f), mn);
        mx = _mm256_max_ps(_mm256_mask_blend_ps(ok, neg_inf, f), mx);
        finite = _mm256_sub_epi32(finite, _mm256_movm_epi32(ok));
        nan = _mm256_sub_epi32(nan, _mm256_movm_epi32(_mm256_cmp_ps_mask(f, f, _CMP_UNORD_Q)));
    }
    _mm512_storeu_pd(lanes->sum, sum);
    _mm512_storeu_pd(lanes->sumsq, sq);
    store_lane_extremes_and_counts(lanes, mn, mx, finite, nan);
    return i;
}

// histogram_axis_at and histogram_bin_on, step by step, in doubles eight at a time.
LS_AVX512 int64_t stats_histogram_avx512(const float* v, int64_t n, const HistogramAxis& axis,
                                         int32_t h[8][kHistogramBinCount + 1]) {
    const __m256 inv_scale = _mm256_set1_ps(axis.inv_scale), one = _mm256_set1_ps(1.0f);
    const __m256i one_bits = _mm256_set1_epi32(0x3f800000), scratch = _mm256_set1_epi32(kHistogramBinCount);
    const __m512d lo = _mm512_set1_pd(axis.lo), per_bin = _mm512_set1_pd(axis.per_bin);
    alignas(32) int32_t bins[8];
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 f = _mm256_loadu_ps(v + i);
        const __m256 u = _mm256_mul_ps(f, inv_scale);
        const __m256 m = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), u);  // |u|: u < 0 ? -u : u but for -0 and NaN, whose
        // bins do not change (-0 adds to +0 in the magnitude below; a NaN lands in the scratch bin)
        const __m256 above = _mm256_max_ps(m, one), below = _mm256_min_ps(m, one);
        const __m256i e = _mm256_sub_epi32(_mm256_castps_si256(above), one_bits);
        // copysign(e * 2^-23 + below, u): the magnitude is +0 or positive, so or-ing in u's sign.
        const __m512d mag = _mm512_add_pd(_mm512_mul_pd(_mm512_cvtepi32_pd(e), _mm512_set1_pd(1.0 / 8388608.0)),
                                          _mm512_cvtps_pd(below));
        const __m512d a = _mm512_or_pd(mag, _mm512_and_pd(_mm512_cvtps_pd(u), _mm512_set1_pd(-0.0)));
        const __m512d g = _mm512_mul_pd(_mm512_sub_pd(a, lo), per_bin);
        const __m512d low = _mm512_max_pd(g, _mm512_setzero_pd());  // g > 0 ? g : 0
        const __m256i b = _mm512_cvttpd_epi32(_mm512_min_pd(low, _mm512_set1_pd(kHistogramBinCount - 1)));
        // Non-finite values go to the scratch bin.
        _mm256_store_si256(reinterpret_cast<__m256i*>(bins), _mm256_mask_blend_epi32(not_finite(f), b, scratch));
        // One table per lane: a run of values in one bin does not wait on its own increments.
        for (int l = 0; l < 8; ++l) ++h[l][bins[l]];
    }
    return i;
}

}  // namespace ls
