// Backend-independent helpers: the backend factory, math mode and kind names, the histogram
// scale, and the description of what a backend supports.
#include "kernels/backend.h"

#include <algorithm>
#include <cmath>

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

int histogram_bin(const TensorStats& s, float v) { return histogram_bin_of(v, s.min, s.max, s.hist_scale); }

}  // namespace ls
