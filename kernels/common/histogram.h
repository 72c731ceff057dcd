// The histogram bin of a value, shared by the CPU's stats and the CUDA histogram kernel so that
// both count the same values in the same bins. The axis over [min, max] is linear within +-scale
// (the bulk of a tensor) and logarithmic beyond (its outliers): for u = v / scale it is u itself
// where |u| <= 1, and sign(u) * (1 + log2~|u|) beyond, where log2~ is the piecewise-linear log2
// that a float's bits give (exponent plus mantissa fraction). Only exact IEEE operations and bit
// arithmetic, so every backend computes the same bins, at a few instructions per value.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/common/hd.h"

namespace ls {

inline constexpr int kHistogramBinCount = 64;

// A tensor's RMS from the sum of squares of its `finite` finite values (in double), and the scale
// its histogram is binned by: that RMS rounded to float, 1 when it is 0. The CPU's stats, the CUDA
// histogram kernel and the CUDA backend's host side take both from here, so they bin alike.
LS_HD inline double histogram_rms(double sumsq, double finite) { return sqrt(sumsq / finite); }
LS_HD inline float histogram_scale(double rms) { return rms > 0 ? static_cast<float>(rms) : 1.0f; }

struct HistogramAxis {
    double lo, hi;   // the axis at min and max
    double per_bin;  // bins per unit of axis (0 when min and max coincide on the axis)
    float inv_scale;
};

// Written without branches (max, min and copysign): |u| <= 1 gives log2~ 0 plus |u|, |u| > 1
// gives log2~|u| plus 1.
LS_HD inline double histogram_axis_at(float v, float inv_scale) {
    const float u = v * inv_scale;
    const float m = u < 0 ? -u : u;
    const float above = m > 1.0f ? m : 1.0f, below = m < 1.0f ? m : 1.0f;
    uint32_t bits;
#if defined(__CUDA_ARCH__)
    bits = __float_as_uint(above);
#else
    std::memcpy(&bits, &above, sizeof bits);
#endif
    const double mag = static_cast<double>(static_cast<int32_t>(bits) - 0x3f800000) * (1.0 / 8388608.0) + below;
    return copysign(mag, static_cast<double>(u));
}

LS_HD inline HistogramAxis histogram_axis(float min, float max, float scale) {
    HistogramAxis a;
    a.inv_scale = 1.0f / scale;
    a.lo = histogram_axis_at(min, a.inv_scale);
    a.hi = histogram_axis_at(max, a.inv_scale);
    a.per_bin = a.hi > a.lo ? kHistogramBinCount / (a.hi - a.lo) : 0.0;
    return a;
}

LS_HD inline int histogram_bin_on(const HistogramAxis& a, float v) {
    const double f = (histogram_axis_at(v, a.inv_scale) - a.lo) * a.per_bin;
    const double low = f > 0.0 ? f : 0.0;
    return static_cast<int>(low < kHistogramBinCount - 1 ? low : kHistogramBinCount - 1);
}

LS_HD inline int histogram_bin_of(float v, float min, float max, float scale) {
    return histogram_bin_on(histogram_axis(min, max, scale), v);
}

}  // namespace ls
