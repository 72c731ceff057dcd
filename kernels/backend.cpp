// Backend-independent helpers: math mode names and the histogram scale.
#include "kernels/backend.h"

#include <algorithm>
#include <cmath>

namespace ls {

std::unique_ptr<Backend> make_cpu_backend_generic(int n_threads);
#if defined(LS_HAVE_CPU_FMA_VARIANT)
std::unique_ptr<Backend> make_cpu_backend_fma(int n_threads);
#endif

std::unique_ptr<Backend> make_cpu_backend(int n_threads) {
#if defined(LS_HAVE_CPU_FMA_VARIANT)
    if (__builtin_cpu_supports("fma")) return make_cpu_backend_fma(n_threads);
#endif
    return make_cpu_backend_generic(n_threads);
}

const char* math_mode_name(MathMode mode) { return mode == MathMode::kExact ? "exact" : "llama"; }

bool math_mode_from_name(const std::string& name, MathMode* out) {
    if (name == "exact") *out = MathMode::kExact;
    else if (name == "llama") *out = MathMode::kLlama;
    else return false;
    return true;
}

TensorStats tensor_stats(const float* v, int64_t n) {
    TensorStats s;
    s.count = n;
    double sum = 0, sumsq = 0;
    int64_t finite = 0;
    float mn = INFINITY, mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
        const float f = v[i];
        if (std::isnan(f)) { ++s.nan_count; continue; }
        if (std::isinf(f)) { ++s.inf_count; continue; }
        ++finite;
        sum += f;
        sumsq += static_cast<double>(f) * f;
        mn = std::min(mn, f);
        mx = std::max(mx, f);
    }
    if (finite > 0) {
        s.min = mn, s.max = mx;
        s.mean = sum / finite;
        s.rms = std::sqrt(sumsq / finite);
        s.hist_scale = s.rms > 0 ? static_cast<float>(s.rms) : 1.0f;
        for (int64_t i = 0; i < n; ++i)
            if (std::isfinite(v[i])) ++s.hist[histogram_bin(s, v[i])];
    }
    return s;
}

static double to_axis(const TensorStats& s, double v) { return std::asinh(v / s.hist_scale); }

float histogram_bin_edge(const TensorStats& s, int k) {
    double lo = to_axis(s, s.min), hi = to_axis(s, s.max);
    double a = lo + (hi - lo) * k / kHistogramBins;
    return static_cast<float>(s.hist_scale * std::sinh(a));
}

int histogram_bin(const TensorStats& s, float v) {
    double lo = to_axis(s, s.min), hi = to_axis(s, s.max);
    if (!(hi > lo)) return 0;
    double f = (to_axis(s, v) - lo) / (hi - lo) * kHistogramBins;
    return static_cast<int>(std::clamp(f, 0.0, static_cast<double>(kHistogramBins - 1)));
}

}  // namespace ls
