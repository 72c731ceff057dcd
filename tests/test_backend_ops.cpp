// test-backend-ops, after ggml's: every op of the backend interface, on a table of shapes from tiny
// edge cases to the real layer sizes of TinyLlama-1.1B, Qwen2.5-0.5B and DeepSeek-V2-Lite, for every
// weight format, on every available backend (the CPU in both math modes, cuda-emulated, and CUDA
// when a device is usable). Each result is compared with the CPU's exact-mode result by NMSE
// against a per-op tolerance, and the CPU's exact result itself with a plain double-precision
// implementation written here. NaN/Inf where the reference is finite fails; guard bytes around
// every output catch out-of-bounds writes; a case a backend does not support is reported as such.
// Each op is one test (BackendOps.<Op>), so a failure names the op, shape, format and backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/backend.h"
#include "kernels/common/fp16.h"
#include "kernels/common/quant_blocks.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/exact_order.h"
#include "kernels/cpu/ggml_order.h"
#include "kernels/cpu/quantize.h"
#if defined(__x86_64__)
#include "kernels/cpu/stats_avx2.h"
#include "kernels/cpu/stats_avx512.h"
#include "kernels/cpu/vec_dot_avx512.h"
#endif

namespace ls {
namespace {

// ---- backends under test

struct Target {
    std::string label;  // "cpu/llama"
    Backend* backend;
    MathMode mode;
};

struct Backends {
    std::vector<std::unique_ptr<Backend>> owned;
    std::vector<Target> targets;
    Backend* reference = nullptr;  // the CPU, exact mode

    Backends() {
        for (BackendKind kind : {BackendKind::kCpu, BackendKind::kCudaEmulated, BackendKind::kCuda}) {
            MadeBackend made = make_backend(kind, BackendOptions{2});
            if (!made.backend) {
                std::printf("backend %s: not available (%s)\n", backend_kind_name(kind), made.note.c_str());
                continue;
            }
            owned.push_back(std::move(made.backend));
            for (MathMode mode : {MathMode::kExact, MathMode::kLlama})
                targets.push_back({std::string(backend_kind_name(kind)) + "/" + math_mode_name(mode), owned.back().get(), mode});
        }
        reference = owned.front().get();
    }
};

Backends& backends() {
    static Backends b;
    return b;
}

// ---- guarded device tensors

constexpr size_t guard_s = 256;

// A tensor on a backend with guard bytes before and after its data. Each tensor's guard byte
// differs from the last one's, so a kernel that reads past its input and writes past its output
// cannot copy one guard pattern onto another unseen.
class Guarded {
public:
    Guarded(Backend& be, const Tensor& shape, size_t bytes = 0) : be_(be), t_(shape) {
        static uint8_t next_guard = 0xA0;
        guard_ = next_guard++;
        if (next_guard == 0xB0) next_guard = 0xA0;
        bytes_ = bytes ? bytes : static_cast<size_t>(shape.n_bytes());
        base_ = static_cast<uint8_t*>(be_.alloc(bytes_ + 2 * guard_s));
        std::vector<uint8_t> pattern(bytes_ + 2 * guard_s, guard_);
        be_.upload(base_, pattern.data(), pattern.size());
        t_.data = base_ + guard_s;
    }
    Guarded(Backend& be, const Tensor& shape, const void* host, size_t bytes) : Guarded(be, shape, bytes) {
        be_.upload(t_.data, host, bytes);
    }
    ~Guarded() { be_.release(base_); }
    Guarded(const Guarded&) = delete;
    Guarded& operator=(const Guarded&) = delete;

    Tensor& t() { return t_; }
    std::vector<float> floats() const {
        std::vector<float> v(bytes_ / sizeof(float));
        be_.download(v.data(), t_.data, v.size() * sizeof(float));
        return v;
    }
    // "" when both guard zones are intact, else where the first damaged byte is.
    std::string guard_damage() const {
        std::vector<uint8_t> all(bytes_ + 2 * guard_s);
        be_.download(all.data(), base_, all.size());
        for (size_t i = 0; i < guard_s; ++i)
            if (all[i] != guard_) return "wrote " + std::to_string(guard_s - i) + " bytes before the output";
        for (size_t i = 0; i < guard_s; ++i)
            if (all[guard_s + bytes_ + i] != guard_) return "wrote " + std::to_string(i + 1) + "+ bytes past the output";
        return "";
    }

private:
    Backend& be_;
    Tensor t_;
    size_t bytes_;
    uint8_t* base_;
    uint8_t guard_;
};

// ---- data

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

std::vector<float> rounded_f16(std::vector<float> v) {
    for (float& x : v) x = fp16_to_fp32(fp32_to_fp16(x));
    return v;
}

// Weight bytes of `type` for K x R: up to 64 distinct quantized rows, repeated (quantizing every
// row of a 151936-row LM head would dominate the test's time and test nothing more).
// Ternary blocks (TQ1_0, TQ2_0) of `src`: d the block's largest magnitude, each code
// round(x / d) + 1, packed as ggml packs them (TQ1_0: five base-3 digits per byte as a fraction of
// 243, rounded up; four in a qh byte, with a fifth 0).
void ternary_rows(GgmlType type, const float* src, int64_t n, uint8_t* out) {
    for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
        float amax = 0.0f;
        for (int i = 0; i < kQK_K; ++i) amax = std::max(amax, std::fabs(src[i]));
        uint8_t code[kQK_K];
        for (int i = 0; i < kQK_K; ++i)
            code[i] = static_cast<uint8_t>(amax == 0.0f ? 1 : std::lround(src[i] / amax) + 1);
        const uint16_t d = fp32_to_fp16(amax);
        if (type == GgmlType::TQ2_0) {
            block_tq2_0* blk = reinterpret_cast<block_tq2_0*>(out) + b;
            std::memset(blk->qs, 0, sizeof blk->qs);
            for (int j = 0; j < kQK_K / 4; j += 32)
                for (int l = 0; l < 4; ++l)
                    for (int m = 0; m < 32; ++m) blk->qs[j + m] |= static_cast<uint8_t>(code[j * 4 + l * 32 + m] << (2 * l));
            blk->d = d;
            continue;
        }
        block_tq1_0* blk = reinterpret_cast<block_tq1_0*>(out) + b;
        auto pack = [](const uint8_t* digits, int count, int stride) {
            int q = 0;
            for (int k = 0; k < 5; ++k) q = q * 3 + (k < count ? digits[k * stride] : 0);
            return static_cast<uint8_t>((q * 256 + 242) / 243);
        };
        for (int m = 0; m < 32; ++m) blk->qs[m] = pack(code + m, 5, 32);
        for (int m = 0; m < 16; ++m) blk->qs[32 + m] = pack(code + 160 + m, 5, 16);
        for (int j = 0; j < 4; ++j) blk->qh[j] = pack(code + 240 + j, 4, 4);
        blk->d = d;
    }
}

std::vector<uint8_t> make_weight(GgmlType type, int64_t K, int64_t R, uint32_t seed) {
    uint64_t row_bytes = 0;
    ggml_row_bytes(type, K, &row_bytes);
    const int64_t period = std::min<int64_t>(R, 64);
    std::vector<uint8_t> rows(row_bytes * period);
    const std::vector<float> src = randn(static_cast<size_t>(K * period), seed, 0.05f);
    if (type == GgmlType::F32) {
        std::memcpy(rows.data(), src.data(), rows.size());
    } else if (type == GgmlType::F16) {
        fp32_to_fp16_row(src.data(), reinterpret_cast<uint16_t*>(rows.data()), K * period);
    } else if (type == GgmlType::BF16) {
        fp32_to_bf16_row(src.data(), reinterpret_cast<uint16_t*>(rows.data()), K * period);
    } else if (can_quantize(type)) {
        quantize_rows(type, src.data(), rows.data(), period, K);
    } else if (type == GgmlType::TQ1_0 || type == GgmlType::TQ2_0) {
        ternary_rows(type, src.data(), K * period, rows.data());
    } else {
        // IQ4 formats (no quantizer): random nibbles, each block's leading f16 scale set sanely.
        std::mt19937 rng(seed);
        for (uint8_t& b : rows) b = static_cast<uint8_t>(rng());
        const uint32_t block_bytes = ggml_type_traits(type)->block_bytes;
        const uint16_t d = fp32_to_fp16(0.004f);
        for (size_t off = 0; off < rows.size(); off += block_bytes) std::memcpy(&rows[off], &d, 2);
        if (type == GgmlType::IQ4_XS)  // 6-bit sub-block scales near the middle (32 = unit scale)
            for (size_t off = 0; off < rows.size(); off += block_bytes) std::memset(&rows[off + 2], 0, 6);
    }
    std::vector<uint8_t> out(row_bytes * R);
    for (int64_t r = 0; r < R; ++r) std::memcpy(&out[r * row_bytes], &rows[(r % period) * row_bytes], row_bytes);
    return out;
}

std::vector<float> dequantized(GgmlType type, const std::vector<uint8_t>& bytes, int64_t K, int64_t R) {
    std::vector<float> out(static_cast<size_t>(K * R));
    dequantize_rows(type, bytes.data(), 0, out.data(), R, K);
    return out;
}

// ---- comparison

double nmse(const std::vector<float>& out, const std::vector<float>& ref) {
    double err = 0, norm = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        const double d = static_cast<double>(out[i]) - ref[i];
        err += d * d;
        norm += static_cast<double>(ref[i]) * ref[i];
    }
    return norm > 0 ? err / norm : err;
}

// Per-op NMSE tolerance against the CPU's exact result: what a correct backend's arithmetic
// leaves (llama mode: activations quantized for the weight format, the f16 KV cache).
double tolerance(Op op, MathMode mode) {
    if (mode == MathMode::kExact) return 1e-9;
    switch (op) {
        case Op::kMulMat: case Op::kMulMatId: return 5e-4;
        case Op::kSetRows: return 1e-6;
        case Op::kSoftMax: return 1e-6;
        case Op::kGeglu: return 1e-6;  // f16 in and out, as ggml's table
        case Op::kFlashAttnExt: return 1e-4;
        default: return 1e-9;
    }
}

struct Tally {
    int passed = 0, unsupported = 0;
    ~Tally() { std::printf("  %d cases passed, %d not supported by a backend\n", passed, unsupported); }
};

// The outputs of one case on one target (nullopt: not supported there).
struct Output {
    std::vector<float> values;
    std::string guard_damage;
};
using Runner = std::function<Output(Backend&, MathMode)>;

// Runs a case on the reference and every target, checks the reference against `naive` (when
// given, at `naive_tol`), and every target against the reference.
void check_case(Tally& tally, Op op, GgmlType type, const std::string& what, const std::vector<float>* naive,
                double naive_tol, const Runner& run, double tol_override = -1) {
    Backends& b = backends();
    // Op::kNone: the statistics every backend computes (no op of the table).
    const std::string name = op == Op::kNone ? "STATS" : op_name(op);
    const Output ref = run(*b.reference, MathMode::kExact);
    ASSERT_TRUE(ref.guard_damage.empty()) << name << " " << what << " on the reference: " << ref.guard_damage;
    if (naive) {
        ASSERT_EQ(naive->size(), ref.values.size());
        const double e = nmse(ref.values, *naive);
        EXPECT_LE(e, naive_tol) << name << " " << what << ": the CPU exact result is off the plain computation (NMSE " << e << ")";
    }
    for (const Target& t : b.targets) {
        const std::string id = name + " " + ggml_type_name(type) + " " + what + " on " + t.label;
        if (op != Op::kNone && !t.backend->supports(op, t.mode, type)) {
            std::printf("%-70s NOT SUPPORTED\n", id.c_str());
            ++tally.unsupported;
            continue;
        }
        const Output out = run(*t.backend, t.mode);
        EXPECT_TRUE(out.guard_damage.empty()) << id << ": " << out.guard_damage;
        ASSERT_EQ(out.values.size(), ref.values.size()) << id;
        bool finite = true;
        for (size_t i = 0; i < out.values.size() && finite; ++i)
            if (std::isfinite(ref.values[i]) && !std::isfinite(out.values[i])) {
                ADD_FAILURE() << id << ": value " << i << " is " << out.values[i] << ", the reference's " << ref.values[i];
                finite = false;
            }
        const double e = nmse(out.values, ref.values);
        const double tol = tol_override >= 0 ? tol_override : tolerance(op, t.mode);
        EXPECT_LE(e, tol) << id << ": NMSE " << e << " above " << tol;
        std::printf("%-70s nmse %.3g\n", id.c_str(), e);
        if (finite && e <= tol && out.guard_damage.empty()) ++tally.passed;
    }
}

std::string shape_text(std::initializer_list<int64_t> ne) {
    std::string s;
    for (int64_t n : ne) s += (s.empty() ? "" : "x") + std::to_string(n);
    return s;
}

