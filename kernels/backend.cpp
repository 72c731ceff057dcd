// Backend-independent helpers: the backend factory, math mode and kind names, the histogram
// scale, and the description of what a backend supports.
#include "kernels/backend.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "kernels/common/histogram.h"
#include "kernels/cpu/stats_avx2.h"
#include "kernels/cpu/stats_avx512.h"
#include "kernels/cpu/vec_dot_avx512.h"
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
                                            GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::TQ1_0,
                                            GgmlType::TQ2_0, GgmlType::MXFP4, GgmlType::NVFP4};
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
    if (__builtin_cpu_supports("avx512f")) {
        // AVX512-FP16 is CPUID leaf 7 EDX bit 23, asked directly: clang 14 has no name for it.
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        const bool fp16 = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx >> 23 & 1);
        return fp16 ? LlamaIsa::kAvx512Fp16 : LlamaIsa::kAvx512;
    }
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

// Moments of one chunk: lane l takes values l, l + 8, ...; the lanes are then summed pairwise.
struct Moments {
    double sum = 0, sumsq = 0;
    float mn = INFINITY, mx = -INFINITY;
    int64_t finite = 0, nan = 0;
};

// Which loops tensor_stats runs: AVX-512 or AVX2 ones give the same results, bit for bit, in less
// time than the plain ones.
enum class StatsLoops { kPlain, kAvx2, kAvx512 };

StatsLoops stats_loops(bool scalar_only) {
#if defined(LS_HAVE_STATS_AVX2)
    if (scalar_only) return StatsLoops::kPlain;
    if (avx512_kernels_usable()) return StatsLoops::kAvx512;
    return stats_avx2_usable() ? StatsLoops::kAvx2 : StatsLoops::kPlain;
#else
    (void)scalar_only;
    return StatsLoops::kPlain;
#endif
}

Moments chunk_moments(const float* v, int64_t n, StatsLoops loops) {
    StatsLanes lanes{};
    for (int l = 0; l < 8; ++l) lanes.min[l] = INFINITY, lanes.max[l] = -INFINITY;
    auto take = [&](int l, float f) {
        const bool ok = std::isfinite(f);
        const double d = ok ? f : 0.0;
        lanes.sum[l] += d;
        lanes.sumsq[l] += d * d;
        lanes.min[l] = ok && f < lanes.min[l] ? f : lanes.min[l];
        lanes.max[l] = ok && f > lanes.max[l] ? f : lanes.max[l];
        lanes.finite[l] += ok;
        lanes.nan += f != f;
    };
    int64_t i = 0;
#if defined(LS_HAVE_STATS_AVX2)
    if (loops == StatsLoops::kAvx512) i = stats_moments_avx512(v, n, &lanes);
    if (loops == StatsLoops::kAvx2) i = stats_moments_avx2(v, n, &lanes);
#else
    (void)loops;
#endif
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; ++l) take(l, v[i + l]);
    for (int l = 0; i < n; ++i, ++l) take(l, v[i]);
    const double* sum = lanes.sum;
    const double* sq = lanes.sumsq;
    Moments m;
    m.sum = ((sum[0] + sum[1]) + (sum[2] + sum[3])) + ((sum[4] + sum[5]) + (sum[6] + sum[7]));
    m.sumsq = ((sq[0] + sq[1]) + (sq[2] + sq[3])) + ((sq[4] + sq[5]) + (sq[6] + sq[7]));
    for (int l = 0; l < 8; ++l) {
        m.mn = lanes.min[l] < m.mn ? lanes.min[l] : m.mn;
        m.mx = lanes.max[l] > m.mx ? lanes.max[l] : m.mx;
        m.finite += lanes.finite[l];
    }
    m.nan = lanes.nan;
    return m;
}

