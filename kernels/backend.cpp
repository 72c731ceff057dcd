// Backend-independent helpers: math mode names and the histogram scale.
#include "backend.h"

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