const GgmlType kWeightTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                                 GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                                 GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS,
                                 GgmlType::TQ1_0, GgmlType::TQ2_0, GgmlType::MXFP4};

bool fits(GgmlType type, int64_t K) { return K % ggml_type_traits(type)->block_elems == 0; }

// ---- ops

TEST(BackendOps, GetRows) {
    Tally tally;
    struct Shape { int64_t K, R; std::vector<int32_t> ids; };
    // Tiny, TinyLlama's and DeepSeek-V2-Lite's embedding width, Qwen2.5-0.5B's (896: no K-quant fits).
    const Shape shapes[] = {{32, 3, {2, 0, 2}}, {256, 5, {4}}, {896, 300, {299, 0, 151, 7}}, {2048, 300, {17, 299, 3}}};
    for (const Shape& s : shapes)
        for (GgmlType type : kWeightTypes) {
            if (!fits(type, s.K)) continue;
            const std::vector<uint8_t> w = make_weight(type, s.K, s.R, 7);
            const std::vector<float> all = dequantized(type, w, s.K, s.R);
            const int64_t n = static_cast<int64_t>(s.ids.size());
            std::vector<float> naive;
            for (int32_t id : s.ids) naive.insert(naive.end(), all.begin() + id * s.K, all.begin() + (id + 1) * s.K);
            check_case(tally, Op::kGetRows, type, shape_text({s.K, s.R}) + " ids " + std::to_string(n), &naive, 0,
                       [&](Backend& be, MathMode) {
                           Guarded table(be, make_tensor(nullptr, s.K, s.R, 1, 1, type), w.data(), w.size());
                           Guarded ids(be, make_tensor(nullptr, n, 1, 1, 1, GgmlType::I32), s.ids.data(), n * 4);
                           Guarded y(be, make_tensor(nullptr, s.K, n));
                           be.get_rows(table.t(), ids.t(), y.t());
                           return Output{y.floats(), y.guard_damage() + table.guard_damage()};
                       });
        }
}

TEST(BackendOps, RmsNorm) {
    Tally tally;
    // Rows shorter than a warp, of a warp and one, not a multiple of the CUDA block (256), and the
    // hidden and FFN widths of TinyLlama-1.1B (2048, 5632), Qwen2.5-0.5B (896, 4864), DeepSeek-V2-Lite.
    for (auto [n_, T_] : {std::pair<int64_t, int64_t>{1, 1}, {7, 3}, {33, 2}, {64, 5}, {300, 3}, {896, 4}, {2048, 3},
                        {4864, 2}, {5632, 1}}) {
        const int64_t n = n_, T = T_;  // clang 14 lambdas cannot capture structured bindings
        const std::vector<float> x = randn(n * T, 11, 2.0f);
        const float eps = 1e-5f;
        std::vector<float> naive(x.size());
        for (int64_t t = 0; t < T; ++t) {
            double ss = 0;
            for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[t * n + i]) * x[t * n + i];
            const double scale = 1.0 / std::sqrt(ss / n + eps);
            for (int64_t i = 0; i < n; ++i) naive[t * n + i] = static_cast<float>(x[t * n + i] * scale);
        }
        check_case(tally, Op::kRmsNorm, GgmlType::F32, shape_text({n, T}), &naive, 1e-12, [&](Backend& be, MathMode) {
            Guarded in(be, make_tensor(nullptr, n, T), x.data(), x.size() * 4);
            Guarded y(be, make_tensor(nullptr, n, T));
            be.rms_norm(in.t(), eps, y.t());
            return Output{y.floats(), y.guard_damage()};
        });
    }
}

TEST(BackendOps, Mul) {
    Tally tally;
    for (auto [n_, T_] : {std::pair<int64_t, int64_t>{1, 1}, {5, 3}, {300, 3}, {896, 4}, {2048, 2}, {5632, 2}}) {
        const int64_t n = n_, T = T_;  // clang 14 lambdas cannot capture structured bindings
        const std::vector<float> x = randn(n * T, 12), w = randn(n, 13);
        std::vector<float> naive(x.size());
        for (int64_t i = 0; i < n * T; ++i) naive[i] = x[i] * w[i % n];
        check_case(tally, Op::kMul, GgmlType::F32, shape_text({n, T}) + " by one row", &naive, 0, [&](Backend& be, MathMode) {
            Guarded in(be, make_tensor(nullptr, n, T), x.data(), x.size() * 4);
            Guarded row(be, make_tensor(nullptr, n), w.data(), w.size() * 4);
            Guarded y(be, make_tensor(nullptr, n, T));
            be.mul_row(in.t(), row.t(), y.t());
            return Output{y.floats(), y.guard_damage()};
        });
    }
}

TEST(BackendOps, Add) {
    Tally tally;
    for (auto [n_, T_] : {std::pair<int64_t, int64_t>{1, 1}, {5, 3}, {300, 3}, {896, 4}, {2048, 2}, {4864, 2}}) {
        const int64_t n = n_, T = T_;  // clang 14 lambdas cannot capture structured bindings
        for (bool broadcast : {false, true}) {
            const std::vector<float> a = randn(n * T, 14), b = randn(broadcast ? n : n * T, 15);
            std::vector<float> naive(a.size());
            for (int64_t i = 0; i < n * T; ++i) naive[i] = a[i] + b[broadcast ? i % n : i];
            check_case(tally, Op::kAdd, GgmlType::F32, shape_text({n, T}) + (broadcast ? " + one row" : " + same shape"),
                       &naive, 0, [&](Backend& be, MathMode) {
                           Guarded ta(be, make_tensor(nullptr, n, T), a.data(), a.size() * 4);
                           Guarded tb(be, make_tensor(nullptr, n, broadcast ? 1 : T), b.data(), b.size() * 4);
                           Guarded y(be, make_tensor(nullptr, n, T));
                           be.add(ta.t(), tb.t(), y.t());
                           return Output{y.floats(), y.guard_damage()};
                       });
        }
    }
}

TEST(BackendOps, MulMat) {
    Tally tally;
    struct Shape { int64_t K, N, T; const char* what; };
    const Shape shapes[] = {
        {256, 1, 1, "edge: one row"},           {256, 3, 2, "edge: prompt of 2"},
        {512, 17, 5, "edge: odd rows"},         {64, 9, 3, "edge: K under a super-block"},
        {2048, 2048, 1, "TinyLlama wq"},        {2048, 256, 3, "TinyLlama wk (GQA)"},
        {2048, 5632, 1, "TinyLlama ffn_gate"},  {5632, 2048, 1, "TinyLlama ffn_down"},
        {896, 4864, 1, "Qwen2.5-0.5B ffn_up"},  {4864, 896, 2, "Qwen2.5-0.5B ffn_down"},
        {896, 151936, 1, "Qwen2.5-0.5B logits"}, {2048, 1408, 1, "DeepSeek-V2-Lite expert gate"},
        {1408, 2048, 1, "DeepSeek-V2-Lite expert down"}, {2048, 576, 2, "DeepSeek-V2-Lite kv_a_mqa"},
        // Prompt batches (GEMM paths: cuBLAS on CUDA).
        {256, 33, 9, "edge: prompt of 9"},      {2048, 256, 16, "TinyLlama wk, prompt of 16"},
    };
    for (const Shape& s : shapes) {
        const bool logits = s.N > 100000;
        for (GgmlType type : kWeightTypes) {
            if (!fits(type, s.K)) continue;
            // The 151936-row LM head in the formats LM heads ship in.
            if (logits && type != GgmlType::F16 && type != GgmlType::Q8_0 && type != GgmlType::Q6_K) continue;
            const std::vector<uint8_t> w = make_weight(type, s.K, s.N, 21);
            const std::vector<float> x = randn(s.K * s.T, 22);
            std::vector<float> naive;
            if (!logits) {
                const std::vector<float> wf = dequantized(type, w, s.K, s.N);
                naive.resize(s.N * s.T);
                for (int64_t t = 0; t < s.T; ++t)
                    for (int64_t r = 0; r < s.N; ++r) {
                        double acc = 0;
                        for (int64_t k = 0; k < s.K; ++k) acc += static_cast<double>(wf[r * s.K + k]) * x[t * s.K + k];
                        naive[t * s.N + r] = static_cast<float>(acc);
                    }
            }
            check_case(tally, Op::kMulMat, type, shape_text({s.K, s.N, s.T}) + " (" + s.what + ")", logits ? nullptr : &naive,
                       1e-10, [&](Backend& be, MathMode mode) {
                           Guarded wt(be, make_tensor(nullptr, s.K, s.N, 1, 1, type), w.data(), w.size());
                           Guarded in(be, make_tensor(nullptr, s.K, s.T), x.data(), x.size() * 4);
                           Guarded y(be, make_tensor(nullptr, s.N, s.T));
                           be.matmul(wt.t(), in.t(), y.t(), mode);
                           return Output{y.floats(), y.guard_damage()};
                       });
        }
    }
}

// A long prompt's matmul (its columns taken in blocks that stay in cache) gives, column for
// column, the bits of the same columns ten at a time (enough for ggml's IQ panel form, which
// takes matmuls of 8 columns or more), in every format and both modes.
TEST(BackendOps, MulMatLongPromptSameBitsAsShortOnes) {
    const int64_t K = 4096, N = 8, T = 150;  // about 40 columns of Q8_K activations to a block
    auto cpu = make_cpu_backend(2);
    for (GgmlType type : kWeightTypes)
        for (MathMode mode : {MathMode::kExact, MathMode::kLlama}) {
            if (!fits(type, K) || !cpu->supports(Op::kMulMat, mode, type)) continue;
            const std::vector<uint8_t> w = make_weight(type, K, N, 211);
            const std::vector<float> x = randn(K * T, 212);
            Tensor wt = cpu->weight(type, std::array<int64_t, 4>{K, N, 1, 1}.data(), w.data());
            std::vector<float> whole(N * T), pieces(N * T);
            Tensor y = make_tensor(whole.data(), N, T);
            cpu->matmul(wt, make_tensor(const_cast<float*>(x.data()), K, T), y, mode);
            for (int64_t t0 = 0; t0 < T; t0 += 10) {
                Tensor y10 = make_tensor(pieces.data() + t0 * N, N, 10);
                cpu->matmul(wt, make_tensor(const_cast<float*>(x.data()) + t0 * K, K, 10), y10, mode);
            }
            EXPECT_EQ(0, std::memcmp(whole.data(), pieces.data(), whole.size() * 4)) << ggml_type_name(type) << " "
                                                                                    << math_mode_name(mode);
        }
}

// ---- the mixture-of-experts ops (deepseek2's router and experts)

// a's value i (row-major over a_ne) op b's value at the same index modulo b_ne, written out per axis.
std::vector<float> naive_binary(Op op, const std::vector<float>& a, const int64_t a_ne[4], const std::vector<float>& b,
                                const int64_t b_ne[4]) {
    std::vector<float> y(a.size());
    size_t i = 0;
    for (int64_t i3 = 0; i3 < a_ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < a_ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < a_ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < a_ne[0]; ++i0, ++i) {
                    const int64_t j0 = i0 % b_ne[0], j1 = i1 % b_ne[1], j2 = i2 % b_ne[2], j3 = i3 % b_ne[3];
                    const float v = b[static_cast<size_t>(j0 + b_ne[0] * (j1 + b_ne[1] * (j2 + b_ne[2] * j3)))];
                    y[i] = op == Op::kAdd ? a[i] + v : op == Op::kMul ? a[i] * v : a[i] / v;
                }
    return y;
}

