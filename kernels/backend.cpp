// Backend-independent helpers: the backend factory, math mode and kind names, the histogram
// scale, and the description of what a backend supports.
#include "kernels/backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/common/histogram.h"
#include "kernels/cuda/loader.h"

namespace ls {

std::unique_ptr<Backend> make_cpu_backend_generic(int n_threads);
#if defined(LS_HAVE_CPU_FMA_VARIANT)
std::unique_ptr<Backend> make_cpu_backend_fma(int n_threads);
#endif
// kernels/cuda/cuda_backend.cu compiled as C++ against the SIMT emulator (every build has it).
std::unique_ptr<Backend> make_cuda_emulated_backend(const BackendOptions& options);

std::unique_ptr<Backend> make_cpu_backend(int n_threads) {
#if defined(LS_HAVE_CPU_FMA_VARIANT)
    if (__builtin_cpu_supports("fma")) return make_cpu_backend_fma(n_threads);
#endif
    return make_cpu_backend_generic(n_threads);
}

MadeBackend make_backend(BackendKind kind, const BackendOptions& options) {
    switch (kind) {
        case BackendKind::kCpu: return {make_cpu_backend(options.n_threads), ""};
        case BackendKind::kCudaEmulated: return {make_cuda_emulated_backend(options), ""};
        case BackendKind::kCuda: {
            CudaModuleBackend made = create_cuda_module_backend(options);
            return {std::move(made.backend), made.why_not};
        }
        case BackendKind::kAuto: {
            CudaModuleBackend made = create_cuda_module_backend(options);
            if (made.backend) return {std::move(made.backend), ""};
            return {make_cpu_backend(options.n_threads), "CPU: " + made.why_not};
        }
    }
    return {nullptr, "unknown backend kind"};
}

const char* backend_kind_name(BackendKind kind) {
    switch (kind) {
        case BackendKind::kCpu: return "cpu";
        case BackendKind::kCuda: return "cuda";
        case BackendKind::kCudaEmulated: return "cuda-emulated";
        case BackendKind::kAuto: return "auto";
    }
    return "?";
}

bool backend_kind_from_name(const std::string& name, BackendKind* out) {
    for (BackendKind k : {BackendKind::kCpu, BackendKind::kCuda, BackendKind::kCudaEmulated, BackendKind::kAuto})
        if (name == backend_kind_name(k)) {
            *out = k;
            return true;
        }
    return false;
}

std::string describe_support(const Backend& backend, MathMode mode) {
    // Ops that read weights list the weight types they take; the others take f32.
    static const GgmlType kWeightTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                                            GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                            GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                            GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS};
    std::string out;
    for (size_t i = 1; i < static_cast<size_t>(Op::kCount); ++i) {
        const Op op = static_cast<Op>(i);
        std::string types;
        if (op == Op::kGetRows || op == Op::kMulMat || op == Op::kMulMatId) {
            for (GgmlType t : kWeightTypes)
                if (backend.supports(op, mode, t)) types += (types.empty() ? "" : ", ") + std::string(ggml_type_name(t));
            if (types.empty()) continue;
        } else if (!backend.supports(op, mode)) {
            continue;
        }
        if (!out.empty()) out += "; ";
        out += op_name(op);
        if (!types.empty()) out += " (" + types + ")";
    }
    return out.empty() ? "nothing" : out;
}

const char* llama_isa_name(LlamaIsa isa) {
    switch (isa) {
        case LlamaIsa::kAvx2: return "avx2";
        case LlamaIsa::kAvx512: return "avx512";
        case LlamaIsa::kAvx512Fp16: return "avx512-fp16";
    }
    return "?";
}

bool llama_isa_from_name(const std::string& name, LlamaIsa* out) {
    for (LlamaIsa isa : {LlamaIsa::kAvx2, LlamaIsa::kAvx512, LlamaIsa::kAvx512Fp16})
        if (name == llama_isa_name(isa)) {
            *out = isa;
            return true;
        }
    return false;
}

