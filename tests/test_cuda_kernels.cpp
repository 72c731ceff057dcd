// The CUDA backend's element-wise, normalisation and RoPE kernels on the SIMT emulator, against the
// CPU backend in the same math mode, at the real layer sizes of TinyLlama-1.1B, Qwen2.5-0.5B and
// DeepSeek-V2-Lite and at edge sizes, under the forward and random schedules. And the proof that
// the tests catch broken block reductions: RMS_NORM with a barrier left out, or with a warp
// shuffle reduction that stops one step early, gives wrong rows under every schedule tests use.
#include "kernels/backend.h"
#include "kernels/cuda/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace ls {
namespace {

using simt::Schedule;

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

// A tensor on a backend, filled from the host (f32 or i32 values), freed at scope exit.
class Dev {
public:
    Dev(Backend& be, Tensor shape, const void* host = nullptr) : be_(be), t_(shape) {
        t_.data = be_.alloc(t_.n_bytes());
        if (host) be_.upload(t_.data, host, t_.n_bytes());
    }
    ~Dev() { be_.release(t_.data); }
    Dev(const Dev&) = delete;
    Dev& operator=(const Dev&) = delete;
    Tensor& t() { return t_; }
    std::vector<float> floats() const {
        std::vector<float> v(static_cast<size_t>(t_.n_elements()));
        be_.download(v.data(), t_.data, v.size() * sizeof(float));
        return v;
    }

private:
    Backend& be_;
    Tensor t_;
};

// Distance in units in the last place between two finite floats of the same sign, or a large
// number when they differ in sign or finiteness.
int64_t ulps(float a, float b) {
    if (a == b) return 0;
    if (!std::isfinite(a) || !std::isfinite(b) || std::signbit(a) != std::signbit(b)) return 1 << 30;
    int32_t ia, ib;
    std::memcpy(&ia, &a, 4);
    std::memcpy(&ib, &b, 4);
    return std::llabs(static_cast<int64_t>(ia) - ib);
}

using OpRun = std::function<std::vector<float>(Backend&, MathMode)>;

class CudaKernels : public ::testing::TestWithParam<Schedule> {
protected:
    static void SetUpTestSuite() {
        cpu_ = make_cpu_backend(2).release();
        cuda_ = make_backend(BackendKind::kCudaEmulated, BackendOptions{2}).backend.release();
    }
    static void TearDownTestSuite() {
        delete cpu_;
        delete cuda_;
    }
    void SetUp() override {
        ASSERT_NE(cuda_, nullptr);
        simt::set_schedule(GetParam(), 4242);
    }
    void TearDown() override { simt::set_schedule(Schedule::Forward); }

    // Runs `op` on both backends in both math modes; the results may differ by at most max_ulps.
    // exact_nmse >= 0: exact mode is held to that NMSE instead (see RopeEqualsTheCpu).
    static void expect_same_as_cpu(const std::string& what, int64_t max_ulps, const OpRun& op, double exact_nmse = -1) {
        for (MathMode mode : {MathMode::kExact, MathMode::kLlama}) {
            const std::vector<float> want = op(*cpu_, mode), got = op(*cuda_, mode);
            ASSERT_EQ(got.size(), want.size()) << what;
            if (mode == MathMode::kExact && exact_nmse >= 0) {
                double err = 0, norm = 0;
                for (size_t i = 0; i < want.size(); ++i) {
                    err += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
                    norm += static_cast<double>(want[i]) * want[i];
                }
                EXPECT_LE(err / norm, exact_nmse) << what << " (exact) under " << simt::schedule_name(GetParam());
                continue;
            }
            int64_t worst = 0;
            size_t worst_at = 0;
            for (size_t i = 0; i < want.size(); ++i) {
                const int64_t u = ulps(got[i], want[i]);
                if (u > worst) worst = u, worst_at = i;
            }
            EXPECT_LE(worst, max_ulps) << what << " (" << math_mode_name(mode) << ") under "
                                       << simt::schedule_name(GetParam()) << ": value " << worst_at << " is "
                                       << got[worst_at] << ", the CPU's " << want[worst_at];
        }
    }