TEST(BackendOps, Binary) {
    Tally tally;
    struct Shape { std::array<int64_t, 4> a, b; const char* what; };
    const Shape shapes[] = {
        {{8, 3, 1, 1}, {8, 1, 1, 1}, "router bias over 8 experts"},
        {{64, 5, 1, 1}, {64, 1, 1, 1}, "router bias over 64 experts"},
        {{2048, 6, 2, 1}, {1, 6, 2, 1}, "expert weights over DeepSeek-V2-Lite's rows"},
        {{64, 2, 3, 1}, {1, 2, 3, 1}, "expert weights over n_embd 64, k 2"},
        {{6, 4, 1, 1}, {1, 4, 1, 1}, "weights over their sums (k 6)"},
        {{5, 3, 1, 1}, {5, 3, 1, 1}, "same shape"},
        {{4, 6, 2, 3}, {2, 3, 1, 3}, "every axis"},
        {{4096, 7, 1, 1}, {1, 1, 1, 1}, "a product times its per-tensor .scale (Llama-3.1-8B attn_q)"},
        {{14336, 2, 1, 1}, {1, 1, 1, 1}, "a product times its per-tensor .scale (Llama-3.1-8B ffn_up)"},
    };
    for (const Shape& s : shapes)
        for (Op op : {Op::kAdd, Op::kMul, Op::kDiv}) {
            const int64_t na = s.a[0] * s.a[1] * s.a[2] * s.a[3], nb = s.b[0] * s.b[1] * s.b[2] * s.b[3];
            const std::vector<float> a = randn(na, 131);
            std::vector<float> b = randn(nb, 132);
            if (op == Op::kDiv)
                for (float& v : b) v = 0.5f + std::fabs(v);
            const std::vector<float> naive = naive_binary(op, a, s.a.data(), b, s.b.data());
            check_case(tally, op, GgmlType::F32, shape_text({s.a[0], s.a[1], s.a[2], s.a[3]}) + " by " +
                       shape_text({s.b[0], s.b[1], s.b[2], s.b[3]}) + " (" + s.what + ")", &naive, 0,
                       [&](Backend& be, MathMode) {
                           Guarded ta(be, make_tensor(nullptr, s.a[0], s.a[1], s.a[2], s.a[3]), a.data(), a.size() * 4);
                           Guarded tb(be, make_tensor(nullptr, s.b[0], s.b[1], s.b[2], s.b[3]), b.data(), b.size() * 4);
                           Guarded y(be, make_tensor(nullptr, s.a[0], s.a[1], s.a[2], s.a[3]));
                           be.binary(op, ta.t(), tb.t(), y.t());
                           return Output{y.floats(), y.guard_damage()};
                       });
        }
}

TEST(BackendOps, Unary) {
    Tally tally;
    struct Case { Op op; float p0, p1; const char* what; };
    const Case cases[] = {
        {Op::kSigmoid, 0, 0, "router gating"},
        {Op::kScale, 2.5f, 0, "expert weights scale 2.5"},
        {Op::kScale, 16.0f, 0, "expert weights scale 16"},
        {Op::kClamp, 6.103515625e-5f, INFINITY, "weight sums to [2^-14, inf)"},
        {Op::kClamp, -1.0f, 1.0f, "[-1, 1]"},
    };
    for (const Case& c : cases)
        for (auto [n_, T_] : {std::pair<int64_t, int64_t>{1, 1}, {8, 3}, {64, 5}, {300, 7}}) {
            const int64_t n = n_, T = T_;  // clang 14 lambdas cannot capture structured bindings
            std::vector<float> x = randn(n * T, 141, 3.0f);
            // Saturating inputs, zero, and values under the clamp's floor.
            const float specials[] = {-100.0f, 100.0f, 0.0f, -0.0f, 1e-7f, 6.103515625e-5f, -2e-5f};
            if (x.size() > 3 * std::size(specials))
                for (size_t i = 0; i < std::size(specials); ++i) x[i * 3] = specials[i];
            std::vector<float> naive(x.size());
            for (size_t i = 0; i < x.size(); ++i) {
                const double v = x[i];
                naive[i] = static_cast<float>(c.op == Op::kSigmoid ? 1.0 / (1.0 + std::exp(-v))
                                              : c.op == Op::kScale ? v * c.p0
                                              : v < c.p0           ? c.p0
                                              : v > c.p1           ? c.p1
                                                                   : v);
            }
            check_case(tally, c.op, GgmlType::F32, shape_text({n, T}) + " (" + c.what + ")", &naive, 1e-13,
                       [&](Backend& be, MathMode) {
                           Guarded in(be, make_tensor(nullptr, n, T), x.data(), x.size() * 4);
                           Guarded y(be, make_tensor(nullptr, n, T));
                           be.unary(c.op, in.t(), y.t(), c.p0, c.p1);
                           return Output{y.floats(), y.guard_damage()};
                       });
        }
}

TEST(BackendOps, SumRows) {
    Tally tally;
    // The top-k weights of a token (k 2 and 6), a row of one, rows of several warps, a long row.
    for (auto [n_, T_] : {std::pair<int64_t, int64_t>{1, 4}, {2, 3}, {6, 5}, {64, 9}, {1000, 3}, {2048, 2}}) {
        const int64_t n = n_, T = T_;  // clang 14 lambdas cannot capture structured bindings
        const std::vector<float> x = randn(n * T, 151, 2.0f);
        std::vector<float> naive(T);
        for (int64_t t = 0; t < T; ++t) {
            long double sum = 0;
            for (int64_t i = 0; i < n; ++i) sum += x[t * n + i];
            naive[t] = static_cast<float>(sum);
        }
        check_case(tally, Op::kSumRows, GgmlType::F32, shape_text({n, T}), &naive, 1e-13, [&](Backend& be, MathMode) {
            Guarded in(be, make_tensor(nullptr, n, T), x.data(), x.size() * 4);
            Guarded y(be, make_tensor(nullptr, 1, T));
            be.sum_rows(in.t(), y.t());
            return Output{y.floats(), y.guard_damage()};
        });
    }
}

TEST(BackendOps, Argsort) {
    Tally tally;
    // Router rows of 8 to 256 experts; ties among them (equal values, 0 and -0) keep column order.
    for (auto [n_, T_] : {std::pair<int64_t, int64_t>{1, 2}, {8, 3}, {64, 4}, {160, 2}, {256, 2}}) {
        const int64_t n = n_, T = T_;  // clang 14 lambdas cannot capture structured bindings
        std::vector<float> x = randn(n * T, 161);
        for (int64_t t = 0; t < T && n >= 8; ++t) {
            float* row = &x[t * n];
            row[n - 1] = row[0];           // a tie between the first and the last column
            row[n / 2] = row[1];           // and another in the middle
            row[2] = 0.0f, row[5] = -0.0f;  // zeros of both signs are equal
            row[3] = row[4] = row[6] = 3.0f + t;  // a three-way tie for the largest value
        }
        // Each row sorted by insertion: a column moves in front of those with strictly smaller values only.
        std::vector<float> naive(x.size());
        for (int64_t t = 0; t < T; ++t) {
            std::vector<int32_t> order;
            for (int32_t i = 0; i < n; ++i) {
                size_t at = order.size();
                while (at > 0 && x[t * n + order[at - 1]] < x[t * n + i]) --at;
                order.insert(order.begin() + static_cast<std::ptrdiff_t>(at), i);
            }
            for (int64_t i = 0; i < n; ++i) naive[t * n + i] = static_cast<float>(order[i]);
        }
        check_case(tally, Op::kArgsort, GgmlType::F32, shape_text({n, T}) + " with ties", &naive, 0,
                   [&](Backend& be, MathMode) {
                       Guarded in(be, make_tensor(nullptr, n, T), x.data(), x.size() * 4);
                       Guarded idx(be, make_tensor(nullptr, n, T, 1, 1, GgmlType::I32));
                       be.argsort_desc(in.t(), idx.t());
                       std::vector<int32_t> got(x.size());
                       be.download(got.data(), idx.t().data, got.size() * 4);
                       return Output{std::vector<float>(got.begin(), got.end()), idx.guard_damage()};
                   },
                   0);
    }
}

TEST(BackendOps, MulMatId) {
    Tally tally;
    // Experts of K x N, n_used of them per token; x is one column per token (gate and up: every slot
    // reads it) or one per slot (down). The ids name the last expert, and one expert twice.
    struct Shape { int64_t K, N, n_expert, n_used, x_cols, T; std::vector<int32_t> ids; const char* what; };
    const Shape shapes[] = {
        {256, 5, 4, 2, 1, 3, {3, 0, 1, 3, 2, 1}, "gate/up: x shared by the slots"},
        {256, 3, 8, 3, 3, 2, {7, 2, 5, 0, 7, 6}, "down: x per slot"},
        {512, 17, 3, 1, 1, 1, {2}, "one slot"},
    };
    for (const Shape& s : shapes)
        for (GgmlType type : kWeightTypes) {
            if (!fits(type, s.K)) continue;
            const std::vector<uint8_t> w = make_weight(type, s.K, s.N * s.n_expert, 171);
            const std::vector<float> x = randn(s.K * s.x_cols * s.T, 172);
            const std::vector<float> wf = dequantized(type, w, s.K, s.N * s.n_expert);
            std::vector<float> naive(s.N * s.n_used * s.T);
            for (int64_t t = 0; t < s.T; ++t)
                for (int64_t slot = 0; slot < s.n_used; ++slot) {
                    const int64_t e = s.ids[t * s.n_used + slot];
                    const float* xc = &x[(t * s.x_cols + slot % s.x_cols) * s.K];
                    for (int64_t r = 0; r < s.N; ++r) {
                        double acc = 0;
                        for (int64_t k = 0; k < s.K; ++k) acc += static_cast<double>(wf[(e * s.N + r) * s.K + k]) * xc[k];
                        naive[(t * s.n_used + slot) * s.N + r] = static_cast<float>(acc);
                    }
                }
            const int64_t n_ids = static_cast<int64_t>(s.ids.size());
            check_case(tally, Op::kMulMatId, type,
                       shape_text({s.K, s.N, s.n_expert}) + " x " + shape_text({s.K, s.x_cols, s.T}) + " (" + s.what + ")",
                       &naive, 1e-10, [&](Backend& be, MathMode mode) {
                           Guarded wt(be, make_tensor(nullptr, s.K, s.N, s.n_expert, 1, type), w.data(), w.size());
                           Guarded in(be, make_tensor(nullptr, s.K, s.x_cols, s.T), x.data(), x.size() * 4);
                           Guarded ids(be, make_tensor(nullptr, s.n_used, s.T, 1, 1, GgmlType::I32), s.ids.data(), n_ids * 4);
                           Guarded y(be, make_tensor(nullptr, s.N, s.n_used, s.T));
                           be.matmul_id(wt.t(), in.t(), ids.t(), y.t(), mode);
                           return Output{y.floats(), y.guard_damage()};
                       });
        }
}

// The CPU's MUL_MAT_ID (columns grouped by expert, each expert row read once) gives the bits of
// matmul() run on one column at a time (Backend's default, ggml's vec_dot per column), for every
// weight format and both math modes, with several tokens routed to the same expert.
TEST(BackendOps, MulMatIdCpuSameBitsAsOneColumnAtATime) {
    const int64_t K = 256, N = 6, n_expert = 4, n_used = 3, T = 5;
    const std::vector<int32_t> ids = {0, 3, 1, 3, 0, 2, 1, 1, 3, 2, 0, 3, 3, 2, 1};
    auto cpu = make_cpu_backend(2);
    for (GgmlType type : kWeightTypes)
        for (MathMode mode : {MathMode::kExact, MathMode::kLlama}) {
            if (!cpu->supports(Op::kMulMatId, mode, type)) continue;
            const std::vector<uint8_t> w = make_weight(type, K, N * n_expert, 191);
            for (int64_t x_cols : {int64_t{1}, n_used}) {
                const std::vector<float> x = randn(K * x_cols * T, 192);
                Tensor wt = cpu->weight(type, std::array<int64_t, 4>{K, N, n_expert, 1}.data(), w.data());
                Tensor in = make_tensor(const_cast<float*>(x.data()), K, x_cols, T);
                Tensor id = make_tensor(const_cast<int32_t*>(ids.data()), n_used, T, 1, 1, GgmlType::I32);
                std::vector<float> grouped(N * n_used * T), per_column(N * n_used * T);
                Tensor y1 = make_tensor(grouped.data(), N, n_used, T), y2 = make_tensor(per_column.data(), N, n_used, T);
                cpu->matmul_id(wt, in, id, y1, mode);
                cpu->Backend::matmul_id(wt, in, id, y2, mode);
                ASSERT_EQ(0, std::memcmp(grouped.data(), per_column.data(), grouped.size() * 4))
                    << ggml_type_name(type) << " " << math_mode_name(mode) << " x columns " << x_cols;
            }
        }
}

// MUL_MAT_ID with the expert id `bad` among `ids` fails with an out_of_range naming it (on CUDA at
// the download of y, the ids staying on the device); `where` says what the id was among.
void expect_expert_id_refused(const Target& t, Guarded& w, Guarded& x, Guarded& ids, Guarded& y, int32_t bad,
                              const std::string& where) {
    try {
        t.backend->matmul_id(w.t(), x.t(), ids.t(), y.t(), t.mode);
        (void)y.floats();
        ADD_FAILURE() << t.label << ": expert id " << bad << " " << where << " was accepted";
    } catch (const std::out_of_range& e) {
        EXPECT_NE(std::string(e.what()).find("expert id " + std::to_string(bad) + " "), std::string::npos)
            << t.label << ": " << e.what();
    }
}