LlamaIsa host_llama_isa() {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) return __builtin_cpu_supports("avx512fp16") ? LlamaIsa::kAvx512Fp16 : LlamaIsa::kAvx512;
#endif
    return LlamaIsa::kAvx2;
}

const char* math_mode_name(MathMode mode) { return mode == MathMode::kExact ? "exact" : "llama"; }

bool math_mode_from_name(const std::string& name, MathMode* out) {
    if (name == "exact") *out = MathMode::kExact;
    else if (name == "llama") *out = MathMode::kLlama;
    else return false;
    return true;
}

namespace {

// Floats as integers in the same order (for bisection over the floats between two values).
int64_t ordered_key(float f) {
    int32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits >= 0 ? bits : -static_cast<int64_t>(bits & 0x7fffffff);
}
float from_ordered_key(int64_t k) {
    const int32_t bits = k >= 0 ? static_cast<int32_t>(k) : static_cast<int32_t>((-k) | 0x80000000u);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

}  // namespace

// Every step of histogram_bin_of is monotonic in the value, so bins never decrease: a bisection
// over the floats finds each edge, and counting the edges at or below a value bins it exactly as
// histogram_bin_of does, without an asinh per value.
void histogram_edges(float mn, float mx, float scale, float edges[kHistogramBins]) {
    edges[0] = -INFINITY;
    for (int k = 1; k < kHistogramBins; ++k) {
        if (histogram_bin_of(mx, mn, mx, scale) < k) {
            edges[k] = INFINITY;
            continue;
        }
        int64_t lo = ordered_key(mn), hi = ordered_key(mx);  // bin(lo) < k <= bin(hi), or lo is the edge
        if (histogram_bin_of(mn, mn, mx, scale) >= k) {
            edges[k] = mn;
            continue;
        }
        // Start from the edge the inverse of the axis gives (exact to a few ulps), widening the
        // bracket around it until it holds, then bisect.
        const double a_lo = std::asinh(static_cast<double>(mn) / scale), a_hi = std::asinh(static_cast<double>(mx) / scale);
        const float guess = static_cast<float>(scale * std::sinh(a_lo + (a_hi - a_lo) * k / kHistogramBins));
        if (guess > mn && guess < mx) {
            const int64_t g = ordered_key(guess);
            for (int64_t step = 4; step < (int64_t{1} << 40); step *= 16) {
                const int64_t l = std::max(lo, g - step), h = std::min(hi, g + step);
                if (histogram_bin_of(from_ordered_key(l), mn, mx, scale) < k &&
                    histogram_bin_of(from_ordered_key(h), mn, mx, scale) >= k) {
                    lo = l, hi = h;
                    break;
                }
            }
        }
        while (hi - lo > 1) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (histogram_bin_of(from_ordered_key(mid), mn, mx, scale) >= k) hi = mid;
            else lo = mid;
        }
        edges[k] = from_ordered_key(hi);
    }
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
        if (n < 4096) {
            for (int64_t i = 0; i < n; ++i)
                if (std::isfinite(v[i])) ++s.hist[histogram_bin(s, v[i])];
        } else {
            // Large tensors: compare with the 63 edges instead of an asinh per value.
            float edges[kHistogramBins];
            histogram_edges(s.min, s.max, s.hist_scale, edges);
            for (int64_t i = 0; i < n; ++i)
                if (std::isfinite(v[i])) ++s.hist[std::upper_bound(edges + 1, edges + kHistogramBins, v[i]) - (edges + 1)];
        }
    }
    return s;
}

static double to_axis(const TensorStats& s, double v) { return std::asinh(v / s.hist_scale); }

float histogram_bin_edge(const TensorStats& s, int k) {
    double lo = to_axis(s, s.min), hi = to_axis(s, s.max);
    double a = lo + (hi - lo) * k / kHistogramBins;
    return static_cast<float>(s.hist_scale * std::sinh(a));
}

int histogram_bin(const TensorStats& s, float v) { return histogram_bin_of(v, s.min, s.max, s.hist_scale); }

}  // namespace ls
