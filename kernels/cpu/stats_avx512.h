// The two passes of tensor_stats on AVX-512 instructions: the steps of stats_avx2.h (the same IEEE
// operations in the same order as the scalar loops, eight lanes), with the eight lanes' doubles in
// one register instead of two. Callers check the processor first (avx512_kernels_usable).
#pragma once

#include <cstdint>

#include "kernels/common/histogram.h"
#include "kernels/cpu/stats_avx2.h"

namespace ls {

int64_t stats_moments_avx512(const float* v, int64_t n, StatsLanes* lanes);
int64_t stats_histogram_avx512(const float* v, int64_t n, const HistogramAxis& axis,
                               int32_t h[8][kHistogramBinCount + 1]);

}  // namespace ls