// Every backend's MUL_MAT_ID over a prompt (CUDA: the columns grouped by expert on the device,
// each weight row decoded once for up to 8 of an expert's columns) gives the bits of the same
// columns one token at a time (CUDA: one column per block row), for every weight format, with
// experts taking 1 to 11 columns (more than one work item) and some none; and an id out of range
// among many columns is reported.
TEST(BackendOps, MulMatIdPromptSameBitsAsOneTokenAtATime) {
    const int64_t K = 256, N = 7, n_expert = 6, n_used = 3, T = 9;
    std::vector<int32_t> ids(static_cast<size_t>(n_used * T));
    for (int64_t c = 0; c < n_used * T; ++c) ids[c] = c % 3 == 0 ? 4 : static_cast<int32_t>((c * 7) % 4);  // 5 never
    for (const Target& t : backends().targets) {
        Backend& be = *t.backend;
        for (GgmlType type : kWeightTypes) {
            if (!fits(type, K) || !be.supports(Op::kMulMatId, t.mode, type)) continue;
            const std::vector<uint8_t> w = make_weight(type, K, N * n_expert, 201);
            for (int64_t x_cols : {int64_t{1}, n_used}) {
                const std::vector<float> x = randn(K * x_cols * T, 202);
                Guarded wt(be, make_tensor(nullptr, K, N, n_expert, 1, type), w.data(), w.size());
                Guarded in(be, make_tensor(nullptr, K, x_cols, T), x.data(), x.size() * 4);
                Guarded id(be, make_tensor(nullptr, n_used, T, 1, 1, GgmlType::I32), ids.data(), ids.size() * 4);
                Guarded y(be, make_tensor(nullptr, N, n_used, T));
                be.matmul_id(wt.t(), in.t(), id.t(), y.t(), t.mode);
                const std::vector<float> together = y.floats();
                for (int64_t tok = 0; tok < T; ++tok) {
                    Guarded in1(be, make_tensor(nullptr, K, x_cols, 1), x.data() + tok * K * x_cols, K * x_cols * 4);
                    Guarded id1(be, make_tensor(nullptr, n_used, 1, 1, 1, GgmlType::I32), ids.data() + tok * n_used, n_used * 4);
                    Guarded y1(be, make_tensor(nullptr, N, n_used, 1));
                    be.matmul_id(wt.t(), in1.t(), id1.t(), y1.t(), t.mode);
                    const std::vector<float> alone = y1.floats();
                    ASSERT_EQ(0, std::memcmp(alone.data(), together.data() + tok * N * n_used, alone.size() * 4))
                        << t.label << " " << ggml_type_name(type) << " x columns " << x_cols << " token " << tok;
                }
                EXPECT_EQ(y.guard_damage(), "") << t.label << " " << ggml_type_name(type);
            }
        }
        const std::vector<uint8_t> w = make_weight(GgmlType::F32, K, N * n_expert, 203);
        const std::vector<float> x = randn(K * T, 204);
        std::vector<int32_t> bad = ids;
        bad[13] = n_expert;
        Guarded wt(be, make_tensor(nullptr, K, N, n_expert, 1, GgmlType::F32), w.data(), w.size());
        Guarded in(be, make_tensor(nullptr, K, 1, T), x.data(), x.size() * 4);
        Guarded id(be, make_tensor(nullptr, n_used, T, 1, 1, GgmlType::I32), bad.data(), bad.size() * 4);
        Guarded y(be, make_tensor(nullptr, N, n_used, T));
        expect_expert_id_refused(t, wt, in, id, y, n_expert, "among " + std::to_string(T) + " tokens");
    }
}

// An expert id outside the weight's experts is an error on every backend, named with the id (on
// CUDA at the next download: the ids never leave the device), and the backend works on afterwards.
TEST(BackendOps, MulMatIdRejectsAnExpertOutOfRange) {
    const int64_t K = 32, N = 2, n_expert = 4;
    const std::vector<uint8_t> w = make_weight(GgmlType::F32, K, N * n_expert, 181);
    const std::vector<float> x = randn(K, 182);
    for (const Target& t : backends().targets) {
        Backend& be = *t.backend;
        Guarded wt(be, make_tensor(nullptr, K, N, n_expert, 1, GgmlType::F32), w.data(), w.size());
        Guarded in(be, make_tensor(nullptr, K, 1, 1), x.data(), x.size() * 4);
        for (int32_t bad : {4, -1}) {
            const std::vector<int32_t> id_values = {1, bad};
            Guarded ids(be, make_tensor(nullptr, 2, 1, 1, 1, GgmlType::I32), id_values.data(), 8);
            Guarded y(be, make_tensor(nullptr, N, 2, 1));
            expect_expert_id_refused(t, wt, in, ids, y, bad, "of " + std::to_string(n_expert));
        }
        const std::vector<int32_t> good = {n_expert - 1, 0};
        Guarded ids(be, make_tensor(nullptr, 2, 1, 1, 1, GgmlType::I32), good.data(), 8);
        Guarded y(be, make_tensor(nullptr, N, 2, 1));
        EXPECT_NO_THROW({
            be.matmul_id(wt.t(), in.t(), ids.t(), y.t(), t.mode);
            (void)y.floats();
        }) << t.label;
    }
}

TEST(BackendOps, Rope) {
    Tally tally;
    struct Shape { int64_t hd, heads; int n_rot; std::vector<int32_t> pos; };
    // Q heads of TinyLlama (32), Qwen2.5-0.5B (14; its K: 2) and DeepSeek-V2-Lite (16; k_pe: 1 head),
    // a partial rotation, and 256-dim heads (more pairs than a CUDA block's threads).
    const Shape shapes[] = {{8, 8, 8, {0, 1, 2, 3, 4}}, {64, 32, 64, {0, 1000, 4095}}, {64, 14, 64, {5, 6}},
                            {64, 2, 64, {0, 7, 100}},   {128, 4, 64, {0, 31, 32767}},  {64, 16, 64, {0, 3}},
                            {64, 1, 64, {2, 3, 4}},     {256, 2, 256, {1, 9}}};
    // Variants: NORM, NEOX, YaRN, NORM with frequency factors (Llama 3.1's rope_freqs: 1 for the
    // fast pairs, 8 for the slow ones, a ramp between) and NEOX with factors and a cos/sin factor
    // (LongRoPE's short/long factors).
    const char* names[] = {"NORM", "NEOX", "YaRN", "NORM freq factors", "NEOX freq factors"};
    for (const Shape& s : shapes)
        for (int variant = 0; variant < 5; ++variant) {
            RopeParams p;
            p.mode = variant == 1 || variant == 4 ? RopeMode::kNeox : RopeMode::kNorm;
            p.n_rot = s.n_rot;
            p.freq_base = variant == 1 ? 1000000.0f : variant == 3 ? 500000.0f : 10000.0f;
            if (variant == 2) {  // YaRN as DeepSeek-V2-Lite sets it
                p.freq_scale = 1.0f / 40.0f, p.ext_factor = 1.0f, p.n_ctx_orig = 4096, p.beta_fast = 32, p.beta_slow = 1;
            }
            if (variant == 4) p.attn_factor = 1.19f;
            const bool with_factors = variant >= 3;
            std::vector<float> factors(static_cast<size_t>(s.n_rot / 2), 1.0f);
            for (int i = 0; with_factors && i < s.n_rot / 2; ++i) {
                const float ramp = static_cast<float>(i) / static_cast<float>(std::max(1, s.n_rot / 2 - 1));
                factors[i] = variant == 3 ? (ramp < 0.3f ? 1.0f : ramp > 0.7f ? 8.0f : 1.0f + 17.5f * (ramp - 0.3f))
                                          : 1.0f + 3.0f * ramp;
            }
            const int64_t T = static_cast<int64_t>(s.pos.size());
            const std::vector<float> x = randn(s.hd * s.heads * T, 31);
            std::vector<float> naive;
            if (variant != 2) {  // plain RoPE in double: pairs rotated by pos * base^(-2i/n_rot) / factor
                naive = x;
                for (int64_t t = 0; t < T; ++t)
                    for (int64_t h = 0; h < s.heads; ++h)
                        for (int i = 0; i < s.n_rot / 2; ++i) {
                            double theta = s.pos[t] * std::pow(static_cast<double>(p.freq_base), -2.0 * i / s.n_rot);
                            theta /= factors[i];
                            const double c = std::cos(theta) * p.attn_factor, sn = std::sin(theta) * p.attn_factor;
                            const int64_t a = p.mode == RopeMode::kNorm ? 2 * i : i, b = p.mode == RopeMode::kNorm ? 2 * i + 1 : i + s.n_rot / 2;
                            float* v = &naive[(t * s.heads + h) * s.hd];
                            const double x0 = x[(t * s.heads + h) * s.hd + a], x1 = x[(t * s.heads + h) * s.hd + b];
                            v[a] = static_cast<float>(x0 * c - x1 * sn);
                            v[b] = static_cast<float>(x0 * sn + x1 * c);
                        }
            }
            // Large positions lose float precision in theta (as in ggml): the naive check is loose.
            check_case(tally, Op::kRope, GgmlType::F32, shape_text({s.hd, s.heads, T}) + " " + names[variant],
                       variant == 2 ? nullptr : &naive, 1e-4, [&](Backend& be, MathMode mode) {
                           Guarded t(be, make_tensor(nullptr, s.hd, s.heads, T), x.data(), x.size() * 4);
                           Guarded pos(be, make_tensor(nullptr, T, 1, 1, 1, GgmlType::I32), s.pos.data(), T * 4);
                           Guarded ff(be, make_tensor(nullptr, s.n_rot / 2), factors.data(), factors.size() * 4);
                           be.rope(t.t(), pos.t(), with_factors ? ff.t() : Tensor{}, p, mode);
                           return Output{t.floats(), t.guard_damage()};
                       });
        }
}

TEST(BackendOps, Swiglu) {
    Tally tally;
    for (auto [n_, T_] : {std::pair<int64_t, int64_t>{1, 1}, {15, 2}, {17, 3}, {33, 2}, {5632, 2}, {4864, 2}, {1408, 4}}) {
        const int64_t n = n_, T = T_;  // clang 14 lambdas cannot capture structured bindings
        const std::vector<float> g = randn(n * T, 41, 4.0f), u = randn(n * T, 42);
        std::vector<float> naive(g.size());
        for (size_t i = 0; i < g.size(); ++i) naive[i] = static_cast<float>(g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i]);
        check_case(tally, Op::kSwiglu, GgmlType::F32, shape_text({n, T}), &naive, 1e-12, [&](Backend& be, MathMode mode) {
            Guarded tg(be, make_tensor(nullptr, n, T), g.data(), g.size() * 4);
            Guarded tu(be, make_tensor(nullptr, n, T), u.data(), u.size() * 4);
            Guarded y(be, make_tensor(nullptr, n, T));
            be.swiglu(tg.t(), tu.t(), y.t(), mode);
            return Output{y.floats(), y.guard_damage()};
        });
    }
}

// GEGLU (gemma's feed-forward): gelu(gate) * up with GELU's tanh form; llama mode rounds the gate
// to f16 and GELU's value to f16 as ggml's table does (so its tolerance is f16's), both modes
// against the formula in double. Shapes up to Gemma-3-4B's n_ff.
TEST(BackendOps, Geglu) {
    Tally tally;
    for (auto [n_, T_] : {std::pair<int64_t, int64_t>{1, 1}, {15, 2}, {33, 2}, {6912, 2}, {9216, 1}, {10240, 2}}) {
        const int64_t n = n_, T = T_;  // clang 14 lambdas cannot capture structured bindings
        std::vector<float> g = randn(n * T, 43, 4.0f), u = randn(n * T, 44);
        if (n * T > 4) g[0] = -12.0f, g[1] = 11.0f, g[2] = -10.0f, g[3] = 10.0f;  // ggml's cut-offs
        std::vector<float> naive(g.size());
        for (size_t i = 0; i < g.size(); ++i) {
            const double x = g[i];
            naive[i] = static_cast<float>(0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * x * (1.0 + 0.044715 * x * x))) * u[i]);
        }
        check_case(tally, Op::kGeglu, GgmlType::F32, shape_text({n, T}), &naive, 1e-12, [&](Backend& be, MathMode mode) {
            Guarded tg(be, make_tensor(nullptr, n, T), g.data(), g.size() * 4);
            Guarded tu(be, make_tensor(nullptr, n, T), u.data(), u.size() * 4);
            Guarded y(be, make_tensor(nullptr, n, T));
            be.geglu(tg.t(), tu.t(), y.t(), mode);
            return Output{y.floats(), y.guard_damage()};
        });
    }
}

