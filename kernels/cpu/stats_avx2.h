// The two passes of tensor_stats (kernels/backend.cpp) on AVX2 instructions: the same IEEE
// operations in the same order as the scalar loops, so the statistics and the histogram are
// identical bit for bit, at a fraction of the time per value. Callers check the processor first.
#pragma once

#include <cstdint>

#include "kernels/common/histogram.h"

namespace ls {

// Whether the processor has AVX2.
bool stats_avx2_usable();

// The eight lanes of a chunk's moments: lane l takes values l, l + 8, l + 16, ...
struct StatsLanes {
    double sum[8], sumsq[8];
    float min[8], max[8];  // over finite values
    int64_t finite[8];
    int64_t nan;
};

// Adds values [0, n rounded down to a multiple of 8) to the lanes, each exactly as the scalar loop
// adds it; returns how many it took (the caller takes the rest, into lanes 0, 1, ...).
int64_t stats_moments_avx2(const float* v, int64_t n, StatsLanes* lanes);

// Counts the finite values among the first n (rounded down to a multiple of 8) in h[i % 8][bin],
// the bin as histogram_bin_on(axis, value) gives it; returns how many it took.
// h[.][kHistogramBinCount] is scratch (the non-finite values land there).
int64_t stats_histogram_avx2(const float* v, int64_t n, const HistogramAxis& axis, int32_t h[8][kHistogramBinCount + 1]);

}  // namespace ls
