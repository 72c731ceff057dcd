// The end the AVX2 and AVX-512 moment loops share (stats_avx2.cpp, stats_avx512.cpp): included by
// those two files only, whose functions are compiled for AVX2 or more.
#pragma once

#include <immintrin.h>

#include "kernels/cpu/stats_avx2.h"

namespace ls {

// The running minimum and maximum of the eight lanes stored into `lanes`, and this call's counts
// (32 bits a lane) added to its 64-bit ones.
__attribute__((target("avx2"))) inline void store_lane_extremes_and_counts(StatsLanes* lanes, __m256 mn, __m256 mx,
                                                                           __m256i finite, __m256i nan) {
    _mm256_storeu_ps(lanes->min, mn);
    _mm256_storeu_ps(lanes->max, mx);
    alignas(32) int32_t fin[8], nans[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(fin), finite);
    _mm256_store_si256(reinterpret_cast<__m256i*>(nans), nan);
    for (int l = 0; l < 8; ++l) lanes->finite[l] += fin[l], lanes->nan += nans[l];
}

}  // namespace ls