// SWIGLU_OAI (gpt-oss's experts): x sigmoid(1.702 x) (u + 1) with x = min(gate, 7), u = clamp(up,
// -7, 7), against the formula in double; gate and up values on both sides of the clamp.
TEST(BackendOps, SwigluOai) {
    Tally tally;
    for (auto [n_, T_] : {std::pair<int64_t, int64_t>{1, 1}, {15, 2}, {64, 4}, {2880, 4}}) {
        const int64_t n = n_, T = T_;  // clang 14 lambdas cannot capture structured bindings
        std::vector<float> g = randn(n * T, 45, 6.0f), u = randn(n * T, 46, 6.0f);
        std::vector<float> naive(g.size());
        for (size_t i = 0; i < g.size(); ++i) {
            const double x = std::min(g[i], 7.0f), up = std::clamp(u[i], -7.0f, 7.0f);
            naive[i] = static_cast<float>(x / (1.0 + std::exp(-1.702 * x)) * (up + 1.0));
        }
        check_case(tally, Op::kSwigluOai, GgmlType::F32, shape_text({n, T}), &naive, 1e-12, [&](Backend& be, MathMode mode) {
            Guarded tg(be, make_tensor(nullptr, n, T), g.data(), g.size() * 4);
            Guarded tu(be, make_tensor(nullptr, n, T), u.data(), u.size() * 4);
            Guarded y(be, make_tensor(nullptr, n, T));
            be.swiglu_oai(tg.t(), tu.t(), y.t(), 1.702f, 7.0f, mode);
            return Output{y.floats(), y.guard_damage()};
        });
    }
}

// ADD_ID (gpt-oss's expert biases): each column plus the table row its id picks; exact in f32.
TEST(BackendOps, AddId) {
    Tally tally;
    for (auto [n_, k_, T_, E_] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 1, 1, 1}, {64, 2, 3, 8}, {2880, 4, 2, 32}}) {
        const int64_t n = n_, k = k_, T = T_, E = E_;  // clang 14 lambdas cannot capture structured bindings
        const std::vector<float> a = randn(n * k * T, 47), table = randn(n * E, 48);
        std::vector<int32_t> ids(static_cast<size_t>(k * T));
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 3) % E);
        std::vector<float> naive(a.size());
        for (int64_t c = 0; c < k * T; ++c)
            for (int64_t i = 0; i < n; ++i) naive[c * n + i] = a[c * n + i] + table[ids[c] * n + i];
        check_case(tally, Op::kAddId, GgmlType::F32, shape_text({n, k, T}), &naive, 0, [&](Backend& be, MathMode) {
            Guarded ta(be, make_tensor(nullptr, n, k, T), a.data(), a.size() * 4);
            Guarded tt(be, make_tensor(nullptr, n, E), table.data(), table.size() * 4);
            Guarded ti(be, make_tensor(nullptr, k, T, 1, 1, GgmlType::I32), ids.data(), ids.size() * 4);
            Guarded y(be, make_tensor(nullptr, n, k, T));
            be.add_id(ta.t(), tt.t(), ti.t(), y.t());
            return Output{y.floats(), y.guard_damage()};
        });
    }
}

// ---- qwen35's Gated DeltaNet ops (Qwen3.5-4B: conv width 2*16*128 + 32*128 = 8192, head dim 128,
// 16 key heads, 32 value heads), each against its formula written out here in double.

// SILU (the conv output and the output gate): x / (1 + e^-x), both modes against the formula;
// lengths that leave a tail after ggml's groups of 8 and 16, saturating inputs.
TEST(BackendOps, Silu) {
    Tally tally;
    for (auto [n_, T_] : {std::pair<int64_t, int64_t>{1, 1}, {15, 2}, {17, 3}, {1003, 2}, {4096, 3}, {8192, 4}}) {
        const int64_t n = n_, T = T_;  // clang 14 lambdas cannot capture structured bindings
        std::vector<float> x = randn(n * T, 161, 4.0f);
        const float specials[] = {-100.0f, 100.0f, 0.0f, -0.0f, -20.0f, 20.0f, 88.0f, -88.0f};
        if (x.size() > 3 * std::size(specials))
            for (size_t i = 0; i < std::size(specials); ++i) x[i * 3] = specials[i];
        std::vector<float> naive(x.size());
        for (size_t i = 0; i < x.size(); ++i) naive[i] = static_cast<float>(x[i] / (1.0 + std::exp(-static_cast<double>(x[i]))));
        check_case(tally, Op::kSilu, GgmlType::F32, shape_text({n, T}), &naive, 1e-12, [&](Backend& be, MathMode mode) {
            Guarded in(be, make_tensor(nullptr, n, T), x.data(), x.size() * 4);
            Guarded y(be, make_tensor(nullptr, n, T));
            be.silu(in.t(), y.t(), mode);
            return Output{y.floats(), y.guard_damage()};
        });
    }
}

// SOFTPLUS (the decay gate's softplus(alpha + dt_bias)): log(1 + e^x) against log1p(e^x) in
// double; ggml returns x itself above 20, which agrees in f32. Values beyond 20 and very negative
// ones (where 1 + e^x rounds to 1) are mixed in. ggml's f32 formula loses up to 2^-24 absolute
// where e^x is small, so no case is a handful of negative values alone (the NMSE would show it).
TEST(BackendOps, Softplus) {
    Tally tally;
    for (auto [n_, T_] : {std::pair<int64_t, int64_t>{17, 2}, {32, 3}, {1003, 2}, {4096, 4}}) {
        const int64_t n = n_, T = T_;  // clang 14 lambdas cannot capture structured bindings
        std::vector<float> x = randn(n * T, 163, 8.0f);
        const float specials[] = {20.0f, 20.5f, 19.9f, 25.0f, 100.0f, -30.0f, -90.0f, -100.0f, 0.0f, -0.0f, 1e-7f};
        if (x.size() > 3 * std::size(specials))
            for (size_t i = 0; i < std::size(specials); ++i) x[i * 3] = specials[i];
        std::vector<float> naive(x.size());
        for (size_t i = 0; i < x.size(); ++i) naive[i] = static_cast<float>(std::log1p(std::exp(static_cast<double>(x[i]))));
        check_case(tally, Op::kSoftplus, GgmlType::F32, shape_text({n, T}), &naive, 1e-12, [&](Backend& be, MathMode) {
            Guarded in(be, make_tensor(nullptr, n, T), x.data(), x.size() * 4);
            Guarded y(be, make_tensor(nullptr, n, T));
            be.unary(Op::kSoftplus, in.t(), y.t());
            return Output{y.floats(), y.guard_damage()};
        });
    }
}

// SSM_CONV (the causal conv1d before the delta rule): each channel's 4 taps over its window of the
// conv state (d_conv - 1 values) and the ubatch, for one token and for a prompt.
TEST(BackendOps, SsmConv) {
    Tally tally;
    const int64_t d_conv = 4;
    for (auto [C_, T_] : {std::pair<int64_t, int64_t>{1, 1}, {256, 1}, {256, 7}, {8192, 1}, {8192, 7}}) {
        const int64_t C = C_, T = T_;  // clang 14 lambdas cannot capture structured bindings
        const int64_t n_x = d_conv - 1 + T;
        const std::vector<float> x = randn(n_x * C, 165), w = randn(d_conv * C, 166, 0.5f);
        std::vector<float> naive(static_cast<size_t>(C * T));
        for (int64_t c = 0; c < C; ++c)
            for (int64_t t = 0; t < T; ++t) {
                double sum = 0;
                for (int64_t i = 0; i < d_conv; ++i) sum += static_cast<double>(x[c * n_x + t + i]) * w[c * d_conv + i];
                naive[t * C + c] = static_cast<float>(sum);
            }
        check_case(tally, Op::kSsmConv, GgmlType::F32, "d_conv 4 " + shape_text({C, T}), &naive, 1e-12, [&](Backend& be, MathMode) {
            Guarded tx(be, make_tensor(nullptr, n_x, C), x.data(), x.size() * 4);
            Guarded tw(be, make_tensor(nullptr, d_conv, C), w.data(), w.size() * 4);
            Guarded y(be, make_tensor(nullptr, C, T));
            be.ssm_conv(tx.t(), tw.t(), y.t());
            return Output{y.floats(), y.guard_damage()};
        });
    }
}

// GATED_DELTA_NET (qwen35's linear attention): inputs shaped like the real ones (q and k
// L2-normalised per head and token, g the log of a decay in (0, 1), beta in (0, 1), a nonzero
// state), against the recurrence in double on the untransposed matrix S[i][j]; the output and the
// updated state are each a case of their own.
// Inputs like a DeltaNet layer's (q and k L2-normalised per head, log-decays of (0.05, 0.999),
// beta in (0.02, 0.98), a starting state at scale 0.1) and the rule computed plainly in double on
// the untransposed state, token by token: what both forms of GATED_DELTA_NET must give.
struct DeltaRuleCase {
    int64_t S, H_k, H_v, T;
    std::vector<float> q, k, v, g, beta, state0, naive_out, naive_state;

    DeltaRuleCase(int64_t S_, int64_t H_k_, int64_t H_v_, int64_t T_) : S(S_), H_k(H_k_), H_v(H_v_), T(T_) {
        q = randn(S * H_k * T, 171), k = randn(S * H_k * T, 172);
        for (std::vector<float>* qk : {&q, &k})
            for (int64_t r = 0; r < H_k * T; ++r) {
                double sq = 0;
                for (int64_t i = 0; i < S; ++i) sq += static_cast<double>((*qk)[r * S + i]) * (*qk)[r * S + i];
                const float inv = static_cast<float>(1.0 / std::sqrt(sq));
                for (int64_t i = 0; i < S; ++i) (*qk)[r * S + i] *= inv;
            }
        v = randn(S * H_v * T, 173), state0 = randn(S * S * H_v, 174, 0.1f);
        g.resize(static_cast<size_t>(H_v * T)), beta.resize(g.size());
        std::mt19937 rng(175);
        std::uniform_real_distribution<float> decay(0.05f, 0.999f), unit(0.02f, 0.98f);
        for (size_t i = 0; i < g.size(); ++i) g[i] = std::log(decay(rng)), beta[i] = unit(rng);

        naive_out.resize(v.size()), naive_state.resize(state0.size());
        for (int64_t h = 0; h < H_v; ++h) {
            std::vector<double> M(static_cast<size_t>(S * S));  // M[i * S + j] = S[i][j]
            for (int64_t i = 0; i < S; ++i)
                for (int64_t j = 0; j < S; ++j) M[i * S + j] = state0[h * S * S + j * S + i];
            for (int64_t t = 0; t < T; ++t) {
                const float* qt = &q[(t * H_k + h % H_k) * S];
                const float* kt = &k[(t * H_k + h % H_k) * S];
                const float* vt = &v[(t * H_v + h) * S];
                const double a = std::exp(static_cast<double>(g[t * H_v + h])), b = beta[t * H_v + h];
                for (double& m : M) m *= a;
                std::vector<double> delta(static_cast<size_t>(S));
                for (int64_t j = 0; j < S; ++j) {
                    double kv = 0;
                    for (int64_t i = 0; i < S; ++i) kv += M[i * S + j] * kt[i];
                    delta[j] = (vt[j] - kv) * b;
                }
                for (int64_t i = 0; i < S; ++i)
                    for (int64_t j = 0; j < S; ++j) M[i * S + j] += kt[i] * delta[j];
                for (int64_t j = 0; j < S; ++j) {
                    double o = 0;
                    for (int64_t i = 0; i < S; ++i) o += M[i * S + j] * qt[i];
                    naive_out[(t * H_v + h) * S + j] = static_cast<float>(o / std::sqrt(static_cast<double>(S)));
                }
            }
            for (int64_t i = 0; i < S; ++i)
                for (int64_t j = 0; j < S; ++j) naive_state[h * S * S + j * S + i] = static_cast<float>(M[i * S + j]);
        }
    }

    // Runs `op` (one form of the rule) on fresh copies of the inputs and the starting state; the
    // case's `part`: the output (0) or the updated state (1), with the guard bytes of both.
    template <typename Op>
    auto runner(int part, Op op) const {
        return [this, part, op](Backend& be, MathMode mode) {
            Guarded tq(be, make_tensor(nullptr, S, H_k, T), q.data(), q.size() * 4);
            Guarded tk(be, make_tensor(nullptr, S, H_k, T), k.data(), k.size() * 4);
            Guarded tv(be, make_tensor(nullptr, S, H_v, T), v.data(), v.size() * 4);
            Guarded tg(be, make_tensor(nullptr, H_v, T), g.data(), g.size() * 4);
            Guarded tb(be, make_tensor(nullptr, H_v, T), beta.data(), beta.size() * 4);
            Guarded ts(be, make_tensor(nullptr, S, S, H_v), state0.data(), state0.size() * 4);
            Guarded out(be, make_tensor(nullptr, S, H_v, T));
            Tensor state = ts.t(), output = out.t();
            op(be, mode, tq.t(), tk.t(), tv.t(), tg.t(), tb.t(), state, output);
            const std::string damage = out.guard_damage() + ts.guard_damage();
            return Output{part == 0 ? out.floats() : ts.floats(), damage};
        };
    }
};