    static Backend* cpu_;
    static Backend* cuda_;
};
Backend* CudaKernels::cpu_ = nullptr;
Backend* CudaKernels::cuda_ = nullptr;

// Rows shorter than a warp, of one warp and a bit, not a multiple of the 256-thread block, and the
// hidden and FFN sizes of the three models. The CPU sums the squares in double in order, the block
// in a tree: the f32 mean may round differently, by one ulp at most.
TEST_P(CudaKernels, RmsNormMatchesTheCpu) {
    for (auto [n_, rows_] : {std::pair<int64_t, int64_t>{1, 2}, {7, 3}, {33, 4}, {300, 3}, {896, 5}, {2048, 3},
                           {4864, 2}, {5632, 2}}) {
        const int64_t n = n_, rows = rows_;  // clang 14 lambdas cannot capture structured bindings
        const std::vector<float> x = randn(n * rows, 5, 3.0f);
        expect_same_as_cpu("rms_norm " + std::to_string(n) + "x" + std::to_string(rows), 1, [&](Backend& be, MathMode) {
            Dev in(be, make_tensor(nullptr, n, rows), x.data()), y(be, make_tensor(nullptr, n, rows));
            be.rms_norm(in.t(), 1e-6f, y.t());
            return y.floats();
        });
    }
}

TEST_P(CudaKernels, MulAddAndMergeHeadsEqualTheCpu) {
    for (auto [n_, rows_] : {std::pair<int64_t, int64_t>{1, 1}, {7, 3}, {300, 3}, {896, 4}, {2048, 2}, {5632, 2}}) {
        const int64_t n = n_, rows = rows_;  // clang 14 lambdas cannot capture structured bindings
        const std::vector<float> a = randn(n * rows, 6), b = randn(n * rows, 7), w = randn(n, 8);
        const std::string size = std::to_string(n) + "x" + std::to_string(rows);
        expect_same_as_cpu("mul_row " + size, 0, [&](Backend& be, MathMode) {
            Dev x(be, make_tensor(nullptr, n, rows), a.data()), row(be, make_tensor(nullptr, n), w.data());
            Dev y(be, make_tensor(nullptr, n, rows));
            be.mul_row(x.t(), row.t(), y.t());
            return y.floats();
        });
        for (bool one_row : {false, true})
            expect_same_as_cpu("add " + size + (one_row ? " + one row" : ""), 0, [&](Backend& be, MathMode) {
                Dev x(be, make_tensor(nullptr, n, rows), a.data());
                Dev other(be, make_tensor(nullptr, n, one_row ? 1 : rows), one_row ? w.data() : b.data());
                Dev y(be, make_tensor(nullptr, n, rows));
                be.add(x.t(), other.t(), y.t());
                return y.floats();
            });
    }
    // {head_dim, T, n_head}: stories260K, TinyLlama, Qwen2.5-0.5B, DeepSeek-V2-Lite's value heads.
    for (auto [hd_, T_, heads_] : {std::tuple<int64_t, int64_t, int64_t>{8, 5, 8}, {64, 3, 32}, {64, 2, 14}, {128, 2, 16}}) {
        const int64_t hd = hd_, T = T_, heads = heads_;  // clang 14 lambdas cannot capture structured bindings
        const std::vector<float> x = randn(hd * T * heads, 9);
        expect_same_as_cpu("merge_heads " + std::to_string(hd) + "x" + std::to_string(T) + "x" + std::to_string(heads), 0,
                           [&](Backend& be, MathMode) {
                               Dev in(be, make_tensor(nullptr, hd, T, heads), x.data());
                               Dev y(be, make_tensor(nullptr, hd * heads, T));
                               be.merge_heads(in.t(), y.t());
                               return y.floats();
                           });
    }
}

// Exact mode, and llama mode as both llama.cpp CPU builds compute it (8- and 16-lane groups, the
// rest of each row with expf): rows shorter than a group, with partial groups, and the FFN sizes.
TEST_P(CudaKernels, SwigluEqualsTheCpuForEachLlamaBuild) {
    for (LlamaIsa isa : {LlamaIsa::kAvx2, LlamaIsa::kAvx512}) {
        cpu_->set_llama_isa(isa);
        cuda_->set_llama_isa(isa);
        for (auto [n_, rows_] : {std::pair<int64_t, int64_t>{5, 2}, {17, 3}, {33, 2}, {1408, 3}, {4864, 2}, {5632, 2}}) {
            const int64_t n = n_, rows = rows_;  // clang 14 lambdas cannot capture structured bindings
            std::vector<float> g = randn(n * rows, 10, 4.0f);
            g[0] = -100.0f;  // exp(100) overflows the polynomial's range: ggml's large-|n| path
            const std::vector<float> u = randn(n * rows, 11);
            expect_same_as_cpu(std::string("swiglu ") + llama_isa_name(isa) + " " + std::to_string(n) + "x" +
                                   std::to_string(rows),
                               0, [&](Backend& be, MathMode mode) {
                                   Dev tg(be, make_tensor(nullptr, n, rows), g.data()), tu(be, make_tensor(nullptr, n, rows), u.data());
                                   Dev y(be, make_tensor(nullptr, n, rows));
                                   be.swiglu(tg.t(), tu.t(), y.t(), mode);
                                   return y.floats();
                               });
        }
    }
    cpu_->set_llama_isa(host_llama_isa());
    cuda_->set_llama_isa(host_llama_isa());
}

// NORM (TinyLlama), NEOX with base 1e6 (Qwen2.5-0.5B, its 2 KV heads too), YaRN as DeepSeek-V2-Lite
// sets it (its 16 query heads and the one shared k_pe head), a partial rotation, and heads of 256
// (more pairs than the block's threads). Llama mode is the same bits. Exact mode is held to an NMSE
// only: the CPU backend's FMA build vectorizes its NORM rotation as a complex product with fused
// multiply-adds (vfmaddsub, which -ffp-contract=off does not prevent), so its bits depend on the
// processor; the angles, cos and sin are the same bits (llama mode shows it).
TEST_P(CudaKernels, RopeEqualsTheCpu) {
    struct Case { const char* what; int64_t hd, heads; int n_rot; RopeMode mode; float base; bool yarn; bool factors = false; };
    const Case cases[] = {{"TinyLlama q", 64, 32, 64, RopeMode::kNorm, 10000.0f, false},
                          {"TinyLlama k", 64, 4, 64, RopeMode::kNorm, 10000.0f, false},
                          {"Qwen2.5-0.5B q", 64, 14, 64, RopeMode::kNeox, 1000000.0f, false},
                          {"Qwen2.5-0.5B k", 64, 2, 64, RopeMode::kNeox, 1000000.0f, false},
                          {"DeepSeek-V2-Lite q_pe", 64, 16, 64, RopeMode::kNorm, 10000.0f, true},
                          {"DeepSeek-V2-Lite k_pe", 64, 1, 64, RopeMode::kNorm, 10000.0f, true},
                          {"partial n_rot", 128, 3, 64, RopeMode::kNeox, 10000.0f, false},
                          {"256-dim heads", 256, 2, 256, RopeMode::kNorm, 10000.0f, false},
                          {"Llama-3.1-8B q, rope_freqs", 128, 32, 128, RopeMode::kNorm, 500000.0f, false, true},
                          {"LongRoPE factors with YaRN", 96, 4, 96, RopeMode::kNeox, 10000.0f, true, true}};
    const std::vector<int32_t> pos = {0, 1, 17, 4095, 32767};
    const int64_t T = static_cast<int64_t>(pos.size());
    for (const Case& c : cases) {
        RopeParams p;
        p.mode = c.mode;
        p.n_rot = c.n_rot;
        p.freq_base = c.base;
        if (c.yarn) p.freq_scale = 1.0f / 40.0f, p.ext_factor = 1.0f, p.n_ctx_orig = 4096, p.attn_factor = 0.8f;
        const std::vector<float> x = randn(c.hd * c.heads * T, 12);
        std::vector<float> factors(static_cast<size_t>(c.n_rot / 2));
        for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 7.0f * static_cast<float>(i) / factors.size();
        expect_same_as_cpu(std::string("rope ") + c.what, 0, [&](Backend& be, MathMode mode) {
            Dev t(be, make_tensor(nullptr, c.hd, c.heads, T), x.data());
            Dev tp(be, make_tensor(nullptr, T, 1, 1, 1, GgmlType::I32), pos.data());
            Dev tf(be, make_tensor(nullptr, c.n_rot / 2), factors.data());
            be.rope(t.t(), tp.t(), c.factors ? tf.t() : Tensor{}, p, mode);
            return t.floats();
        }, 1e-13);
    }
}

INSTANTIATE_TEST_SUITE_P(Schedules, CudaKernels, ::testing::Values(Schedule::Forward, Schedule::Random),
                         [](const auto& info) { return std::string(simt::schedule_name(info.param)); });

// ---- injected reduction bugs

// The rows of RMS_NORM (n, rows) whose result is off the double-precision computation, with the
// given fault injected into the kernel's block reduction.
int wrong_rows(int64_t n, int64_t rows, cuda::ReductionFault fault) {
    const std::vector<float> x = randn(n * rows, 13, 2.0f);
    const float eps = 1e-6f;
    float *d_x = nullptr, *d_y = nullptr;
    EXPECT_EQ(cudaMalloc(&d_x, x.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&d_y, x.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d_x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cuda::cuda_rms_norm_with_fault(d_x, d_y, n, rows, eps, fault, nullptr), cudaSuccess)
        << simt::last_error_message();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> y(x.size());
    EXPECT_EQ(cudaMemcpy(y.data(), d_y, y.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(d_x);
    cudaFree(d_y);
    int wrong = 0;
    for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[r * n + i]) * x[r * n + i];
        const double scale = 1.0 / std::sqrt(ss / n + eps);
        double err = 0, norm = 0;
        for (int64_t i = 0; i < n; ++i) {
            const double want = x[r * n + i] * scale, d = y[r * n + i] - want;
            err += d * d, norm += want * want;
        }
        wrong += err / norm > 1e-12;
    }
    return wrong;
}

class CudaReductionFaults : public ::testing::TestWithParam<Schedule> {
protected:
    void SetUp() override { simt::set_schedule(GetParam(), 99); }
    void TearDown() override { simt::set_schedule(Schedule::Forward); }
};

// The control: without a fault every row is right, at the sizes the faulty runs use.
TEST_P(CudaReductionFaults, CorrectReductionPasses) {
    EXPECT_EQ(wrong_rows(2048, 16, cuda::ReductionFault::kNone), 0);
    EXPECT_EQ(wrong_rows(7, 4, cuda::ReductionFault::kNone), 0);
}

// Warp 0 reads the other warps' partial sums before they are written: stale shared memory.
TEST_P(CudaReductionFaults, MissingSyncthreadsInTheBlockReductionIsCaught) {
    const int wrong = wrong_rows(2048, 16, cuda::ReductionFault::kMissingSyncthreads);
    std::printf("missing __syncthreads under %s: %d of 16 rows wrong\n", simt::schedule_name(GetParam()), wrong);
    EXPECT_GE(wrong, 8) << "the race is not visible under the " << simt::schedule_name(GetParam()) << " schedule";
}

// The shuffle loop stops at offset 2: lane 0 never adds lane 1's partial sum.
TEST_P(CudaReductionFaults, OffByOneInTheShuffleReductionIsCaught) {
    EXPECT_EQ(wrong_rows(2048, 16, cuda::ReductionFault::kShuffleOffByOne), 16);
    EXPECT_EQ(wrong_rows(7, 4, cuda::ReductionFault::kShuffleOffByOne), 4);  // one warp, lanes 0-6
}

INSTANTIATE_TEST_SUITE_P(Schedules, CudaReductionFaults, ::testing::Values(Schedule::Forward, Schedule::Random),
                         [](const auto& info) { return std::string(simt::schedule_name(info.param)); });

}  // namespace
}  // namespace ls
