// The CUDA backend's attention kernels (KV-cache store, scores, masked softmax, values, flash
// attention) on the SIMT emulator, under the forward and random schedules: each result matches the
// CPU backend's in both math modes, and is the same bits under every schedule (fixed reduction
// orders, no atomics), so a missing barrier or a broken shuffle reduction shows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/common/fp16.h"
#include "kernels/simt/simt.h"

namespace ls {
namespace {

using simt::Schedule;

struct Shape {
    int64_t hd_k, hd_v, n_head, n_head_kv, T, n_kv;
    const char* what;
};
// Cells past a values chunk (256) and many flash tiles (32); GQA groups of 2 to 8; MLA head dims.
const Shape kShapes[] = {
    {8, 8, 8, 4, 5, 5, "GQA prompt"},
    {64, 64, 32, 4, 2, 300, "TinyLlama, 300 cells"},
    {64, 64, 14, 2, 3, 129, "Qwen2.5-0.5B"},
    {192, 128, 16, 16, 2, 40, "DeepSeek-V2-Lite MLA"},
    {64, 64, 4, 2, 70, 256, "a 70-token prompt (ggml's tiled flash attention)"},
};

std::vector<float> randn(size_t n, uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

// A device buffer of floats (or i32) on a backend.
class Buffer {
public:
    Buffer(Backend& be, const std::vector<float>& host) : be_(be), n_(host.size()) {
        data_ = be_.alloc(n_ * 4);
        be_.upload(data_, host.data(), n_ * 4);
    }
    ~Buffer() { be_.release(data_); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Tensor tensor(int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, GgmlType type = GgmlType::F32) const {
        return make_tensor(data_, ne0, ne1, ne2, 1, type);
    }
    std::vector<float> download() const {
        std::vector<float> v(n_);
        be_.download(v.data(), data_, n_ * 4);
        return v;
    }

private:
    Backend& be_;
    size_t n_;
    void* data_;
};

// Every op's output for one shape on one backend, from the same inputs.
struct Outputs {
    std::vector<float> cache_k, cache_v, scores, probs, values, flash;
};

Outputs run_attention(Backend& be, MathMode mode, const Shape& s) {
    const int64_t n_ctx = s.n_kv + 2, first = s.n_kv - s.T;
    const std::vector<float> q = randn(s.hd_k * s.n_head * s.T, 1, 0.5f);
    const std::vector<float> k = randn(s.hd_k * s.n_head_kv * s.T, 2, 0.5f);
    const std::vector<float> v = randn(s.hd_v * s.n_head_kv * s.T, 3, 1.0f);
    // Cells before `first` hold earlier tokens' keys and values (f16 values, as llama mode stores).
    std::vector<float> ck = randn(s.hd_k * s.n_head_kv * n_ctx, 4, 0.5f), cv = randn(s.hd_v * s.n_head_kv * n_ctx, 5, 1.0f);
    for (float& x : ck) x = fp16_to_fp32(fp32_to_fp16(x));
    for (float& x : cv) x = fp16_to_fp32(fp32_to_fp16(x));
    std::vector<float> pos_f(s.T);
    for (int64_t t = 0; t < s.T; ++t) {
        const int32_t p = static_cast<int32_t>(first + t);
        std::memcpy(&pos_f[t], &p, 4);
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.hd_k));

    Buffer tq(be, q), tk(be, k), tv(be, v), tck(be, ck), tcv(be, cv), tpos(be, pos_f);
    Buffer kq(be, std::vector<float>(s.n_kv * s.T * s.n_head)), p(be, std::vector<float>(s.n_kv * s.T * s.n_head));
    Buffer kqv(be, std::vector<float>(s.hd_v * s.T * s.n_head)), fa(be, std::vector<float>(s.hd_v * s.n_head * s.T));
    Tensor cache_k = tck.tensor(s.hd_k, s.n_head_kv, n_ctx), cache_v = tcv.tensor(s.hd_v, s.n_head_kv, n_ctx);
    const Tensor pos = tpos.tensor(s.T, 1, 1, GgmlType::I32);
    be.store_kv(tk.tensor(s.hd_k, s.n_head_kv, s.T), tv.tensor(s.hd_v, s.n_head_kv, s.T), cache_k, cache_v, first, mode);
    Tensor scores = kq.tensor(s.n_kv, s.T, s.n_head), probs = p.tensor(s.n_kv, s.T, s.n_head);
    Tensor values = kqv.tensor(s.hd_v, s.T, s.n_head), flash = fa.tensor(s.hd_v, s.n_head, s.T);
    be.attn_scores(tq.tensor(s.hd_k, s.n_head, s.T), cache_k, s.n_kv, scores, mode);
    be.softmax_masked(scores, scale, pos, true, probs, mode);
    be.attn_values(probs, cache_v, s.n_kv, values, mode);
    if (mode == MathMode::kLlama)
        be.attn_flash(tq.tensor(s.hd_k, s.n_head, s.T), cache_k, cache_v, s.n_kv, scale, pos, true, flash);
    return {tck.download(), tcv.download(), kq.download(), p.download(), kqv.download(), fa.download()};
}

double nmse(const std::vector<float>& out, const std::vector<float>& ref) {
    double err = 0, norm = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        const double d = static_cast<double>(out[i]) - ref[i];
        err += d * d;
        norm += static_cast<double>(ref[i]) * ref[i];
    }
    return norm > 0 ? err / norm : err;
}

Backend& emulated() {
    static MadeBackend made = make_backend(BackendKind::kCudaEmulated, BackendOptions{2});
    return *made.backend;
}
Backend& cpu() {
    static std::unique_ptr<Backend> be = [] {
        std::unique_ptr<Backend> b = make_cpu_backend(2);
        // The AVX2 build's f32 sums: llama mode's scores and values then differ from the kernels'
        // by summation order only.
        b->set_llama_isa(LlamaIsa::kAvx2);
        return b;
    }();
    return *be;
}

class CudaAttention : public ::testing::TestWithParam<Schedule> {
protected:
    void SetUp() override { simt::set_schedule(GetParam(), 99); }
    void TearDown() override { simt::set_schedule(Schedule::Forward); }
};

TEST_P(CudaAttention, MatchesTheCpuInBothModes) {
    for (const Shape& s : kShapes)
        for (MathMode mode : {MathMode::kExact, MathMode::kLlama}) {
            SCOPED_TRACE(std::string(s.what) + " in " + math_mode_name(mode) + " mode under " +
                         simt::schedule_name(GetParam()));
            const Outputs got = run_attention(emulated(), mode, s), want = run_attention(cpu(), mode, s);
            // The cache store is a copy (rounded to f16 in llama mode): the same bits.
            EXPECT_EQ(got.cache_k, want.cache_k);
            EXPECT_EQ(got.cache_v, want.cache_v);
            EXPECT_LE(nmse(got.scores, want.scores), 1e-10);
            EXPECT_LE(nmse(got.probs, want.probs), 1e-10);
            EXPECT_LE(nmse(got.values, want.values), 1e-10);
            // An f16 accumulator: a score one ulp apart can round an update the other way.
            if (mode == MathMode::kLlama) {
                EXPECT_LE(nmse(got.flash, want.flash), 1e-6);
            }
        }
}

INSTANTIATE_TEST_SUITE_P(Schedules, CudaAttention, ::testing::Values(Schedule::Forward, Schedule::Random),
                         [](const auto& info) { return std::string(simt::schedule_name(info.param)); });

std::vector<uint32_t> bits(const Outputs& o) {
    std::vector<uint32_t> b;
    for (const std::vector<float>* v : {&o.cache_k, &o.cache_v, &o.scores, &o.probs, &o.values, &o.flash})
        for (float x : *v) {
            uint32_t u;
            std::memcpy(&u, &x, 4);
            b.push_back(u);
        }
    return b;
}

TEST(CudaAttentionSchedules, EveryScheduleGivesTheSameBits) {
    const Shape& s = kShapes[1];
    simt::set_schedule(Schedule::Forward);
    const std::vector<uint32_t> forward = bits(run_attention(emulated(), MathMode::kLlama, s));
    for (uint64_t seed : {1u, 2u, 3u}) {
        simt::set_schedule(Schedule::Random, seed);
        EXPECT_EQ(bits(run_attention(emulated(), MathMode::kLlama, s)), forward) << "random schedule, seed " << seed;
    }
    simt::set_schedule(Schedule::Reverse);
    EXPECT_EQ(bits(run_attention(emulated(), MathMode::kLlama, s)), forward) << "reverse schedule";
    simt::set_schedule(Schedule::Forward);
}

}  // namespace
}  // namespace ls