TEST(BackendOps, GatedDeltaNet) {
    Tally tally;
    struct Shape { int64_t S, H_k, H_v, T; const char* what; };
    const Shape shapes[] = {
        {32, 2, 4, 1, "small decode"}, {32, 2, 4, 9, "small prompt"},
        {128, 16, 32, 1, "Qwen3.5-4B decode"}, {128, 16, 32, 3, "Qwen3.5-4B prompt"},
    };
    for (const Shape& s : shapes) {
        const DeltaRuleCase c(s.S, s.H_k, s.H_v, s.T);
        auto recurrent = [](Backend& be, MathMode mode, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                            const Tensor& b, Tensor& state, Tensor& out) { be.gated_delta_net(q, k, v, g, b, state, out, mode); };
        const std::string what = shape_text({s.S, s.H_k, s.H_v, s.T}) + " (" + s.what + ")";
        check_case(tally, Op::kGatedDeltaNet, GgmlType::F32, what + " out", &c.naive_out, 1e-12, c.runner(0, recurrent));
        check_case(tally, Op::kGatedDeltaNet, GgmlType::F32, what + " state", &c.naive_state, 1e-12, c.runner(1, recurrent));
    }
}

// The chunked form (chunks of 64, in double): the same results as the token-by-token rule, over
// prompts that cross chunk boundaries.
TEST(BackendOps, GatedDeltaNetChunked) {
    Tally tally;
    struct Shape { int64_t S, H_k, H_v, T; const char* what; };
    const Shape shapes[] = {
        {32, 2, 4, 150, "small prompt: chunks of 64, 64, 22"}, {32, 4, 4, 5, "one short chunk"},
        {128, 16, 32, 70, "Qwen3.5-4B prompt: chunks of 64 and 6"},
    };
    for (const Shape& s : shapes) {
        const DeltaRuleCase c(s.S, s.H_k, s.H_v, s.T);
        auto chunked = [](Backend& be, MathMode, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                          const Tensor& b, Tensor& state, Tensor& out) {
            be.gated_delta_net_chunked(q, k, v, g, b, state, out, 64);
        };
        const std::string what = shape_text({s.S, s.H_k, s.H_v, s.T}) + " chunked (" + s.what + ")";
        check_case(tally, Op::kGatedDeltaNet, GgmlType::F32, what + " out", &c.naive_out, 1e-12, c.runner(0, chunked));
        check_case(tally, Op::kGatedDeltaNet, GgmlType::F32, what + " state", &c.naive_state, 1e-12, c.runner(1, chunked));
    }
}

// Attention shapes: head dims, heads, KV heads, tokens, cells attended (crossing ggml's paddings).
struct AttnShape { int64_t hd_k, hd_v, n_head, n_head_kv, T, n_kv; const char* what; };
const AttnShape kAttnShapes[] = {
    {8, 8, 8, 4, 5, 5, "stories260K prompt"},     {64, 64, 32, 4, 1, 300, "TinyLlama decode"},
    {64, 64, 14, 2, 3, 129, "Qwen2.5-0.5B"},       {192, 128, 16, 16, 2, 40, "DeepSeek-V2-Lite heads"},
    {64, 64, 4, 4, 1, 1, "edge: one cell"},     {64, 64, 32, 4, 7, 7, "TinyLlama prompt"},
    {32, 32, 6, 3, 4, 33, "edge: cells past a tile"}, {192, 128, 16, 16, 1, 257, "DeepSeek-V2-Lite decode"},
};

TEST(BackendOps, SetRows) {
    Tally tally;
    for (const AttnShape& s : kAttnShapes) {
        const int64_t n_ctx = s.n_kv + 3, first = s.n_kv - s.T;
        const std::vector<float> k = randn(s.hd_k * s.n_head_kv * s.T, 51), v = randn(s.hd_v * s.n_head_kv * s.T, 52);
        const std::vector<float> ck = randn(s.hd_k * s.n_head_kv * n_ctx, 53), cv = randn(s.hd_v * s.n_head_kv * n_ctx, 54);
        std::vector<float> naive = ck;
        std::copy(k.begin(), k.end(), naive.begin() + first * s.hd_k * s.n_head_kv);
        std::vector<float> naive_v = cv;
        std::copy(v.begin(), v.end(), naive_v.begin() + first * s.hd_v * s.n_head_kv);
        naive.insert(naive.end(), naive_v.begin(), naive_v.end());
        check_case(tally, Op::kSetRows, GgmlType::F32, std::string(s.what) + " cells " + std::to_string(first) + "+" + std::to_string(s.T),
                   &naive, 0, [&](Backend& be, MathMode mode) {
                       Guarded tk(be, make_tensor(nullptr, s.hd_k, s.n_head_kv, s.T), k.data(), k.size() * 4);
                       Guarded tv(be, make_tensor(nullptr, s.hd_v, s.n_head_kv, s.T), v.data(), v.size() * 4);
                       Guarded tck(be, make_tensor(nullptr, s.hd_k, s.n_head_kv, n_ctx), ck.data(), ck.size() * 4);
                       Guarded tcv(be, make_tensor(nullptr, s.hd_v, s.n_head_kv, n_ctx), cv.data(), cv.size() * 4);
                       be.store_kv(tk.t(), tv.t(), tck.t(), tcv.t(), first, mode);
                       std::vector<float> out = tck.floats(), out_v = tcv.floats();
                       out.insert(out.end(), out_v.begin(), out_v.end());
                       return Output{out, tck.guard_damage() + tcv.guard_damage()};
                   });
    }
}

TEST(BackendOps, AttnScores) {
    Tally tally;
    for (const AttnShape& s : kAttnShapes) {
        const int64_t group = s.n_head / s.n_head_kv;
        const std::vector<float> q = randn(s.hd_k * s.n_head * s.T, 61, 0.5f);
        const std::vector<float> k = rounded_f16(randn(s.hd_k * s.n_head_kv * s.n_kv, 62, 0.5f));
        std::vector<float> naive(s.n_kv * s.T * s.n_head);
        for (int64_t h = 0; h < s.n_head; ++h)
            for (int64_t t = 0; t < s.T; ++t)
                for (int64_t j = 0; j < s.n_kv; ++j) {
                    double acc = 0;
                    for (int64_t d = 0; d < s.hd_k; ++d)
                        acc += static_cast<double>(q[(t * s.n_head + h) * s.hd_k + d]) * k[(j * s.n_head_kv + h / group) * s.hd_k + d];
                    naive[(h * s.T + t) * s.n_kv + j] = static_cast<float>(acc);
                }
        check_case(tally, Op::kMulMat, GgmlType::F16, std::string("kq ") + s.what, &naive, 1e-10, [&](Backend& be, MathMode mode) {
            Guarded tq(be, make_tensor(nullptr, s.hd_k, s.n_head, s.T), q.data(), q.size() * 4);
            Guarded tk(be, make_tensor(nullptr, s.hd_k, s.n_head_kv, s.n_kv), k.data(), k.size() * 4);
            Guarded kq(be, make_tensor(nullptr, s.n_kv, s.T, s.n_head));
            be.attn_scores(tq.t(), tk.t(), s.n_kv, kq.t(), mode);
            return Output{kq.floats(), kq.guard_damage()};
        });
    }
}

TEST(BackendOps, SoftMax) {
    Tally tally;
    for (const AttnShape& s : kAttnShapes)
        for (int variant = 0; variant < 4; ++variant) {  // 2: gemma's sliding window of 5; 3: gpt-oss's, with sinks
            const AttnMask mask = variant == 0 ? AttnMask(true) : variant == 1 ? AttnMask(false) : AttnMask(true, 5);
            const bool causal = mask.causal, with_sinks = variant == 3;
            const std::vector<float> kq = randn(s.n_kv * s.T * s.n_head, 71, 3.0f);
            const std::vector<float> sinks = randn(s.n_head, 72, 2.0f);
            std::vector<int32_t> pos(s.T);
            for (int64_t t = 0; t < s.T; ++t) pos[t] = static_cast<int32_t>(s.n_kv - s.T + t);
            const float scale = 1.0f / std::sqrt(static_cast<float>(s.hd_k));
            std::vector<float> naive(kq.size());
            for (int64_t r = 0; r < s.T * s.n_head; ++r) {
                const int64_t t = r % s.T;
                double mx = -INFINITY, sum = 0;
                auto seen = [&](int64_t j) { return (!causal || j <= pos[t]) && (mask.n_swa == 0 || pos[t] - j < mask.n_swa); };
                for (int64_t j = 0; j < s.n_kv; ++j)
                    if (seen(j)) mx = std::max(mx, static_cast<double>(kq[r * s.n_kv + j] * scale));
                if (with_sinks) mx = std::max(mx, static_cast<double>(sinks[r / s.T]));
                for (int64_t j = 0; j < s.n_kv; ++j)
                    if (seen(j)) sum += std::exp(kq[r * s.n_kv + j] * scale - mx);
                if (with_sinks) sum += std::exp(sinks[r / s.T] - mx);
                for (int64_t j = 0; j < s.n_kv; ++j)
                    naive[r * s.n_kv + j] = seen(j) ? static_cast<float>(std::exp(kq[r * s.n_kv + j] * scale - mx) / sum) : 0.0f;
            }
            const std::string what = with_sinks ? " causal, window 5, sinks" : mask.n_swa ? " causal, window 5" : causal ? " causal" : " no mask";
            check_case(tally, Op::kSoftMax, GgmlType::F32, std::string(s.what) + what, &naive, 1e-12,
                       [&](Backend& be, MathMode mode) {
                           Guarded in(be, make_tensor(nullptr, s.n_kv, s.T, s.n_head), kq.data(), kq.size() * 4);
                           Guarded tpos(be, make_tensor(nullptr, s.T, 1, 1, 1, GgmlType::I32), pos.data(), s.T * 4);
                           Guarded tsinks(be, make_tensor(nullptr, s.n_head), sinks.data(), sinks.size() * 4);
                           Guarded p(be, make_tensor(nullptr, s.n_kv, s.T, s.n_head));
                           AttnMask m = mask;
                           if (with_sinks) m.sinks = tsinks.t().f32();
                           be.softmax_masked(in.t(), scale, tpos.t(), m, p.t(), mode);
                           return Output{p.floats(), p.guard_damage()};
                       });
        }
}

// Probabilities: each row of (n_kv) sums to 1.
std::vector<float> probabilities(int64_t n_kv, int64_t rows, uint32_t seed) {
    std::vector<float> p = randn(n_kv * rows, seed);
    for (int64_t r = 0; r < rows; ++r) {
        double sum = 0;
        for (int64_t j = 0; j < n_kv; ++j) sum += (p[r * n_kv + j] = std::exp(p[r * n_kv + j]));
        for (int64_t j = 0; j < n_kv; ++j) p[r * n_kv + j] = static_cast<float>(p[r * n_kv + j] / sum);
    }
    return p;
}

TEST(BackendOps, AttnValues) {
    Tally tally;
    for (const AttnShape& s : kAttnShapes) {
        const int64_t group = s.n_head / s.n_head_kv;
        const std::vector<float> p = probabilities(s.n_kv, s.T * s.n_head, 81);
        const std::vector<float> v = rounded_f16(randn(s.hd_v * s.n_head_kv * s.n_kv, 82));
        std::vector<float> naive(s.hd_v * s.T * s.n_head);
        for (int64_t h = 0; h < s.n_head; ++h)
            for (int64_t t = 0; t < s.T; ++t)
                for (int64_t d = 0; d < s.hd_v; ++d) {
                    double acc = 0;
                    for (int64_t j = 0; j < s.n_kv; ++j)
                        acc += static_cast<double>(p[(h * s.T + t) * s.n_kv + j]) * v[(j * s.n_head_kv + h / group) * s.hd_v + d];
                    naive[(h * s.T + t) * s.hd_v + d] = static_cast<float>(acc);
                }
        check_case(tally, Op::kMulMat, GgmlType::F16, std::string("kqv ") + s.what, &naive, 1e-10, [&](Backend& be, MathMode mode) {
            Guarded tp(be, make_tensor(nullptr, s.n_kv, s.T, s.n_head), p.data(), p.size() * 4);
            Guarded tv(be, make_tensor(nullptr, s.hd_v, s.n_head_kv, s.n_kv), v.data(), v.size() * 4);
            Guarded kqv(be, make_tensor(nullptr, s.hd_v, s.T, s.n_head));
            be.attn_values(tp.t(), tv.t(), s.n_kv, kqv.t(), mode);
            return Output{kqv.floats(), kqv.guard_damage()};
        });
    }
}

