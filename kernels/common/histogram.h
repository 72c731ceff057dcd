// The histogram bin of a value, shared by the CPU's stats and the CUDA histogram kernel so that
// both count the same values in the same bins: an asinh axis over [min, max], linear within about
// +-scale (the bulk of a tensor) and logarithmic beyond (its outliers).
#pragma once

#include <cmath>

#include "kernels/common/hd.h"

namespace ls {

inline constexpr int kHistogramBinCount = 64;

LS_HD inline int histogram_bin_of(float v, float min, float max, float scale) {
    const double lo = asinh(static_cast<double>(min) / scale), hi = asinh(static_cast<double>(max) / scale);
    if (!(hi > lo)) return 0;
    const double f = (asinh(static_cast<double>(v) / scale) - lo) / (hi - lo) * kHistogramBinCount;
    if (!(f > 0.0)) return 0;
    return f >= kHistogramBinCount - 1 ? kHistogramBinCount - 1 : static_cast<int>(f);
}

}  // namespace ls