// Counts the finite values of a chunk; several tables, so that runs of one bin do not wait on each
// other's increments (four in the plain loop, eight in the AVX2 one). Column kHistogramBins is
// scratch for the AVX2 loop's non-finite values.
void chunk_histogram(const float* v, int64_t n, const HistogramAxis& axis, StatsLoops loops,
                     int64_t out[kHistogramBins]) {
    int32_t h[8][kHistogramBins + 1] = {};
    int64_t i = 0;
#if defined(LS_HAVE_STATS_AVX2)
    if (loops == StatsLoops::kAvx512) i = stats_histogram_avx512(v, n, axis, h);
    if (loops == StatsLoops::kAvx2) i = stats_histogram_avx2(v, n, axis, h);
#else
    (void)loops;
#endif
    for (; i < n; ++i) {
        const float f = v[i];
        if (std::isfinite(f)) ++h[i & 3][histogram_bin_on(axis, f)];
    }
    for (int k = 0; k < kHistogramBins; ++k)
        for (int t = 0; t < 8; ++t) out[k] += h[t][k];
}

TensorStats stats_of(const float* v, int64_t n, const ParallelChunks& parallel, bool scalar_only) {
    const StatsLoops loops = stats_loops(scalar_only);
    TensorStats s;
    s.count = n;
    if (n <= 0) return s;
    const int64_t n_chunks = (n + kStatsChunk - 1) / kStatsChunk;
    auto run = [&](const std::function<void(int64_t, int64_t)>& fn) {
        if (parallel && n_chunks > 1) parallel(n_chunks, fn);
        else fn(0, n_chunks);
    };
    auto chunk_size = [&](int64_t c) { return std::min(kStatsChunk, n - c * kStatsChunk); };
    std::vector<Moments> parts(static_cast<size_t>(n_chunks));
    run([&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) parts[c] = chunk_moments(v + c * kStatsChunk, chunk_size(c), loops);
    });
    double sum = 0, sumsq = 0;
    int64_t finite = 0;
    float mn = INFINITY, mx = -INFINITY;
    for (const Moments& m : parts) {
        sum += m.sum, sumsq += m.sumsq, finite += m.finite, s.nan_count += m.nan;
        mn = m.mn < mn ? m.mn : mn;
        mx = m.mx > mx ? m.mx : mx;
    }
    s.inf_count = n - finite - s.nan_count;
    if (finite == 0) return s;
    s.min = mn, s.max = mx;
    s.mean = sum / finite;
    s.rms = histogram_rms(sumsq, static_cast<double>(finite));
    s.hist_scale = histogram_scale(s.rms);
    const HistogramAxis axis = histogram_axis(s.min, s.max, s.hist_scale);
    std::vector<std::array<int64_t, kHistogramBins>> hists(static_cast<size_t>(n_chunks));
    run([&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) {
            hists[c].fill(0);
            chunk_histogram(v + c * kStatsChunk, chunk_size(c), axis, loops, hists[c].data());
        }
    });
    for (const auto& h : hists)
        for (int k = 0; k < kHistogramBins; ++k) s.hist[k] += h[k];
    return s;
}

}  // namespace

TensorStats tensor_stats(const float* v, int64_t n, const ParallelChunks& parallel) {
    return stats_of(v, n, parallel, false);
}

TensorStats tensor_stats_scalar(const float* v, int64_t n) { return stats_of(v, n, {}, true); }

float histogram_bin_edge(const TensorStats& s, int k) {
    const HistogramAxis axis = histogram_axis(s.min, s.max, s.hist_scale);
    const double a = axis.lo + (axis.hi - axis.lo) * k / kHistogramBins;
    const double m = a < 0 ? -a : a;
    double u = m;
    if (m > 1.0) {  // invert the piecewise-linear log2: exponent, then mantissa fraction
        const double l = m - 1.0;
        const double e = std::floor(l);
        u = std::ldexp(1.0 + (l - e), static_cast<int>(e));
    }
    return static_cast<float>((a < 0 ? -u : u) * s.hist_scale);
}

int histogram_bin(const TensorStats& s, float v) { return histogram_bin_of(v, s.min, s.max, s.hist_scale); }

}  // namespace ls