// A causal prompt's probability rows end in zeros (the later cells): the values are the bits of
// the sums over every cell, in exact mode's order and in tinyBLAS's (llama mode, AVX2 build), and
// a non-finite V in those cells (0 * inf) still shows as NaN.
TEST(BackendOps, AttnValuesOfCausalRowsAreTheSumsOverEveryCell) {
    const int64_t hd = 64, n_head = 4, n_head_kv = 2, T = 40, n_kv = 40, group = n_head / n_head_kv;
    std::vector<float> p = probabilities(n_kv, T * n_head, 91);
    for (int64_t h = 0; h < n_head; ++h)
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = t + 1; j < n_kv; ++j) p[(h * T + t) * n_kv + j] = 0.0f;
    auto cpu = make_cpu_backend(2);
    cpu->set_llama_isa(LlamaIsa::kAvx2);
    for (bool inf_in_v : {false, true}) {
        std::vector<float> v = rounded_f16(randn(hd * n_head_kv * n_kv, 92));
        if (inf_in_v) v[(35 * n_head_kv + 1) * hd + 7] = INFINITY;  // cell 35, kv head 1
        for (MathMode mode : {MathMode::kExact, MathMode::kLlama}) {
            std::vector<float> got(hd * T * n_head);
            Tensor tp = make_tensor(p.data(), n_kv, T, n_head), tv = make_tensor(v.data(), hd, n_head_kv, n_kv);
            Tensor out = make_tensor(got.data(), hd, T, n_head);
            cpu->attn_values(tp, tv, n_kv, out, mode);
            const int64_t n_pad = (n_kv + 15) / 16 * 16;
            int wrong = 0, nan = 0;
            for (int64_t h = 0; h < n_head; ++h)
                for (int64_t t = 0; t < T; ++t)
                    for (int64_t d = 0; d < hd; ++d) {
                        std::vector<float> column(n_pad, 0.0f), row(n_pad, 0.0f);
                        for (int64_t j = 0; j < n_kv; ++j) {
                            column[j] = v[(j * n_head_kv + h / group) * hd + d];
                            const float pj = p[(h * T + t) * n_kv + j];
                            row[j] = mode == MathMode::kLlama ? fp16_to_fp32(fp32_to_fp16(pj)) : pj;
                        }
                        const float want = mode == MathMode::kExact ? exact_dot_f32(column.data(), row.data(), n_kv)
                                                                    : ggml_order::dot_tinyblas8(column.data(), row.data(), n_pad);
                        const float g = got[(h * T + t) * hd + d];
                        wrong += std::isnan(want) ? !std::isnan(g) : std::memcmp(&g, &want, 4) != 0;
                        nan += std::isnan(g);
                    }
            EXPECT_EQ(wrong, 0) << math_mode_name(mode) << (inf_in_v ? ", an inf in V" : "");
            EXPECT_EQ(nan > 0, inf_in_v) << math_mode_name(mode);
        }
    }
}

// A decode call (one query row per head) takes each kv head's cache once for every head of its
// group: the scores and values are the bits of one dot per head and output, in each mode's order
// (llama mode as ggml's vec_dot_f16 on an AVX2 build: Q and P rounded to f16, V's columns over
// cells padded to 128; exact mode's sixteen lanes), whatever the chunks and column blocks.
TEST(BackendOps, DecodeAttentionIsOneDotPerHead) {
    struct Shape { int64_t hd, n_head, n_head_kv, n_kv; };
    const Shape shapes[] = {{64, 32, 4, 300}, {128, 16, 2, 129}, {96, 12, 4, 77}, {72, 6, 3, 40}, {64, 4, 4, 1}};
    auto cpu = make_cpu_backend(2);
    cpu->set_llama_isa(LlamaIsa::kAvx2);
    auto f16 = [](float x) { return fp16_to_fp32(fp32_to_fp16(x)); };
    for (const Shape& s : shapes) {
        const int64_t group = s.n_head / s.n_head_kv, n_pad = (s.n_kv + 127) / 128 * 128;
        const std::vector<float> q = randn(s.hd * s.n_head, 101, 0.5f);
        const std::vector<float> k = rounded_f16(randn(s.hd * s.n_head_kv * s.n_kv, 102, 0.5f));
        const std::vector<float> v = rounded_f16(randn(s.hd * s.n_head_kv * s.n_kv, 103));
        const std::vector<float> p = probabilities(s.n_kv, s.n_head, 104);
        for (MathMode mode : {MathMode::kExact, MathMode::kLlama}) {
            const bool llama = mode == MathMode::kLlama;
            std::vector<float> kq(s.n_kv * s.n_head), kqv(s.hd * s.n_head);
            Tensor tq = make_tensor(const_cast<float*>(q.data()), s.hd, s.n_head, 1);
            Tensor tk = make_tensor(const_cast<float*>(k.data()), s.hd, s.n_head_kv, s.n_kv);
            Tensor tv = make_tensor(const_cast<float*>(v.data()), s.hd, s.n_head_kv, s.n_kv);
            Tensor tp = make_tensor(const_cast<float*>(p.data()), s.n_kv, 1, s.n_head);
            Tensor tkq = make_tensor(kq.data(), s.n_kv, 1, s.n_head), tkqv = make_tensor(kqv.data(), s.hd, 1, s.n_head);
            cpu->attn_scores(tq, tk, s.n_kv, tkq, mode);
            cpu->attn_values(tp, tv, s.n_kv, tkqv, mode);
            int wrong_kq = 0, wrong_kqv = 0;
            for (int64_t h = 0; h < s.n_head; ++h) {
                const int64_t g = h / group;
                std::vector<float> qh(s.hd);
                for (int64_t d = 0; d < s.hd; ++d) qh[d] = llama ? f16(q[h * s.hd + d]) : q[h * s.hd + d];
                for (int64_t j = 0; j < s.n_kv; ++j) {
                    const float* kr = k.data() + (j * s.n_head_kv + g) * s.hd;
                    const float want = llama ? ggml_order::vec_dot_f16_f32acc(kr, qh.data(), s.hd, false)
                                             : exact_dot_f32(kr, qh.data(), s.hd);
                    wrong_kq += std::memcmp(&want, &kq[h * s.n_kv + j], 4) != 0;
                }
                std::vector<float> row(n_pad, 0.0f), column(n_pad, 0.0f);
                for (int64_t j = 0; j < s.n_kv; ++j) row[j] = llama ? f16(p[h * s.n_kv + j]) : p[h * s.n_kv + j];
                for (int64_t d = 0; d < s.hd; ++d) {
                    for (int64_t j = 0; j < s.n_kv; ++j) column[j] = v[(j * s.n_head_kv + g) * s.hd + d];
                    const float want = llama ? ggml_order::vec_dot_f16_f32acc(column.data(), row.data(), n_pad, false)
                                             : exact_dot_f32(column.data(), row.data(), s.n_kv);
                    wrong_kqv += std::memcmp(&want, &kqv[h * s.hd + d], 4) != 0;
                }
            }
            const std::string what = std::string(math_mode_name(mode)) + ", head_dim " + std::to_string(s.hd) + ", " +
                                     std::to_string(s.n_head) + "/" + std::to_string(s.n_head_kv) + " heads, " +
                                     std::to_string(s.n_kv) + " cells";
            EXPECT_EQ(wrong_kq, 0) << "kq, " << what;
            EXPECT_EQ(wrong_kqv, 0) << "kqv, " << what;
        }
    }
}

TEST(BackendOps, FlashAttnExt) {
    Tally tally;
    Backends& b = backends();
    for (const AttnShape& s : kAttnShapes)
    for (int variant = 0; variant < 3; ++variant) {  // 1: gemma2's window and soft cap; 2: gpt-oss's window and sinks
        const AttnMask mask = variant == 0 ? AttnMask(true) : variant == 1 ? AttnMask(true, 5, 2.0f) : AttnMask(true, 5);
        const bool with_sinks = variant == 2;
        const std::vector<float> sinks = randn(s.n_head, 94, 2.0f);
        const int64_t group = s.n_head / s.n_head_kv;
        const std::vector<float> q = randn(s.hd_k * s.n_head * s.T, 91, 0.5f);
        const std::vector<float> k = rounded_f16(randn(s.hd_k * s.n_head_kv * s.n_kv, 92, 0.5f));
        const std::vector<float> v = rounded_f16(randn(s.hd_v * s.n_head_kv * s.n_kv, 93));
        std::vector<int32_t> pos(s.T);
        for (int64_t t = 0; t < s.T; ++t) pos[t] = static_cast<int32_t>(s.n_kv - s.T + t);
        const float scale = 1.0f / std::sqrt(static_cast<float>(s.hd_k));
        // softmax(q k^T * scale + causal mask) v in double: the reference, since the CPU runs
        // ggml's flash-attention kernel in llama mode only.
        std::vector<float> naive(s.hd_v * s.n_head * s.T);
        for (int64_t t = 0; t < s.T; ++t)
            for (int64_t h = 0; h < s.n_head; ++h) {
                std::vector<double> w(s.n_kv, 0.0);
                double mx = -INFINITY, sum = 0;
                const int64_t first = mask.n_swa ? std::max<int64_t>(0, pos[t] - mask.n_swa + 1) : 0;
                for (int64_t j = first; j <= pos[t]; ++j) {
                    double acc = 0;
                    for (int64_t d = 0; d < s.hd_k; ++d)
                        acc += static_cast<double>(q[(t * s.n_head + h) * s.hd_k + d]) * k[(j * s.n_head_kv + h / group) * s.hd_k + d];
                    acc *= scale;
                    if (mask.softcap != 0.0f) acc = mask.softcap * std::tanh(acc / mask.softcap);
                    mx = std::max(mx, w[j] = acc);
                }
                if (with_sinks) mx = std::max(mx, static_cast<double>(sinks[h]));
                for (int64_t j = first; j <= pos[t]; ++j) sum += (w[j] = std::exp(w[j] - mx));
                if (with_sinks) sum += std::exp(sinks[h] - mx);
                for (int64_t d = 0; d < s.hd_v; ++d) {
                    double acc = 0;
                    for (int64_t j = first; j <= pos[t]; ++j) acc += w[j] / sum * v[(j * s.n_head_kv + h / group) * s.hd_v + d];
                    naive[(t * s.n_head + h) * s.hd_v + d] = static_cast<float>(acc);
                }
            }
        for (const Target& tg : b.targets) {
            const std::string id = std::string("FLASH_ATTN_EXT ") + s.what +
                                   (with_sinks ? " window 5, sinks" : mask.n_swa ? " window 5, softcap 2" : "") + " on " + tg.label;
            if (!tg.backend->supports(Op::kFlashAttnExt, tg.mode)) {
                std::printf("%-70s NOT SUPPORTED\n", id.c_str());
                ++tally.unsupported;
                continue;
            }
            Backend& be = *tg.backend;
            Guarded tq(be, make_tensor(nullptr, s.hd_k, s.n_head, s.T), q.data(), q.size() * 4);
            Guarded tk(be, make_tensor(nullptr, s.hd_k, s.n_head_kv, s.n_kv), k.data(), k.size() * 4);
            Guarded tv(be, make_tensor(nullptr, s.hd_v, s.n_head_kv, s.n_kv), v.data(), v.size() * 4);
            Guarded tpos(be, make_tensor(nullptr, s.T, 1, 1, 1, GgmlType::I32), pos.data(), s.T * 4);
            Guarded tsinks(be, make_tensor(nullptr, s.n_head), sinks.data(), sinks.size() * 4);
            Guarded out(be, make_tensor(nullptr, s.hd_v, s.n_head, s.T));
            AttnMask m = mask;
            if (with_sinks) m.sinks = tsinks.t().f32();
            be.attn_flash(tq.t(), tk.t(), tv.t(), s.n_kv, scale, tpos.t(), m, out.t());
            const std::vector<float> got = out.floats();
            EXPECT_TRUE(out.guard_damage().empty()) << id << ": " << out.guard_damage();
            const double e = nmse(got, naive);
            EXPECT_LE(e, tolerance(Op::kFlashAttnExt, tg.mode)) << id << ": NMSE " << e;
            for (float x : got) ASSERT_TRUE(std::isfinite(x)) << id;
            std::printf("%-70s nmse %.3g\n", id.c_str(), e);
            ++tally.passed;
        }
    }
}

TEST(BackendOps, Cont) {
    Tally tally;
    for (const AttnShape& s : kAttnShapes) {
        const std::vector<float> x = randn(s.hd_v * s.T * s.n_head, 101);
        std::vector<float> naive(x.size());
        for (int64_t t = 0; t < s.T; ++t)
            for (int64_t h = 0; h < s.n_head; ++h)
                for (int64_t d = 0; d < s.hd_v; ++d)
                    naive[(t * s.n_head + h) * s.hd_v + d] = x[(h * s.T + t) * s.hd_v + d];
        check_case(tally, Op::kCont, GgmlType::F32, std::string("merge heads ") + s.what, &naive, 0, [&](Backend& be, MathMode) {
            Guarded in(be, make_tensor(nullptr, s.hd_v, s.T, s.n_head), x.data(), x.size() * 4);
            Guarded y(be, make_tensor(nullptr, s.hd_v * s.n_head, s.T));
            be.merge_heads(in.t(), y.t());
            return Output{y.floats(), y.guard_damage()};
        });
    }
}

TEST(BackendOps, Cpy) {
    Tally tally;
    // A permuted view made contiguous (axes 0 and 2 swapped), and a contiguous tensor copied into
    // every other column of a wider one: strides on either side.
    for (auto [a_, b_, c_] : {std::tuple<int64_t, int64_t, int64_t>{3, 4, 5}, {64, 7, 16}, {192, 2, 16}}) {
        const int64_t a = a_, b = b_, c = c_;  // clang 14 lambdas cannot capture structured bindings
        for (int direction = 0; direction < 2; ++direction) {
            const std::vector<float> x = randn(a * b * c, 111);
            std::vector<float> naive;
            if (direction == 0) {
                naive.resize(x.size());
                for (int64_t i2 = 0; i2 < c; ++i2)
                    for (int64_t i1 = 0; i1 < b; ++i1)
                        for (int64_t i0 = 0; i0 < a; ++i0) naive[(i0 * b + i1) * c + i2] = x[(i2 * b + i1) * a + i0];
            } else {
                naive.assign(x.size() * 2, 0.0f);
                for (int64_t r = 0; r < b * c; ++r)
                    for (int64_t i0 = 0; i0 < a; ++i0) naive[2 * r * a + i0] = x[r * a + i0];
            }
            for (GgmlType type : {GgmlType::F32, GgmlType::I32}) {
                check_case(tally, Op::kCpy, type, shape_text({a, b, c}) + (direction == 0 ? " permuted -> contiguous" : " -> strided"),
                           type == GgmlType::F32 ? &naive : nullptr, 0, [&](Backend& be, MathMode) {
                               Guarded in(be, make_tensor(nullptr, a, b, c), x.data(), x.size() * 4);
                               if (direction == 0) {
                                   Guarded y(be, make_tensor(nullptr, c, b, a));
                                   Tensor src = in.t().permuted(2, 1, 0, 3);
                                   src.type = type;
                                   Tensor dst = y.t();
                                   dst.type = type;
                                   be.copy(src, dst);
                                   return Output{y.floats(), y.guard_damage()};
                               }
                               std::vector<float> zeros(x.size() * 2, 0.0f);
                               Guarded y(be, make_tensor(nullptr, 2 * a, b, c), zeros.data(), zeros.size() * 4);
                               Tensor dst = y.t().view({a, b, c, 1}, {4, y.t().nb[1], y.t().nb[2], y.t().nb[3]}, 0);
                               Tensor src = in.t();
                               src.type = dst.type = type;
                               be.copy(src, dst);
                               return Output{y.floats(), y.guard_damage()};
                           });
            }
        }
    }
}

TEST(BackendOps, Stats) {
    Tally tally;
    // The statistics as one vector: counts, extremes, moments, then the 64 histogram bins.
    auto as_vector = [](const TensorStats& s) {
        std::vector<float> v = {static_cast<float>(s.count), static_cast<float>(s.nan_count), static_cast<float>(s.inf_count),
                                s.min, s.max, static_cast<float>(s.mean), static_cast<float>(s.rms)};
        for (int64_t h : s.hist) v.push_back(static_cast<float>(h));
        return v;
    };
    auto check = [&](const std::vector<float>& x, const std::string& what) {
        const int64_t n = static_cast<int64_t>(x.size());
        const std::vector<float> naive_v = as_vector(tensor_stats(x.data(), n));
        check_case(tally, Op::kNone, GgmlType::F32, "stats " + std::to_string(n) + " " + what, &naive_v, 0,
                   [&](Backend& be, MathMode) {
                       Guarded in(be, make_tensor(nullptr, n), x.data(), x.size() * 4);
                       TensorStats s;
                       be.stats(in.t(), &s);
                       return Output{as_vector(s), in.guard_damage()};
                   },
                   1e-10);
    };
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{4096}, int64_t{2048 * 33}}) {
        std::vector<float> x = randn(n, 121, 3.0f);
        if (n > 7) x[3] = NAN, x[5] = INFINITY, x[n - 1] = -INFINITY, x[n / 2] = 250.0f;
        check(x, "values with NaN/Inf");
    }
    // No finite value (nothing is binned), and only zeros (their RMS is 0: the scale is 1).
    check(std::vector<float>(5, NAN), "NaNs");
    check({NAN, INFINITY, -INFINITY}, "non-finite values");
    check(std::vector<float>(9, 0.0f), "zeros");
}

// The histogram's axis: linear within +-scale, logarithmic beyond, continuous and increasing, and
// histogram_bin_edge is its inverse; tensor_stats counts each value where histogram_bin_of puts it.
TEST(HistogramBins, AxisIsLinearThenLogarithmicAndEdgesInvertIt) {
    const float inv = 1.0f / 2.0f;  // scale 2
    EXPECT_EQ(histogram_axis_at(1.0f, inv), 0.5);
    EXPECT_EQ(histogram_axis_at(-2.0f, inv), -1.0);
    EXPECT_EQ(histogram_axis_at(4.0f, inv), 2.0);     // u = 2: 1 + log2(2)
    EXPECT_EQ(histogram_axis_at(-16.0f, inv), -4.0);  // u = -8: -(1 + 3)
    EXPECT_EQ(histogram_axis_at(6.0f, inv), 2.5);     // u = 3: between 2 and 4, linear in the mantissa
    float prev = -1e30f;
    double prev_a = histogram_axis_at(prev, inv);
    for (float v = -1e30f; v < 1e30f; v = v < 0 ? v * 0.93f + (v > -1e-3f ? 1e-4f : 0.0f) : v * 1.07f + 1e-4f) {
        const double a = histogram_axis_at(v, inv);
        ASSERT_GE(a, prev_a) << prev << " -> " << v;
        prev = v, prev_a = a;
    }
    for (int trial = 0; trial < 40; ++trial) {
        std::vector<float> x = randn(trial % 2 ? 3000 : 40000, 200 + trial, trial % 3 == 0 ? 1e-3f : 5.0f);
        if (trial % 4 == 1) x[7] = 1e6f, x[9] = -3e4f;  // outliers stretch the axis
        if (trial % 5 == 2) std::fill(x.begin(), x.end(), 0.25f);  // one value: a single bin
        const TensorStats s = tensor_stats(x.data(), static_cast<int64_t>(x.size()));
        int64_t want[kHistogramBins] = {};
        for (float v : x) ++want[histogram_bin_of(v, s.min, s.max, s.hist_scale)];
        for (int k = 0; k < kHistogramBins; ++k) ASSERT_EQ(s.hist[k], want[k]) << "trial " << trial << " bin " << k;
        if (s.min == s.max) continue;
        // Edge k is where bin k starts: a little above it is bin k, a little below bin k - 1.
        for (int k = 1; k < kHistogramBins; ++k) {
            const double e = histogram_bin_edge(s, k);
            const double gap = std::min(e - histogram_bin_edge(s, k - 1), histogram_bin_edge(s, k + 1) - e);
            if (!(gap > 0)) continue;  // bins narrower than a float
            const float above = static_cast<float>(e + 1e-3 * gap), below = static_cast<float>(e - 1e-3 * gap);
            if (above == below) continue;
            EXPECT_EQ(histogram_bin_of(above, s.min, s.max, s.hist_scale), k) << "trial " << trial << " edge " << k;
            EXPECT_EQ(histogram_bin_of(below, s.min, s.max, s.hist_scale), k - 1) << "trial " << trial << " edge " << k;
        }
        EXPECT_FLOAT_EQ(histogram_bin_edge(s, 0), s.min);
        EXPECT_FLOAT_EQ(histogram_bin_edge(s, kHistogramBins), s.max);
    }
}

// tensor_stats runs SIMD loops where the processor has them; they give the plain loops' results bit
// for bit: counts, extremes, moments and every histogram bin, on any thread count, for tails of
// every length, signed zeros, subnormals, NaNs of both signs, infinities, huge values, one repeated
// value, a subnormal rms (an infinite 1/scale) and tensors with no finite value at all.
TEST(HistogramBins, SimdStatisticsEqualThePlainLoops) {
    auto bits = [](const TensorStats& s) {
        std::vector<uint64_t> v = {static_cast<uint64_t>(s.count), static_cast<uint64_t>(s.nan_count),
                                   static_cast<uint64_t>(s.inf_count)};
        uint32_t f;
        uint64_t d;
        for (float x : {s.min, s.max, s.hist_scale}) std::memcpy(&f, &x, 4), v.push_back(f);
        for (double x : {s.mean, s.rms}) std::memcpy(&d, &x, 8), v.push_back(d);
        for (int64_t h : s.hist) v.push_back(static_cast<uint64_t>(h));
        return v;
    };
    const ParallelChunks in_reverse = [](int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
        for (int64_t c = n - 1; c >= 0; --c) fn(c, c + 1);
    };
    std::mt19937 rng(7);
    for (int trial = 0; trial < 300; ++trial) {
        const int64_t n = trial < 80 ? trial + 1 : trial % 7 == 0 ? 3 * kStatsChunk + 13 : 1 + rng() % 9000;
        const float scale = trial % 9 == 4 ? 1e-41f : trial % 5 == 1 ? 1e30f : 3.0f;
        std::vector<float> x = randn(static_cast<size_t>(n), 900 + trial, scale);
        const float specials[] = {0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, 1e-45f, -3e-39f, 3.4e38f, -3.4e38f, 1.0f, -1.0f};
        if (trial % 3 != 0)
            for (int k = 0; k < 1 + static_cast<int>(n / 50); ++k) x[rng() % n] = specials[rng() % 12];
        if (trial % 11 == 5) std::fill(x.begin(), x.end(), -0.75f);
        if (trial % 13 == 6) std::fill(x.begin(), x.end(), NAN);
        const std::vector<uint64_t> want = bits(tensor_stats_scalar(x.data(), n));
        ASSERT_EQ(bits(tensor_stats(x.data(), n)), want) << "trial " << trial << ", " << n << " values";
        ASSERT_EQ(bits(tensor_stats(x.data(), n, in_reverse)), want) << "trial " << trial << ", " << n << " values";
    }
}

#if defined(__x86_64__)
// On a processor with AVX-512, tensor_stats runs the AVX-512 loops; the AVX2 ones must still give
// the same lanes and bins (and so the plain loops' results) for the processors without it.
TEST(HistogramBins, Avx2AndAvx512LoopsAgree) {
    if (!stats_avx2_usable() || !avx512_kernels_usable()) GTEST_SKIP() << "this processor lacks AVX2 or AVX-512";
    std::mt19937 rng(8);
    const float specials[] = {0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, 1e-45f, -3e-39f, 3.4e38f, -3.4e38f, 1.0f, -1.0f};
    for (int trial = 0; trial < 100; ++trial) {
        const int64_t n = 8 * (1 + trial * 7 % 200);
        std::vector<float> x = randn(static_cast<size_t>(n), 1900 + trial, trial % 4 == 1 ? 1e30f : 3.0f);
        for (int k = 0; k < 1 + static_cast<int>(n / 20); ++k) x[rng() % n] = specials[rng() % 12];
        StatsLanes a{}, b{};
        for (int l = 0; l < 8; ++l) a.min[l] = b.min[l] = INFINITY, a.max[l] = b.max[l] = -INFINITY;
        ASSERT_EQ(stats_moments_avx2(x.data(), n, &a), n);
        ASSERT_EQ(stats_moments_avx512(x.data(), n, &b), n);
        ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "moments, trial " << trial;
        const HistogramAxis axis = histogram_axis(-2.5f, trial % 3 == 0 ? 3.4e38f : 4.0f, 1.5f);
        int32_t ha[8][kHistogramBinCount + 1] = {}, hb[8][kHistogramBinCount + 1] = {};
        ASSERT_EQ(stats_histogram_avx2(x.data(), n, axis, ha), n);
        ASSERT_EQ(stats_histogram_avx512(x.data(), n, axis, hb), n);
        ASSERT_EQ(std::memcmp(ha, hb, sizeof ha), 0) << "histogram, trial " << trial;
    }
}
#endif

}  // namespace
}  // namespace ls
