// Tests of the x86 SIMD-order dot products: bit-for-bit against ggml's native vec_dot (`dot.<w>.k`
// in ../shared/fixtures/quant/rows_q8.gguf), and close to the exact sum for the unverified types.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/fp16.h"
#include "kernels/common/quant_blocks.h"
#include "kernels/cpu/aligned_vector.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/ggml_order.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/vec_dot.h"
#include "kernels/cpu/vec_dot_x86.h"
#include "engine/gguf/gguf.h"
#include "tests/test_support.h"
#if defined(__x86_64__)
#include "kernels/cpu/vec_dot_avx2.h"
#endif

namespace ls {
namespace {

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

std::vector<float> wavy_row(int64_t n, float phase, float amplitude) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = amplitude * std::sin(phase + 0.731f * i) * (0.2f + (i % 11) * 0.1f);
    return x;
}

// TQ1_0 and TQ2_0 (no quantizer here): random codes (TQ2_0's unused code 3 included, TQ1_0 bytes
// past 242 included) against Q8_K activations: the lanes, with their bsums correction, sum to the
// dot of the decoded rows (the integer part is exact; only the float order may differ).
TEST(VecDotX86, TernaryLanesSumToTheDecodedDot) {
    const int64_t n = 1024;
    const std::vector<float> a_src = wavy_row(n, 1.1f, 3.0f);
    std::vector<uint8_t> act(static_cast<size_t>(n / kQK_K * sizeof(block_q8_K)));
    ASSERT_TRUE(quantize_activation_row(GgmlType::Q8_K, a_src.data(), act.data(), n));
    std::vector<float> a(static_cast<size_t>(n));
    ASSERT_TRUE(dequantize_row(GgmlType::Q8_K, act.data(), a.data(), n));
    uint32_t state = 12345;
    for (GgmlType type : {GgmlType::TQ1_0, GgmlType::TQ2_0}) {
        const uint32_t block_bytes = ggml_type_traits(type)->block_bytes;
        std::vector<uint8_t> w(static_cast<size_t>(n / kQK_K * block_bytes));
        for (uint8_t& b : w) b = static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
        for (size_t off = 0; off < w.size(); off += block_bytes) {
            const uint16_t d = fp32_to_fp16(0.01f + 0.003f * static_cast<float>(off / block_bytes));
            std::memcpy(&w[off + block_bytes - 2], &d, 2);
        }
        std::vector<float> wf(static_cast<size_t>(n));
        ASSERT_TRUE(dequantize_row(type, w.data(), wf.data(), n));
        double want = 0;
        for (int64_t i = 0; i < n; ++i) want += static_cast<double>(wf[i]) * a[i];
        float got = 0;
        ASSERT_TRUE(vec_dot_row_x86(type, n, w.data(), act.data(), &got)) << ggml_type_name(type);
        EXPECT_NEAR(got, want, 1e-5 * (std::fabs(want) + 1.0)) << ggml_type_name(type);
    }
}

// Every emulated type lands near the generic (scalar) dot: only the float order differs.
TEST(VecDotX86, CloseToGenericForEveryType) {
    const int64_t n = 1024;
    const std::vector<float> w_src = wavy_row(n, 0.3f, 0.05f);
    const std::vector<float> a_src = wavy_row(n, 1.1f, 3.0f);
    const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                              GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
    for (GgmlType wt : types) {
        GgmlType at;
        ASSERT_TRUE(vec_dot_activation_type(wt, &at));
        uint64_t wb = 0, ab = 0;
        ASSERT_TRUE(ggml_row_bytes(wt, n, &wb));
        ASSERT_TRUE(ggml_row_bytes(at, n, &ab));
        std::vector<uint8_t> w(wb), a(ab);
        ASSERT_TRUE(quantize_rows(wt, w_src.data(), w.data(), 1, n));
        ASSERT_TRUE(quantize_activation_row(at, a_src.data(), a.data(), n));
        float generic = 0, x86 = 0;
        ASSERT_TRUE(vec_dot_row(wt, n, w.data(), a.data(), &generic));
        ASSERT_TRUE(vec_dot_row_x86(wt, n, w.data(), a.data(), &x86)) << ggml_type_name(wt);
        EXPECT_NEAR(x86, generic, 1e-5 * (std::fabs(generic) + 1.0)) << ggml_type_name(wt);
        if (wt == GgmlType::Q8_0 || wt == GgmlType::Q4_0) {
            float tiny = 0;
            ASSERT_TRUE(dot_q0_tinyblas(wt, n, w.data(), a.data(), &tiny));
            EXPECT_NEAR(tiny, generic, 1e-5 * (std::fabs(generic) + 1.0)) << ggml_type_name(wt);
        }
    }
}

// IQ4_NL has no quantizer here: hand-made blocks, checked against the decoded rows.
TEST(VecDotX86, TinyBlasIq4NlNearDecodedDot) {
    const int64_t n = 256;
    std::vector<block_iq4_nl> w(n / 32);
    for (size_t b = 0; b < w.size(); ++b) {
        w[b].d = fp32_to_fp16(0.01f + 0.003f * static_cast<float>(b));
        for (int j = 0; j < 16; ++j) w[b].qs[j] = static_cast<uint8_t>((b * 7 + j * 13 + 5) & 0xFF);
    }
    const std::vector<float> a_src = wavy_row(n, 0.7f, 2.0f);
    std::vector<block_q8_0> a(n / 32);
    ASSERT_TRUE(quantize_activation_row(GgmlType::Q8_0, a_src.data(), a.data(), n));
    std::vector<float> wf(n), af(n);
    ASSERT_TRUE(dequantize_row(GgmlType::IQ4_NL, w.data(), wf.data(), n));
    ASSERT_TRUE(dequantize_row(GgmlType::Q8_0, a.data(), af.data(), n));
    long double exact = 0;
    for (int64_t i = 0; i < n; ++i) exact += static_cast<long double>(wf[i]) * af[i];
    float got = 0;
    ASSERT_TRUE(dot_q0_tinyblas(GgmlType::IQ4_NL, n, w.data(), a.data(), &got));
    EXPECT_NEAR(got, static_cast<double>(exact), 1e-5 * (std::fabs(static_cast<double>(exact)) + 1.0));
}

// A Q8_0 activation row of n values for a random test: quantized as llama mode does it (even
// trials), or any quants ggml's Q8_0 can hold (-127..127) with scales over a wide range (odd ones).
template <class Next>
std::vector<block_q8_0> q8_0_test_activation(int64_t n, int trial, Next& next) {
    std::vector<block_q8_0> a(static_cast<size_t>(n / 32));
    if (trial % 2 == 0) {
        std::vector<float> x = wavy_row(n, 0.1f * trial, 1.0f + trial % 5);
        EXPECT_TRUE(quantize_activation_row(GgmlType::Q8_0, x.data(), a.data(), n));
        return a;
    }
    for (block_q8_0& b : a) {
        for (int8_t& q : b.qs) q = static_cast<int8_t>(static_cast<int>(next() % 255) - 127);
        b.d = fp32_to_fp16(std::ldexp(static_cast<float>(1 + next() % 1000), -static_cast<int>(next() % 20)));
    }
    return a;
}

// ggml_vec_dot_mxfp4_q8_0 as its AVX2 build runs it, written out plainly from ggml's source with
// the format's own definitions (its level table, the scale 2^(e - 128) by ldexp): 8 int32 lanes per
// block (lane l: elements 4l..4l+3), even blocks fma'ed into one 8-lane accumulator and odd blocks
// into another with d = d_act * d_w, the two added lane by lane, hsum_float_8 ((l + l+4), then
// (0+2) + (1+3)), and a last odd block as sum = fma(d, float(its integer dot), sum).
float mxfp4_dot_reference(int64_t n, const block_mxfp4* w, const block_q8_0* a) {
    static const int kLevels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    auto level = [&](const block_mxfp4& b, int j) { return kLevels[j < 16 ? b.qs[j] & 0xF : b.qs[j - 16] >> 4]; };
    auto scale = [&](int64_t b) { return fp16_to_fp32(a[b].d) * std::ldexp(1.0f, w[b].e - 128); };
    const int64_t nb = n / 32;
    float acc[2][8] = {};
    int64_t b = 0;
    for (; b + 1 < nb; b += 2)
        for (int k = 0; k < 2; ++k) {
            const float d = scale(b + k);
            for (int l = 0; l < 8; ++l) {
                int lane = 0;
                for (int j = 4 * l; j < 4 * l + 4; ++j) lane += level(w[b + k], j) * a[b + k].qs[j];
                acc[k][l] = std::fma(d, static_cast<float>(lane), acc[k][l]);
            }
        }
    float v[8];
    for (int l = 0; l < 8; ++l) v[l] = acc[0][l] + acc[1][l];
    const float h[4] = {v[4] + v[0], v[5] + v[1], v[6] + v[2], v[7] + v[3]};
    float sum = (h[0] + h[2]) + (h[1] + h[3]);
    for (; b < nb; ++b) {
        int isum = 0;
        for (int j = 0; j < 32; ++j) isum += level(w[b], j) * a[b].qs[j];
        sum = std::fma(scale(b), static_cast<float>(isum), sum);
    }
    return sum;
}

// MXFP4 weights against Q8_0 activations: the llama-mode dot (AVX2 kernel where the processor has
// one, the scalar emulation, and the rows kernel of decoding) gives the reference's bits, on random
// blocks with exponents around 1 and at the subnormal edge (e 0, 1), odd and even block counts.
TEST(VecDotX86, Mxfp4SameBitsAsAPlainReference) {
    uint32_t state = 29;
    auto next = [&] { return state = state * 1664525u + 1013904223u; };
    int checked = 0;
    for (int trial = 0; trial < 400; ++trial) {
        const int64_t nb = 1 + trial % 9;
        const int64_t n = 32 * nb;
        std::vector<block_mxfp4> w(static_cast<size_t>(2 * nb));  // two rows
        for (block_mxfp4& b : w) {
            for (uint8_t& q : b.qs) q = static_cast<uint8_t>(next() >> 24);
            const uint32_t pick = next() >> 24;
            b.e = static_cast<uint8_t>(pick < 8 ? pick % 2 : 112 + pick % 24);
        }
        const std::vector<block_q8_0> a = q8_0_test_activation(n, trial, next);
        float fast = 0, emulated = 0, rows[2] = {0, 0};
        for (int r = 0; r < 2; ++r) {
            const float want = mxfp4_dot_reference(n, w.data() + r * nb, a.data());
            ASSERT_TRUE(vec_dot_row_x86(GgmlType::MXFP4, n, w.data() + r * nb, a.data(), &fast));
            ASSERT_TRUE(vec_dot_row_x86_emulated(GgmlType::MXFP4, n, w.data() + r * nb, a.data(), &emulated));
            ASSERT_EQ(bits_of(fast), bits_of(want)) << "trial " << trial << " row " << r << ": " << fast << " vs " << want;
            ASSERT_EQ(bits_of(emulated), bits_of(want)) << "trial " << trial << " row " << r;
            ++checked;
        }
#if defined(__x86_64__)
        if (ls::avx2_kernels_usable()) {
            dot_q8_0_family_avx2_rows(GgmlType::MXFP4, n, w.data(), nb * sizeof(block_mxfp4), 2, a.data(), rows);
            for (int r = 0; r < 2; ++r)
                ASSERT_EQ(bits_of(rows[r]), bits_of(mxfp4_dot_reference(n, w.data() + r * nb, a.data())))
                    << "rows kernel, trial " << trial << " row " << r;
            // The decoding kernel on an activation laid out once (pairs of blocks in one load).
            AlignedVector<uint8_t> prepared(mxfp4_activation_bytes(n));
            mxfp4_prepare_activation(n, a.data(), prepared.data());
            rows[0] = rows[1] = -1.0f;
            dot_mxfp4_avx2_rows(n, w.data(), nb * sizeof(block_mxfp4), 2, prepared.data(), a.data(), rows);
            for (int r = 0; r < 2; ++r)
                ASSERT_EQ(bits_of(rows[r]), bits_of(mxfp4_dot_reference(n, w.data() + r * nb, a.data())))
                    << "prepared rows kernel, trial " << trial << " row " << r;
        }
#endif
    }
    EXPECT_EQ(checked, 800);
    // ggml has no tinyBLAS form for MXFP4: its prompts run vec_dot per column.
    float out = 0;
    EXPECT_FALSE(dot_q0_tinyblas(GgmlType::MXFP4, 32, nullptr, nullptr, &out));
}

// ggml_vec_dot_nvfp4_q8_0 as its AVX2 build runs it, written out plainly with the format's own
// definitions (UE4M3 decoded by ldexp, E2M1 levels doubled): per 64-element block and each of its
// halves h (one Q8_0 block), 8 int32 lanes (lane l: the half's elements 4l..4l+3), lanes 0-3 taking
// sub-block 2h's scale times the activation's, lanes 4-7 sub-block 2h + 1's, fma'ed into one
// 8-lane accumulator, then hsum_float_8.
float nvfp4_dot_reference(int64_t n, const block_nvfp4* w, const block_q8_0* a) {
    static const int kLevels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    auto ue4m3 = [](uint8_t x) {  // the full scale
        if (x == 0 || x == 0x7F) return 0.0f;
        const int exp = (x >> 3) & 15, man = x & 7;
        return exp == 0 ? std::ldexp(static_cast<float>(man), -9) : std::ldexp(1.0f + man / 8.0f, exp - 7);
    };
    auto level = [&](const block_nvfp4& b, int e) {  // element e of the block
        const int s = e / 16, j = e % 16;
        const uint8_t byte = b.qs[8 * s + j % 8];
        return kLevels[j < 8 ? byte & 0xF : byte >> 4];
    };
    float acc[8] = {};
    for (int64_t b = 0; b < n / 64; ++b)
        for (int h = 0; h < 2; ++h) {
            const block_q8_0& y = a[2 * b + h];
            for (int l = 0; l < 8; ++l) {
                int lane = 0;
                for (int e = 4 * l; e < 4 * l + 4; ++e) lane += level(w[b], 32 * h + e) * y.qs[e];
                const float d = 0.5f * ue4m3(w[b].d[2 * h + l / 4]) * fp16_to_fp32(y.d);
                acc[l] = std::fma(d, static_cast<float>(lane), acc[l]);
            }
        }
    const float h4[4] = {acc[4] + acc[0], acc[5] + acc[1], acc[6] + acc[2], acc[7] + acc[3]};
    return (h4[0] + h4[2]) + (h4[1] + h4[3]);
}

// NVFP4 weights against Q8_0 activations: the llama-mode dot (AVX2 kernel where the processor has
// one, and the scalar emulation) gives the reference's bits, on random blocks whose scale bytes
// cover every UE4M3 code (subnormals, 0 and the NaN code 0x7F, bit 7 set).
TEST(VecDotX86, Nvfp4SameBitsAsAPlainReference) {
    uint32_t state = 31;
    auto next = [&] { return state = state * 1664525u + 1013904223u; };
    int checked = 0;
    for (int trial = 0; trial < 400; ++trial) {
        const int64_t nb = 1 + trial % 5;
        const int64_t n = 64 * nb;
        std::vector<block_nvfp4> w(static_cast<size_t>(nb));
        for (block_nvfp4& b : w) {
            for (uint8_t& q : b.qs) q = static_cast<uint8_t>(next() >> 24);
            for (uint8_t& d : b.d) d = static_cast<uint8_t>(trial % 3 == 0 ? next() >> 24 : 40 + (next() >> 24) % 24);
        }
        const std::vector<block_q8_0> a = q8_0_test_activation(n, trial, next);
        const float want = nvfp4_dot_reference(n, w.data(), a.data());
        float fast = 0, emulated = 0;
        ASSERT_TRUE(vec_dot_row_x86(GgmlType::NVFP4, n, w.data(), a.data(), &fast));
        ASSERT_TRUE(vec_dot_row_x86_emulated(GgmlType::NVFP4, n, w.data(), a.data(), &emulated));
        ASSERT_EQ(bits_of(fast), bits_of(want)) << "trial " << trial << ": " << fast << " vs " << want;
        ASSERT_EQ(bits_of(emulated), bits_of(want)) << "trial " << trial;
        ++checked;
    }
    EXPECT_EQ(checked, 400);
    GgmlType act{};
    ASSERT_TRUE(vec_dot_activation_type(GgmlType::NVFP4, &act));
    EXPECT_EQ(act, GgmlType::Q8_0);
    float out = 0;  // rows of 64-element blocks only
    EXPECT_FALSE(vec_dot_row_x86(GgmlType::NVFP4, 32, nullptr, nullptr, &out));
}

// F16C's rounding to f16 and back is the software conversion's, value for value: every f32
// exponent with random mantissas and signs (f16 subnormals, ties, overflow to infinity), zeros.
TEST(VecDotX86, RoundF16RowSameAsTheSoftwareConversion) {
#if defined(__x86_64__)
    if (!(ls::avx2_kernels_usable()))
        GTEST_SKIP() << "no AVX2/FMA/F16C here";
    uint32_t state = 5;
    std::vector<float> x;
    for (uint32_t e = 0; e < 255; ++e)
        for (int k = 0; k < 64; ++k) {
            state = state * 1664525u + 1013904223u;
            // Ties: mantissas whose bits below the f16 mantissa are exactly a half, every 4th value.
            uint32_t mant = state >> 9;
            if (k % 4 == 0) mant = (mant & ~0x1FFFu) | 0x1000u;
            const uint32_t bits = ((state & 1u) << 31) | (e << 23) | mant;
            float f;
            std::memcpy(&f, &bits, 4);
            x.push_back(f);
        }
    x.push_back(0.0f);
    x.push_back(-0.0f);
    x.push_back(65520.0f);  // rounds to infinity
    std::vector<float> y(x.size());
    const int64_t done = round_f16_row_avx2(x.data(), y.data(), static_cast<int64_t>(x.size()));
    ASSERT_EQ(done, static_cast<int64_t>(x.size()) / 8 * 8);
    for (int64_t i = 0; i < done; ++i)
        ASSERT_EQ(bits_of(y[i]), bits_of(fp16_to_fp32(fp32_to_fp16(x[i])))) << "value " << x[i] << " at " << i;
#else
    GTEST_SKIP() << "x86-64 only";
#endif
}

TEST(VecDotX86, RejectsWhatItDoesNotEmulate) {
    float out = 0;
    EXPECT_FALSE(vec_dot_row_x86(GgmlType::F16, 64, nullptr, nullptr, &out));
    EXPECT_FALSE(vec_dot_row_x86(GgmlType::IQ3_S, 256, nullptr, nullptr, &out));
    EXPECT_FALSE(vec_dot_row_x86(GgmlType::Q4_K, 100, nullptr, nullptr, &out));
    EXPECT_FALSE(vec_dot_row_x86(GgmlType::Q4_0, 0, nullptr, nullptr, &out));
    EXPECT_FALSE(dot_q0_tinyblas(GgmlType::Q4_K, 256, nullptr, nullptr, &out));
}

// ---- rows_q8.gguf ------------------------------------------------------------------------------

class RowsQ8X86 : public testing::Test {
protected:
    void SetUp() override {
        LS_REQUIRE_FIXTURES();
        auto r = GgufFile::open(test::fixture_path("quant/rows_q8.gguf"));
        ASSERT_TRUE(r.ok()) << r.error().message;
        file_ = std::move(r).value();
    }

    const GgufTensorInfo& get(const std::string& name) {
        const GgufTensorInfo* t = file_->find_tensor(name);
        if (t == nullptr) throw std::runtime_error("rows_q8.gguf has no tensor " + name);
        return *t;
    }

    std::vector<float> f32(const std::string& name) {
        const GgufTensorInfo& t = get(name);
        EXPECT_EQ(t.type, GgmlType::F32) << name;
        std::vector<float> v(static_cast<size_t>(t.n_elements()));
        std::memcpy(v.data(), t.data, v.size() * sizeof(float));
        return v;
    }

    // Dots every weight row of w_<name>.k with every activation row and compares with dot.<name>.k
    // bit for bit. Returns the number of values that match.
    int compare(const char* name, GgmlType type, int* total) {
        int matched = 0;
        *total = 0;
        for (int k = 0; k < 3; ++k) {
            std::string suffix(1, '.');
            suffix += std::to_string(k);
            const GgufTensorInfo& w = get(std::string("w_") + name + suffix);
            EXPECT_EQ(w.type, type);
            GgmlType act_type;
            EXPECT_TRUE(vec_dot_activation_type(type, &act_type));
            const GgufTensorInfo& act = get(act_type == GgmlType::Q8_K ? "act_q8_K" + suffix : "act_q8_0" + suffix);
            const std::vector<float> simd = f32(std::string("dot.") + name + suffix);
            const int64_t n = w.ne[0];
            uint64_t w_row_bytes = 0, a_row_bytes = 0;
            EXPECT_TRUE(ggml_row_bytes(type, n, &w_row_bytes));
            EXPECT_TRUE(ggml_row_bytes(act_type, n, &a_row_bytes));
            const int64_t w_rows = w.n_rows();
            EXPECT_EQ(static_cast<int64_t>(simd.size()), w_rows * act.n_rows());
            for (int64_t j = 0; j < act.n_rows(); ++j) {
                for (int64_t i = 0; i < w_rows; ++i) {
                    float ours = 0;
                    EXPECT_TRUE(vec_dot_row_x86(type, n, w.data + i * w_row_bytes, act.data + j * a_row_bytes, &ours));
                    const float expected = simd[j * w_rows + i];
                    EXPECT_EQ(bits_of(ours), bits_of(expected))
                        << name << suffix << " weight row " << i << " . activation row " << j << ": ours " << ours
                        << ", ggml x86 " << expected;
                    matched += bits_of(ours) == bits_of(expected);
                    float tiny = 0;
                    if (dot_q0_tinyblas(type, n, w.data + i * w_row_bytes, act.data + j * a_row_bytes, &tiny)) {
                        EXPECT_EQ(bits_of(tiny), bits_of(expected)) << "tinyBLAS " << name << suffix;
                    }
                    ++*total;
                }
            }
        }
        std::printf("dot.%s: %d / %d bit-exact\n", name, matched, *total);
        return matched;
    }

    std::unique_ptr<GgufFile> file_;
};

TEST_F(RowsQ8X86, Q4_0MatchesGgmlX86) {
    int total = 0;
    EXPECT_EQ(compare("q4_0", GgmlType::Q4_0, &total), 27);
    EXPECT_EQ(total, 27);
}

TEST_F(RowsQ8X86, Q8_0MatchesGgmlX86) {
    int total = 0;
    EXPECT_EQ(compare("q8_0", GgmlType::Q8_0, &total), 27);
    EXPECT_EQ(total, 27);
}

TEST_F(RowsQ8X86, Q4_KMatchesGgmlX86) {
    int total = 0;
    EXPECT_EQ(compare("q4_K", GgmlType::Q4_K, &total), 27);
    EXPECT_EQ(total, 27);
}

TEST_F(RowsQ8X86, Q6_KMatchesGgmlX86) {
    int total = 0;
    EXPECT_EQ(compare("q6_K", GgmlType::Q6_K, &total), 27);
    EXPECT_EQ(total, 27);
}

}  // namespace
}  // namespace ls

#if defined(__x86_64__)
#include "kernels/cpu/exact_order.h"
#include "kernels/cpu/vec_dot_avx2.h"
#include "kernels/cpu/vec_dot_avx512.h"

namespace ls {
namespace {

// Exact mode's order written out: product i fused into lane i % 16 in order, lane l added to lane
// l + 8, those eight sums ((0+1)+(2+3))+((4+5)+(6+7)), the leftovers fused in order.
float exact_order_dot(const float* a, const float* b, int64_t n) {
    float lane[16] = {};
    const int64_t whole = n - n % 16;
    for (int64_t i = 0; i < whole; ++i) lane[i % 16] = std::fma(a[i], b[i], lane[i % 16]);
    float h[8];
    for (int l = 0; l < 8; ++l) h[l] = lane[l] + lane[l + 8];
    float sum = ((h[0] + h[1]) + (h[2] + h[3])) + ((h[4] + h[5]) + (h[6] + h[7]));
    for (int64_t i = whole; i < n; ++i) sum = std::fma(a[i], b[i], sum);
    return sum;
}

// The AVX2 kernels return exactly what the scalar emulation returns, on random blocks with the
// extremes (all 6-bit scales and mins, q8 from -128 to 127) as well as typical weights.
// Q4_0, Q5_0, Q8_0 and IQ4_NL (vec_dot and tinyBLAS forms) against Q8_0, and IQ4_XS against Q8_K:
// random bytes everywhere with sane scales, odd and even block counts (IQ4_NL's scalar tail).
TEST(VecDotAvx2, BlockFormatsSameBitsAsTheEmulation) {
    if (!ls::avx2_kernels_usable())
        GTEST_SKIP() << "this processor has no AVX2/FMA/F16C: the emulation runs everywhere";
    uint32_t state = 11;
    auto next = [&] { return state = state * 1664525u + 1013904223u; };
    auto random_bytes = [&](void* p, size_t n) {
        for (size_t i = 0; i < n; ++i) static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(next() >> 24);
    };
    int checked = 0;
    for (int trial = 0; trial < 300; ++trial) {
        const int64_t n = kQK_K * (1 + trial % 5) + (trial % 3 == 0 ? 32 : 0);  // odd block counts too
        std::vector<block_q8_0> a(static_cast<size_t>(n / 32));
        for (block_q8_0& b : a) {
            random_bytes(b.qs, sizeof b.qs);
            for (int8_t& q : b.qs) q = q == -128 ? -127 : q;  // ggml's Q8_0 never holds -128
            b.d = fp32_to_fp16(static_cast<float>(next() % 1000) * 1e-4f);
        }
        for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::IQ4_NL}) {
            uint64_t row_bytes = 0;
            ASSERT_TRUE(ggml_row_bytes(type, n, &row_bytes));
            std::vector<uint8_t> w(row_bytes);
            random_bytes(w.data(), w.size());
            const size_t block_bytes = row_bytes / static_cast<size_t>(n / 32);
            for (int64_t b = 0; b < n / 32; ++b) {  // each block's leading f16 scale made sane
                const uint16_t d = fp32_to_fp16(static_cast<float>(next() % 2000) * 1e-5f);
                std::memcpy(w.data() + b * block_bytes, &d, 2);
                if (type == GgmlType::Q8_0)
                    for (size_t i = 2; i < block_bytes; ++i)
                        if (static_cast<int8_t>(w[b * block_bytes + i]) == -128) w[b * block_bytes + i] = 0x81;
            }
            float fast = 0, emulated = 0;
            ASSERT_TRUE(vec_dot_row_x86(type, n, w.data(), a.data(), &fast));
            ASSERT_TRUE(vec_dot_row_x86_emulated(type, n, w.data(), a.data(), &emulated));
            ASSERT_EQ(bits_of(fast), bits_of(emulated)) << ggml_type_name(type) << " trial " << trial;
            ASSERT_TRUE(dot_q0_tinyblas(type, n, w.data(), a.data(), &fast));
            ASSERT_TRUE(dot_q0_tinyblas_emulated(type, n, w.data(), a.data(), &emulated));
            ASSERT_EQ(bits_of(fast), bits_of(emulated)) << ggml_type_name(type) << " tinyBLAS trial " << trial;
            checked += 2;
            // The prompt kernel: this row against five columns (a group of four and a tail), the
            // activation row rotated by c blocks and its scales halved c times.
            constexpr int kCols = 5;
            const size_t nb = a.size();
            std::vector<block_q8_0> cols(nb * kCols);
            for (int c = 0; c < kCols; ++c)
                for (size_t i = 0; i < nb; ++i) {
                    cols[c * nb + i] = a[(i + c) % nb];
                    cols[c * nb + i].d = fp32_to_fp16(fp16_to_fp32(a[(i + c) % nb].d) * std::ldexp(1.0f, -c));
                }
            std::vector<float> scales(8 * nb);
            q8_0_scales_in_fours(cols.data(), static_cast<int64_t>(nb), n / 32, kCols, scales.data());
            float one_row[kCols];
            dot_q8_0_family_avx2_columns(type, n, w.data(), row_bytes, 1, cols.data(), static_cast<int64_t>(nb), scales.data(),
                                         kCols, one_row, 1);
            for (int c = 0; c < kCols; ++c) {
                ASSERT_TRUE(dot_q0_tinyblas_emulated(type, n, w.data(), cols.data() + c * nb, &emulated));
                ASSERT_EQ(bits_of(one_row[c]), bits_of(emulated)) << ggml_type_name(type) << " columns trial " << trial;
            }
            // Two weight rows at once (the second the first reversed, its scales kept in place).
            std::vector<uint8_t> ww(w);
            ww.insert(ww.end(), w.rbegin(), w.rend());
            for (int64_t b = 0; b < n / 32; ++b) {
                uint8_t* blk = ww.data() + row_bytes + b * block_bytes;
                std::memcpy(blk, w.data() + b * block_bytes, 2);
                if (type == GgmlType::Q8_0)  // ggml's kernels take no -128 quants (see above)
                    for (size_t i = 2; i < block_bytes; ++i)
                        if (static_cast<int8_t>(blk[i]) == -128) blk[i] = 0x81;
            }
            float two_rows[2 * kCols];  // out[r + c * 2]
            dot_q8_0_family_avx2_columns(type, n, ww.data(), row_bytes, 2, cols.data(), static_cast<int64_t>(nb), scales.data(),
                                         kCols, two_rows, 2);
            for (int r = 0; r < 2; ++r)
                for (int c = 0; c < kCols; ++c) {
                    ASSERT_TRUE(dot_q0_tinyblas_emulated(type, n, ww.data() + r * row_bytes, cols.data() + c * nb, &emulated));
                    ASSERT_EQ(bits_of(two_rows[r + 2 * c]), bits_of(emulated)) << ggml_type_name(type) << " two rows trial " << trial;
                }
            // The decode kernel, vec_dot's form (IQ4_NL paired): both rows against the activation
            // row, then seven rows (IQ4_NL: a group of four and three alone), the five added ones
            // random with sane scales.
            float decoded[7];
            dot_q8_0_family_avx2_rows(type, n, ww.data(), row_bytes, 2, a.data(), decoded);
            for (int r = 0; r < 2; ++r) {
                ASSERT_TRUE(vec_dot_row_x86_emulated(type, n, ww.data() + r * row_bytes, a.data(), &emulated));
                ASSERT_EQ(bits_of(decoded[r]), bits_of(emulated)) << ggml_type_name(type) << " rows trial " << trial;
            }
            std::vector<uint8_t> seven(ww);
            seven.resize(7 * row_bytes);
            random_bytes(seven.data() + 2 * row_bytes, 5 * row_bytes);
            for (int64_t b = 2 * (n / 32); b < 7 * (n / 32); ++b) {
                const uint16_t d = fp32_to_fp16(static_cast<float>(next() % 2000) * 1e-5f);
                std::memcpy(seven.data() + b * block_bytes, &d, 2);
                if (type == GgmlType::Q8_0)
                    for (size_t i = 2; i < block_bytes; ++i)
                        if (static_cast<int8_t>(seven[b * block_bytes + i]) == -128) seven[b * block_bytes + i] = 0x81;
            }
            dot_q8_0_family_avx2_rows(type, n, seven.data(), row_bytes, 7, a.data(), decoded);
            for (int r = 0; r < 7; ++r) {
                ASSERT_TRUE(vec_dot_row_x86_emulated(type, n, seven.data() + r * row_bytes, a.data(), &emulated));
                ASSERT_EQ(bits_of(decoded[r]), bits_of(emulated)) << ggml_type_name(type) << " seven rows, row " << r << " trial " << trial;
            }
        }
        // Q4_1 and Q5_1 against Q8_1 (its sum s, any value).
        std::vector<block_q8_1> a1(static_cast<size_t>(n / 32));
        for (block_q8_1& b : a1) {
            random_bytes(b.qs, sizeof b.qs);
            for (int8_t& q : b.qs) q = q == -128 ? -127 : q;
            b.d = fp32_to_fp16(static_cast<float>(next() % 1000) * 1e-4f);
            b.s = fp32_to_fp16(static_cast<float>(static_cast<int>(next() % 2001) - 1000) * 1e-3f);
        }
        for (GgmlType type : {GgmlType::Q4_1, GgmlType::Q5_1}) {
            uint64_t row_bytes = 0;
            ASSERT_TRUE(ggml_row_bytes(type, n, &row_bytes));
            std::vector<uint8_t> w(row_bytes);
            random_bytes(w.data(), w.size());
            const size_t block_bytes = row_bytes / static_cast<size_t>(n / 32);
            for (int64_t b = 0; b < n / 32; ++b) {  // d and m sane
                const uint16_t dm[2] = {fp32_to_fp16(static_cast<float>(next() % 2000) * 1e-5f),
                                        fp32_to_fp16(static_cast<float>(static_cast<int>(next() % 2001) - 1000) * 1e-5f)};
                std::memcpy(w.data() + b * block_bytes, dm, 4);
            }
            float fast = 0, emulated = 0;
            ASSERT_TRUE(vec_dot_row_x86(type, n, w.data(), a1.data(), &fast));
            ASSERT_TRUE(vec_dot_row_x86_emulated(type, n, w.data(), a1.data(), &emulated));
            ASSERT_EQ(bits_of(fast), bits_of(emulated)) << ggml_type_name(type) << " trial " << trial;
            ++checked;
        }
        if (n % kQK_K != 0) continue;
        std::vector<block_iq4_xs> x(static_cast<size_t>(n / kQK_K));
        std::vector<block_q8_K> k(x.size());
        for (block_iq4_xs& b : x) {
            random_bytes(&b, sizeof b);
            b.d = fp32_to_fp16(static_cast<float>(next() % 2000) * 1e-5f);
        }
        for (block_q8_K& b : k) {
            random_bytes(b.qs, sizeof b.qs);
            for (int8_t& q : b.qs) q = q == -128 ? -127 : q;
            b.d = static_cast<float>(next() % 1000) * 1e-4f;
        }
        float fast = 0, emulated = 0;
        ASSERT_TRUE(vec_dot_row_x86(GgmlType::IQ4_XS, n, x.data(), k.data(), &fast));
        ASSERT_TRUE(vec_dot_row_x86_emulated(GgmlType::IQ4_XS, n, x.data(), k.data(), &emulated));
        ASSERT_EQ(bits_of(fast), bits_of(emulated)) << "iq4_xs trial " << trial;
        ++checked;
        // The prompt kernel: one row against three columns, each as the one-column kernel.
        std::vector<block_q8_K> cols(k.size() * 3);
        for (int c = 0; c < 3; ++c)
            for (size_t i = 0; i < k.size(); ++i) cols[c * k.size() + i] = k[i], cols[c * k.size() + i].d = k[i].d * (c + 1);
        float three[3];
        dot_iq4_xs_avx2_columns(n, x.data(), cols.data(), static_cast<int64_t>(k.size()), 3, three, 1);
        for (int c = 0; c < 3; ++c) {
            ASSERT_TRUE(vec_dot_row_x86_emulated(GgmlType::IQ4_XS, n, x.data(), cols.data() + c * k.size(), &emulated));
            ASSERT_EQ(bits_of(three[c]), bits_of(emulated)) << "iq4_xs columns trial " << trial << " column " << c;
        }
        // ggml's IQ panel form: three rows (a pair and a single) against five columns (a group of
        // four and a tail), each as the scalar emulation of that form; one row against one column.
        std::vector<block_iq4_xs> xr(x);
        xr.insert(xr.end(), x.rbegin(), x.rend());
        xr.insert(xr.end(), x.begin(), x.end());
        for (size_t i = x.size(); i < xr.size(); ++i) xr[i].scales_h = static_cast<uint16_t>(next());
        std::vector<block_q8_K> five(k.size() * 5);
        for (int c = 0; c < 5; ++c)
            for (size_t i = 0; i < k.size(); ++i) five[c * k.size() + i] = k[(i + c) % k.size()], five[c * k.size() + i].d = k[i].d * (c + 1);
        const uint64_t xs_row_bytes = x.size() * sizeof(block_iq4_xs);
        float panel[3 * 5];
        dot_iq4_xs_panel_avx2_columns(n, xr.data(), xs_row_bytes, 3, five.data(), static_cast<int64_t>(k.size()), 5, panel, 3);
        for (int r = 0; r < 3; ++r)
            for (int c = 0; c < 5; ++c) {
                ASSERT_TRUE(dot_iq_panel_emulated(GgmlType::IQ4_XS, n, xr.data() + r * x.size(), five.data() + c * k.size(), &emulated));
                ASSERT_EQ(bits_of(panel[r + 3 * c]), bits_of(emulated)) << "iq4_xs panel trial " << trial << " row " << r << " column " << c;
            }
        ASSERT_TRUE(dot_iq_panel(GgmlType::IQ4_XS, n, x.data(), k.data(), &fast));
        ASSERT_TRUE(dot_iq_panel_emulated(GgmlType::IQ4_XS, n, x.data(), k.data(), &emulated));
        ASSERT_EQ(bits_of(fast), bits_of(emulated)) << "iq4_xs panel trial " << trial;
        checked += 16;
        // The decode kernel: seven rows (a group of four and three alone; four of them random, every
        // scale bit pattern) against the activation row, each as vec_dot's emulation.
        std::vector<block_iq4_xs> xs7(xr);
        xs7.resize(7 * x.size());
        for (size_t i = xr.size(); i < xs7.size(); ++i) {
            random_bytes(&xs7[i], sizeof xs7[i]);
            xs7[i].d = fp32_to_fp16(static_cast<float>(next() % 2000) * 1e-5f);
        }
        float decoded[7];
        dot_iq4_xs_avx2_rows(n, xs7.data(), xs_row_bytes, 7, k.data(), decoded);
        for (int r = 0; r < 7; ++r) {
            ASSERT_TRUE(vec_dot_row_x86_emulated(GgmlType::IQ4_XS, n, xs7.data() + r * x.size(), k.data(), &emulated));
            ASSERT_EQ(bits_of(decoded[r]), bits_of(emulated)) << "iq4_xs rows trial " << trial << " row " << r;
        }
        checked += 7;
        // Q5_K: random bytes with sane scales.
        std::vector<block_q5_K> w5(x.size());
        for (block_q5_K& b : w5) {
            random_bytes(&b, sizeof b);
            b.d = fp32_to_fp16(static_cast<float>(next() % 2000) * 1e-5f);
            b.dmin = fp32_to_fp16(static_cast<float>(next() % 2000) * 1e-5f);
        }
        for (block_q8_K& b : k) {
            int32_t sums[16] = {};
            for (int i = 0; i < kQK_K; ++i) sums[i / 16] += b.qs[i];
            for (int g = 0; g < 16; ++g) b.bsums[g] = static_cast<int16_t>(sums[g]);
        }
        ASSERT_TRUE(vec_dot_row_x86(GgmlType::Q5_K, n, w5.data(), k.data(), &fast));
        ASSERT_TRUE(vec_dot_row_x86_emulated(GgmlType::Q5_K, n, w5.data(), k.data(), &emulated));
        ASSERT_EQ(bits_of(fast), bits_of(emulated)) << "q5_K trial " << trial;
        checked += 4;
    }
    EXPECT_GT(checked, 2000);
}

TEST(VecDotAvx2, SameBitsAsTheEmulation) {
    if (!ls::avx2_kernels_usable())
        GTEST_SKIP() << "this processor has no AVX2/FMA/F16C: the emulation runs everywhere";
    uint32_t state = 7;
    auto next = [&] { return state = state * 1664525u + 1013904223u; };
    int checked = 0;
    for (int trial = 0; trial < 400; ++trial) {
        const int64_t n = kQK_K * (1 + trial % 12);
        std::vector<block_q4_K> w(static_cast<size_t>(n / kQK_K));
        std::vector<block_q8_K> a(w.size());
        if (trial % 2 == 0) {
            // Random bytes everywhere (scales, mins and quants take every value), finite scales.
            for (block_q4_K& b : w) {
                auto* bytes = reinterpret_cast<uint8_t*>(&b);
                for (size_t i = 0; i < sizeof b; ++i) bytes[i] = static_cast<uint8_t>(next() >> 24);
                b.d = fp32_to_fp16(static_cast<float>(next() % 2000) * 1e-5f);
                b.dmin = fp32_to_fp16(static_cast<float>(next() % 2000) * 1e-5f);
            }
            for (block_q8_K& b : a) {
                b.d = static_cast<float>(next() % 1000) * 1e-4f;
                int32_t sums[16] = {};
                for (int i = 0; i < kQK_K; ++i) sums[i / 16] += (b.qs[i] = static_cast<int8_t>(next() >> 24));
                for (int g = 0; g < 16; ++g) b.bsums[g] = static_cast<int16_t>(sums[g]);
            }
        } else {
            std::vector<float> wf(static_cast<size_t>(n)), af(static_cast<size_t>(n));
            for (float& v : wf) v = (static_cast<float>(next() % 20001) - 10000.0f) * 1e-5f;
            for (float& v : af) v = (static_cast<float>(next() % 20001) - 10000.0f) * 1e-3f;
            ASSERT_TRUE(quantize_rows(GgmlType::Q4_K, wf.data(), w.data(), 1, n));
            quantize_row_q8_K_ref(af.data(), a.data(), n);
        }
        float fast = 0, emulated = 0;
        ASSERT_TRUE(vec_dot_row_x86(GgmlType::Q4_K, n, w.data(), a.data(), &fast));
        ASSERT_TRUE(vec_dot_row_x86_emulated(GgmlType::Q4_K, n, w.data(), a.data(), &emulated));
        ASSERT_EQ(bits_of(fast), bits_of(emulated)) << "q4_K trial " << trial << ": " << fast << " vs " << emulated;
        // Q6_K on the same activations: random bytes with a sane scale, or quantized weights.
        std::vector<block_q6_K> w6(w.size());
        if (trial % 2 == 0) {
            for (block_q6_K& b : w6) {
                auto* bytes = reinterpret_cast<uint8_t*>(&b);
                for (size_t i = 0; i < sizeof b; ++i) bytes[i] = static_cast<uint8_t>(next() >> 24);
                b.d = fp32_to_fp16(static_cast<float>(next() % 2000) * 1e-5f);
            }
        } else {
            std::vector<float> wf(static_cast<size_t>(n));
            for (float& v : wf) v = (static_cast<float>(next() % 20001) - 10000.0f) * 1e-5f;
            ASSERT_TRUE(quantize_rows(GgmlType::Q6_K, wf.data(), w6.data(), 1, n));
        }
        ASSERT_TRUE(vec_dot_row_x86(GgmlType::Q6_K, n, w6.data(), a.data(), &fast));
        ASSERT_TRUE(vec_dot_row_x86_emulated(GgmlType::Q6_K, n, w6.data(), a.data(), &emulated));
        ASSERT_EQ(bits_of(fast), bits_of(emulated)) << "q6_K trial " << trial << ": " << fast << " vs " << emulated;
        // Several activation rows at once: each output as the one-row kernel gives it.
        const int count = 1 + trial % 7;
        std::vector<block_q8_K> rows(a.size() * count);
        for (int c = 0; c < count; ++c)
            for (size_t i = 0; i < a.size(); ++i) {
                rows[c * a.size() + i] = a[i];
                rows[c * a.size() + i].d = a[i].d * static_cast<float>(c + 1);
            }
        std::vector<float> many(static_cast<size_t>(count) * 3, -1.0f);
        dot_q4_K_avx2_rows(n, w.data(), rows.data(), static_cast<int64_t>(a.size()), count, many.data(), 3);
        for (int c = 0; c < count; ++c) {
            const float one = dot_q4_K_avx2(n, w.data(), rows.data() + c * a.size());
            ASSERT_EQ(bits_of(many[c * 3]), bits_of(one)) << "q4_K rows trial " << trial << " row " << c;
        }
        // Exact mode: the decoded row dotted with f32 activations in the exact order.
        std::vector<float> x(static_cast<size_t>(n)), row(static_cast<size_t>(n));
        for (float& v : x) v = (static_cast<float>(next() % 20001) - 10000.0f) * 1e-3f;
        ASSERT_TRUE(dequantize_row(GgmlType::Q4_K, w.data(), row.data(), n));
        const float fused = dot_q4_K_f32_avx2(n, w.data(), x.data());
        ASSERT_EQ(bits_of(fused), bits_of(exact_order_dot(row.data(), x.data(), n)))
            << "exact q4_K trial " << trial << ": " << fused;
        ++checked;
    }
    EXPECT_EQ(checked, 400);
}


// Decoding runs of K-quant rows in one call: every row the emulation's bits, whatever the run's
// length, for each format the run takes; other formats and widths are left to the caller.
TEST(VecDotAvx2, KQuantRunsSameBitsAsTheEmulation) {
    if (!ls::avx2_kernels_usable())
        GTEST_SKIP() << "this processor has no AVX2/FMA/F16C: the emulation runs everywhere";
    uint32_t state = 11;
    auto next = [&] { return state = state * 1664525u + 1013904223u; };
    struct Format {
        GgmlType type;
        size_t block_bytes;
        size_t d_offset;  // where the block's f16 scale lies, set to a sane value
    };
    const Format formats[] = {{GgmlType::Q4_K, sizeof(block_q4_K), offsetof(block_q4_K, d)},
                              {GgmlType::Q5_K, sizeof(block_q5_K), offsetof(block_q5_K, d)},
                              {GgmlType::Q6_K, sizeof(block_q6_K), offsetof(block_q6_K, d)}};
    for (const Format& f : formats)
        for (int trial = 0; trial < 24; ++trial) {
            const int64_t nb = 1 + trial % 9, n = nb * kQK_K, count = 1 + (trial * 7) % 37;
            const uint64_t row_bytes = nb * f.block_bytes;
            std::vector<uint8_t> w(row_bytes * count);
            for (uint8_t& b : w) b = static_cast<uint8_t>(next() >> 24);
            for (int64_t blk = 0; blk < nb * count; ++blk) {
                const uint16_t d = fp32_to_fp16(static_cast<float>(next() % 2000) * 1e-5f);
                std::memcpy(w.data() + blk * f.block_bytes + f.d_offset, &d, sizeof d);
                if (f.type != GgmlType::Q6_K)  // Q4_K and Q5_K: dmin follows d
                    std::memcpy(w.data() + blk * f.block_bytes + f.d_offset + 2, &d, sizeof d);
            }
            std::vector<float> af(static_cast<size_t>(n));
            for (float& v : af) v = (static_cast<float>(next() % 20001) - 10000.0f) * 1e-3f;
            std::vector<block_q8_K> a(static_cast<size_t>(nb));
            quantize_row_q8_K_ref(af.data(), a.data(), n);
            std::vector<float> out(static_cast<size_t>(count) + 1, -1.0f);
            ASSERT_TRUE(dot_k_quant_avx2_run(f.type, n, w.data(), row_bytes, count, a.data(), out.data()));
            for (int64_t r = 0; r < count; ++r) {
                float emulated = 0;
                ASSERT_TRUE(vec_dot_row_x86_emulated(f.type, n, w.data() + r * row_bytes, a.data(), &emulated));
                ASSERT_EQ(bits_of(out[r]), bits_of(emulated))
                    << ggml_type_name(f.type) << " trial " << trial << " row " << r << " of " << count;
            }
            EXPECT_EQ(out[count], -1.0f) << "written past the run";
        }
    float untouched = -1.0f;
    std::vector<uint8_t> w(4096, 0);
    std::vector<block_q8_K> a(2);
    EXPECT_FALSE(dot_k_quant_avx2_run(GgmlType::Q8_0, kQK_K, w.data(), 272, 1, a.data(), &untouched));
    EXPECT_FALSE(dot_k_quant_avx2_run(GgmlType::IQ4_XS, kQK_K, w.data(), 136, 1, a.data(), &untouched));
    EXPECT_FALSE(dot_k_quant_avx2_run(GgmlType::Q4_K, kQK_K + 32, w.data(), 144, 1, a.data(), &untouched));
    EXPECT_EQ(untouched, -1.0f);
}

// Exact mode's kernels on one instruction set, to be checked against the order written out.
struct ExactKernels {
    const char* isa;
    bool usable;
    int matmul_rows;  // the most rows one matmul call takes
    void (*matmul)(GgmlType, const void*, uint64_t, int, int64_t, const float*, int64_t, float*, int64_t);
    void (*q4_K_rows)(int64_t, const block_q4_K*, int64_t, int, const float*, float*);
    float (*dot)(const float*, const float*, int64_t);
    void (*dequantize_q4_K)(const block_q4_K*, float*, int64_t);
    // The fused decode of other formats and the SIMD decoder of prompts' chunks, where the
    // instruction set has them (false: not this format or length).
    bool (*decode_rows)(GgmlType, int64_t, const void*, uint64_t, int, const float*, float*);
    bool (*dequantize)(GgmlType, const void*, float*, int64_t);
};

ExactKernels avx2_exact() {
    const bool usable = ls::avx2_kernels_usable();
    return {"AVX2", usable, kExactMatmulRows, matmul_exact_avx2, dot_q4_K_f32_avx2_rows, dot_f32_exact_avx2,
            dequantize_q4_K_avx2, exact_decode_rows_avx2, dequantize_avx2};
}

// AVX-512 F/BW/DQ/VL alone: the fused decode as processors without VBMI and GFNI run it.
ExactKernels avx512_exact() {
    return {"AVX-512", avx512_kernels_usable(), kExactMatmulRows512, matmul_exact_avx512, dot_q4_K_f32_avx512_rows,
            dot_f32_exact_avx512, dequantize_q4_K_avx512, exact_decode_rows_avx512_bw, dequantize_avx512};
}

// The same with the fused decode that takes VBMI and GFNI where the processor has them (Q5_K's
// and Q6_K's).
ExactKernels avx512_vbmi_exact() {
    ExactKernels kern = avx512_exact();
    kern.isa = "AVX-512 VBMI/GFNI";
    kern.usable = avx512_vbmi_gfni_usable();
    kern.decode_rows = exact_decode_rows_avx512;
    return kern;
}

// Every kernel gives each output exactly the dequantized row's dot in the exact order, for every
// row count (row groups and their tails), column count (column blocks and their tails), format,
// a length over several chunks and lengths with leftovers.
void check_exact_kernels(const ExactKernels& kern) {
    struct Case {
        GgmlType type;
        int64_t k;
    };
    const Case cases[] = {{GgmlType::Q4_K, 512}, {GgmlType::Q4_K, 2816}, {GgmlType::Q6_K, 768}, {GgmlType::Q8_0, 352},
                          {GgmlType::F16, 200},  {GgmlType::F32, 172},   {GgmlType::F32, 5},    {GgmlType::Q5_K, 256},
                          {GgmlType::F32, 1030}, {GgmlType::Q5_K, 1280}, {GgmlType::Q6_K, 256}, {GgmlType::Q8_0, 1536},
                          {GgmlType::Q8_0, 1056}};
    const int64_t columns[] = {1, 2, 3, 4, 5, 7, 13};
    const int counts[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, kern.matmul_rows};
    int compared = 0, expected = 0, decoded_rows = 0, dequantized = 0;
    for (const Case& c : cases) {
        const int64_t rows = kern.matmul_rows + 1, k = c.k;
        uint64_t row_bytes = 0;
        ASSERT_TRUE(ggml_row_bytes(c.type, k, &row_bytes));
        std::vector<uint8_t> w(row_bytes * rows);
        std::vector<float> wf(static_cast<size_t>(k * rows));
        for (int64_t r = 0; r < rows; ++r) {
            const std::vector<float> src = wavy_row(k, 0.2f * static_cast<float>(r), 0.05f);
            ASSERT_TRUE(quantize_rows(c.type, src.data(), w.data() + r * row_bytes, 1, k)) << ggml_type_name(c.type);
            ASSERT_TRUE(dequantize_row(c.type, w.data() + r * row_bytes, wf.data() + r * k, k));
        }
        for (int64_t T : columns) {
            std::vector<float> x(static_cast<size_t>(k * T));
            for (int64_t t = 0; t < T; ++t) {
                const std::vector<float> col = wavy_row(k, 1.3f + static_cast<float>(t), 2.0f);
                std::copy(col.begin(), col.end(), x.begin() + t * k);
            }
            for (int count : counts) {
                if (count > kern.matmul_rows) continue;
                std::vector<float> y(static_cast<size_t>(T * rows), -1.0f);
                kern.matmul(c.type, w.data() + row_bytes, row_bytes, count, k, x.data(), T, y.data() + 1, rows);
                for (int r = 0; r < count; ++r)
                    for (int64_t t = 0; t < T; ++t) {
                        const float want = exact_order_dot(wf.data() + (r + 1) * k, x.data() + t * k, k);
                        ASSERT_EQ(bits_of(y[t * rows + 1 + r]), bits_of(want))
                            << kern.isa << " " << ggml_type_name(c.type) << " k " << k << " T " << T << " rows "
                            << count << " (" << r << ", " << t << ")";
                        ++compared;
                    }
                expected += count * static_cast<int>(T);
                if (c.type == GgmlType::Q4_K && T == 1) {
                    std::vector<float> out(static_cast<size_t>(count) + 1, -1.0f);
                    kern.q4_K_rows(k, reinterpret_cast<const block_q4_K*>(w.data() + row_bytes),
                                   static_cast<int64_t>(row_bytes / sizeof(block_q4_K)), count, x.data(), out.data());
                    for (int r = 0; r < count; ++r)
                        ASSERT_EQ(bits_of(out[r]), bits_of(exact_order_dot(wf.data() + (r + 1) * k, x.data(), k)))
                            << kern.isa << " q4_K rows " << count << " row " << r;
                    ASSERT_EQ(out[count], -1.0f) << kern.isa << " q4_K rows " << count << " wrote past the last row";
                }
                if (kern.decode_rows != nullptr && T == 1) {
                    std::vector<float> out(static_cast<size_t>(count) + 1, -1.0f);
                    const bool fused = kern.decode_rows(c.type, k, w.data() + row_bytes, row_bytes, count, x.data(), out.data());
                    const bool whole = c.k % kQK_K == 0;
                    const bool format = c.type == GgmlType::Q4_K || c.type == GgmlType::Q5_K ||
                                        c.type == GgmlType::Q6_K || c.type == GgmlType::Q8_0;
                    ASSERT_EQ(fused, whole && format) << kern.isa << " " << ggml_type_name(c.type) << " k " << k;
                    for (int r = 0; r < count && fused; ++r) {
                        ASSERT_EQ(bits_of(out[r]), bits_of(exact_order_dot(wf.data() + (r + 1) * k, x.data(), k)))
                            << kern.isa << " " << ggml_type_name(c.type) << " k " << k << " decode rows " << count << " row " << r;
                        ++decoded_rows;
                    }
                    ASSERT_EQ(out[fused ? count : 0], -1.0f) << kern.isa << " " << ggml_type_name(c.type) << " decode rows " << count;
                }
            }
            const float single = kern.dot(wf.data(), x.data(), k);
            ASSERT_EQ(bits_of(single), bits_of(exact_order_dot(wf.data(), x.data(), k))) << kern.isa << " " << ggml_type_name(c.type);
        }
        std::vector<float> decoded(static_cast<size_t>(k));
        if (c.type == GgmlType::Q4_K) {
            kern.dequantize_q4_K(reinterpret_cast<const block_q4_K*>(w.data()), decoded.data(), k / kQK_K);
            for (int64_t i = 0; i < k; ++i) ASSERT_EQ(bits_of(decoded[i]), bits_of(wf[i])) << kern.isa << " q4_K dequantize " << i;
        }
        if (kern.dequantize != nullptr) {
            std::fill(decoded.begin(), decoded.end(), -1.0f);
            if (kern.dequantize(c.type, w.data(), decoded.data(), k)) {
                for (int64_t i = 0; i < k; ++i)
                    ASSERT_EQ(bits_of(decoded[i]), bits_of(wf[i])) << kern.isa << " " << ggml_type_name(c.type) << " dequantize " << i;
                ++dequantized;
            } else {
                EXPECT_TRUE(c.type != GgmlType::Q4_K && c.type != GgmlType::Q5_K && c.type != GgmlType::Q6_K &&
                            c.type != GgmlType::Q8_0)
                    << kern.isa << " " << ggml_type_name(c.type) << " k " << k << " not decoded";
            }
        }
    }
    EXPECT_EQ(compared, expected);
    EXPECT_GT(compared, 5000);
    if (kern.decode_rows != nullptr) {
        EXPECT_GT(decoded_rows, 300) << kern.isa;
    }
    if (kern.dequantize != nullptr) {
        EXPECT_EQ(dequantized, 9) << kern.isa;  // the Q4_K, Q5_K, Q6_K, Q8_0 cases
    }
}

// The decode kernels decode the quants through fp16 denormals (AVX2: q * 2^-24 times d1 * 2^24) or
// a table of the sixteen values of a sub-block (AVX-512): the same bits for any super-block, the
// smallest and largest half scales and random scale bytes included.
void check_q4_K_extreme_scales(const ExactKernels& kern) {
    const int64_t k = 1024, nb = k / kQK_K, rows = 12;
    const uint16_t halves[] = {0x0001, 0x03FF, 0x0400, 0x3C00, 0x5BFF, 0x7BFF, 0x8001, 0xFBFF};  // +-denormal .. +-65504
    std::vector<block_q4_K> w(static_cast<size_t>(rows * nb));
    uint32_t state = 12345;
    auto next = [&state] { return state = state * 1664525u + 1013904223u; };
    for (size_t i = 0; i < w.size(); ++i) {
        for (uint8_t& b : w[i].qs) b = static_cast<uint8_t>(next() >> 24);
        for (uint8_t& b : w[i].scales) b = static_cast<uint8_t>(next() >> 24);
        w[i].d = halves[i % 8];
        w[i].dmin = halves[(i * 3 + 1) % 8];
    }
    std::vector<float> x = wavy_row(k, 0.7f, 3.0f), wf(static_cast<size_t>(k)), decoded(static_cast<size_t>(k));
    for (int count = 1; count < rows; ++count) {
        std::vector<float> out(static_cast<size_t>(count), -1.0f);
        kern.q4_K_rows(k, w.data() + nb, nb, count, x.data(), out.data());
        for (int r = 0; r < count; ++r) {
            ASSERT_TRUE(dequantize_row(GgmlType::Q4_K, w.data() + (r + 1) * nb, wf.data(), k));
            const float want = exact_order_dot(wf.data(), x.data(), k);
            ASSERT_TRUE(std::isfinite(want));
            ASSERT_EQ(bits_of(out[r]), bits_of(want)) << kern.isa << " rows " << count << " row " << r;
        }
    }
    for (int64_t r = 0; r < rows; ++r) {
        ASSERT_TRUE(dequantize_row(GgmlType::Q4_K, w.data() + r * nb, wf.data(), k));
        kern.dequantize_q4_K(w.data() + r * nb, decoded.data(), nb);
        for (int64_t i = 0; i < k; ++i) ASSERT_EQ(bits_of(decoded[i]), bits_of(wf[i])) << kern.isa << " row " << r << " " << i;
    }
}

// The decode of Q5_K, Q6_K and Q8_0 on random bytes (every quant, scale and min byte), with the
// smallest and largest half scales, and with infinite ones (`infinite`: one block's d in each row;
// its weights then are infinities and NaN, as dequantize_row gives them): the same bits as
// dequantize_row's row in the exact order, row by row and element by element.
void check_other_formats_extreme_scales(const ExactKernels& kern, bool infinite) {
    const uint16_t halves[] = {0x0001, 0x03FF, 0x0400, 0x3C00, 0x5BFF, 0x7BFF, 0x8001, 0xFBFF};  // +-denormal .. +-65504
    struct Format {
        GgmlType type;
        size_t block_bytes;  // one block, its half scales at these offsets
        size_t d, dmin;      // dmin == d: none
    };
    const Format formats[] = {{GgmlType::Q5_K, sizeof(block_q5_K), 0, 2},
                              {GgmlType::Q6_K, sizeof(block_q6_K), offsetof(block_q6_K, d), offsetof(block_q6_K, d)},
                              {GgmlType::Q8_0, sizeof(block_q8_0), 0, 0}};
    const int64_t k = 1024, rows = 9;
    uint32_t state = 777;
    auto next = [&state] { return state = state * 1664525u + 1013904223u; };
    int non_finite = 0;
    for (const Format& f : formats) {
        uint64_t row_bytes = 0;
        ASSERT_TRUE(ggml_row_bytes(f.type, k, &row_bytes));
        std::vector<uint8_t> w(row_bytes * rows);
        for (uint8_t& b : w) b = static_cast<uint8_t>(next() >> 24);
        const size_t per_row = row_bytes / f.block_bytes;
        for (size_t i = 0; i < w.size() / f.block_bytes; ++i) {
            // Row r's block 5r (modulo the row's blocks) infinite: rows of one group meet theirs in
            // different super-blocks.
            const bool inf = infinite && i % per_row == i / per_row * 5 % per_row;
            const uint16_t d = inf ? (i % 2 ? 0x7C00 : 0xFC00) : halves[i % 8], dmin = halves[(i * 3 + 1) % 8];
            std::memcpy(w.data() + i * f.block_bytes + f.d, &d, 2);
            if (f.dmin != f.d) std::memcpy(w.data() + i * f.block_bytes + f.dmin, &dmin, 2);
        }
        std::vector<float> x = wavy_row(k, 0.7f, 3.0f), wf(static_cast<size_t>(k * rows)), decoded(static_cast<size_t>(k));
        for (int64_t r = 0; r < rows; ++r) {
            ASSERT_TRUE(dequantize_row(f.type, w.data() + r * row_bytes, wf.data() + r * k, k));
            ASSERT_TRUE(kern.dequantize(f.type, w.data() + r * row_bytes, decoded.data(), k));
            for (int64_t i = 0; i < k; ++i)
                ASSERT_EQ(bits_of(decoded[i]), bits_of(wf[r * k + i]))
                    << kern.isa << " " << ggml_type_name(f.type) << " row " << r << " " << i;
        }
        for (int count = 1; count < rows; ++count) {
            std::vector<float> out(static_cast<size_t>(count), -1.0f);
            ASSERT_TRUE(kern.decode_rows(f.type, k, w.data() + row_bytes, row_bytes, count, x.data(), out.data()));
            for (int r = 0; r < count; ++r) {
                const float want = exact_order_dot(wf.data() + (r + 1) * k, x.data(), k);
                ASSERT_EQ(std::isfinite(want), !infinite) << kern.isa << " " << ggml_type_name(f.type);
                non_finite += !std::isfinite(want);
                ASSERT_EQ(bits_of(out[r]), bits_of(want))
                    << kern.isa << " " << ggml_type_name(f.type) << " rows " << count << " row " << r;
            }
        }
    }
    if (infinite) {
        EXPECT_GT(non_finite, 50) << kern.isa;
    }
}

TEST(ExactAvx512, OtherFormatsDecodeRowsWithExtremeScales) {
    const ExactKernels kern = avx512_exact();
    if (!kern.usable) GTEST_SKIP() << "this processor has no AVX-512 F/BW/DQ/VL: exact mode runs the AVX2 kernels";
    check_other_formats_extreme_scales(kern, false);
    check_other_formats_extreme_scales(kern, true);
}

TEST(ExactAvx2, OtherFormatsDecodeRowsWithExtremeScales) {
    const ExactKernels kern = avx2_exact();
    if (!kern.usable) GTEST_SKIP() << "this processor has no AVX2/FMA/F16C: exact mode runs the portable loop";
    check_other_formats_extreme_scales(kern, false);
    check_other_formats_extreme_scales(kern, true);
}

TEST(ExactAvx2, EveryKernelSumsInTheExactOrder) {
    const ExactKernels kern = avx2_exact();
    if (!kern.usable) GTEST_SKIP() << "this processor has no AVX2/FMA/F16C: exact mode runs the portable loop";
    check_exact_kernels(kern);
}

TEST(ExactAvx2, Q4KDecodeRowsWithExtremeScales) {
    const ExactKernels kern = avx2_exact();
    if (!kern.usable) GTEST_SKIP() << "this processor has no AVX2/FMA/F16C: exact mode runs the portable loop";
    check_q4_K_extreme_scales(kern);
}

TEST(ExactAvx512, EveryKernelSumsInTheExactOrder) {
    const ExactKernels kern = avx512_exact();
    if (!kern.usable) GTEST_SKIP() << "this processor has no AVX-512 F/BW/DQ/VL: exact mode runs the AVX2 kernels";
    check_exact_kernels(kern);
}

TEST(ExactAvx512Vbmi, EveryKernelSumsInTheExactOrder) {
    const ExactKernels kern = avx512_vbmi_exact();
    if (!kern.usable) GTEST_SKIP() << "this processor has no AVX-512 VBMI and GFNI: exact mode's Q5_K and Q6_K decode run the AVX-512 F/BW kernels";
    check_exact_kernels(kern);
}

TEST(ExactAvx512Vbmi, OtherFormatsDecodeRowsWithExtremeScales) {
    const ExactKernels kern = avx512_vbmi_exact();
    if (!kern.usable) GTEST_SKIP() << "this processor has no AVX-512 VBMI and GFNI: exact mode's Q5_K and Q6_K decode run the AVX-512 F/BW kernels";
    check_other_formats_extreme_scales(kern, false);
    check_other_formats_extreme_scales(kern, true);
}

TEST(ExactAvx512, Q4KDecodeRowsWithExtremeScales) {
    const ExactKernels kern = avx512_exact();
    if (!kern.usable) GTEST_SKIP() << "this processor has no AVX-512 F/BW/DQ/VL: exact mode runs the AVX2 kernels";
    check_q4_K_extreme_scales(kern);
}

// The attention dots: any number of rows a stride apart against one vector, lengths with and
// without leftovers, each as the single dot gives it.
TEST(ExactAvx512, RowsAgainstOneVector) {
    if (!avx512_kernels_usable()) GTEST_SKIP() << "this processor has no AVX-512 F/BW/DQ/VL";
    for (int64_t n : {1, 15, 16, 64, 100, 128, 200}) {
        const int64_t stride = n + 3;
        const int max_rows = 19;
        std::vector<float> a(static_cast<size_t>(stride * max_rows));
        for (int r = 0; r < max_rows; ++r) {
            const std::vector<float> row = wavy_row(n, 0.4f * static_cast<float>(r), 1.5f);
            std::copy(row.begin(), row.end(), a.begin() + r * stride);
        }
        const std::vector<float> b = wavy_row(n, 2.1f, 0.8f);
        for (int count = 1; count <= max_rows; ++count) {
            std::vector<float> out(static_cast<size_t>(count) + 1, -1.0f);
            dot_f32_exact_avx512_rows(a.data(), stride, count, b.data(), n, out.data());
            for (int r = 0; r < count; ++r)
                ASSERT_EQ(bits_of(out[r]), bits_of(exact_order_dot(a.data() + r * stride, b.data(), n)))
                    << "n " << n << " rows " << count << " row " << r;
            ASSERT_EQ(out[count], -1.0f) << "wrote past the last row";
        }
    }
}

// Exact attention values from the cache's rows as they lie: each output the exact dot of V's
// column with the probabilities, for cell counts with and without leftovers and head widths of
// 16 to 128.
// A decode call's attention on AVX-512, sixteen columns of V from its rows as the cache holds
// them (exact mode's order, and vec_dot_f16's 16-lane blocks over cells zero-padded to 128), and
// the scores of many cached keys against one query (vec_dot_f16's blocks), sixteen rows at once.
TEST(ExactAvx512, AttentionDecodeFromTheCacheRows) {
    if (!avx512_kernels_usable()) GTEST_SKIP() << "this processor has no AVX-512 F/BW/DQ/VL";
    for (int64_t n : {1, 15, 16, 17, 40, 64, 97, 200, 2053}) {
        const int64_t stride = 48;  // the cell's other heads lie beside these sixteen columns
        std::vector<float> v(static_cast<size_t>(n * stride));
        for (int64_t j = 0; j < n; ++j) {
            const std::vector<float> row = wavy_row(16, 0.37f * static_cast<float>(j), j % 5 == 0 ? 300.0f : 2.5f);
            std::copy(row.begin(), row.end(), v.begin() + j * stride + 16);
        }
        std::vector<float> p = wavy_row(n, 0.6f, 0.9f);
        for (int64_t j = 3; j < n; j += 7) p[j] = 0.0f;  // masked cells
        std::vector<float> out(17, -1.0f);
        exact_columns_avx512(v.data() + 16, stride, p.data(), n, out.data());
        const int64_t np = (n + 127) / 128 * 128;
        std::vector<float> column(np, 0.0f), padded(np, 0.0f);
        std::copy(p.begin(), p.end(), padded.begin());
        for (int64_t d = 0; d < 16; ++d) {
            for (int64_t j = 0; j < n; ++j) column[j] = v[j * stride + 16 + d];
            ASSERT_EQ(bits_of(out[d]), bits_of(exact_order_dot(column.data(), p.data(), n))) << "exact n " << n << " d " << d;
        }
        ASSERT_EQ(out[16], -1.0f);
        dot_blocks16_columns_avx512(v.data() + 16, stride, p.data(), n, out.data());
        for (int64_t d = 0; d < 16; ++d) {
            for (int64_t j = 0; j < n; ++j) column[j] = v[j * stride + 16 + d];
            ASSERT_EQ(bits_of(out[d]), bits_of(ggml_order::dot_blocks<16>(column.data(), padded.data(), np))) << "f16 n " << n << " d " << d;
        }
        ASSERT_EQ(out[16], -1.0f);
    }
    for (int64_t np : {64, 128, 256}) {
        for (int64_t count : {1, 7, 16, 19, 64}) {
            const int64_t stride = np + 24;
            std::vector<float> a(count * stride), got(count + 1, -7.0f);
            const std::vector<float> b = wavy_row(np, 0.4f, 0.2f);
            for (int64_t r = 0; r < count; ++r) {
                const std::vector<float> row = wavy_row(np, 0.05f * r, r % 4 == 0 ? 1e3f : 1.0f + 0.01f * r);
                std::copy(row.begin(), row.end(), a.begin() + r * stride);
            }
            dot_blocks16_rows_avx512(a.data(), stride, count, b.data(), np, got.data());
            int wrong = got[count] != -7.0f;  // nothing written past the rows
            for (int64_t r = 0; r < count; ++r)
                wrong += bits_of(got[r]) != bits_of(ggml_order::dot_blocks<16>(a.data() + r * stride, b.data(), np));
            EXPECT_EQ(wrong, 0) << "rows against one vector: np " << np << " count " << count;
        }
    }
}

// The portable loop (exact_order.h) is the same order.
TEST(ExactOrder, PortableLoopIsTheOrderWrittenOut) {
    for (int64_t n : {0, 1, 7, 16, 17, 33, 256, 1000}) {
        const std::vector<float> a = wavy_row(n, 0.9f, 1.7f), b = wavy_row(n, 0.1f, 2.3f);
        ASSERT_EQ(bits_of(exact_dot_f32(a.data(), b.data(), n)), bits_of(exact_order_dot(a.data(), b.data(), n))) << n;
    }
}

// Activations are quantized to Q8_K on AVX2 with the same bytes as the scalar loop, whatever the
// input: signed zeros, ties between +max and -max (the first wins), NaNs with any payload,
// infinities, subnormals, the largest magnitude in any lane.
TEST(QuantizeQ8KAvx2, SameBytesAsTheScalarLoop) {
    if (!ls::avx2_kernels_usable())
        GTEST_SKIP() << "this processor has no AVX2/FMA/F16C: the scalar loop runs everywhere";
    uint32_t state = 12345;
    auto next = [&] { return state = state * 1664525u + 1013904223u; };
    auto from_bits = [](uint32_t u) {
        float f;
        std::memcpy(&f, &u, sizeof f);
        return f;
    };
    const int kBlocks = 64;
    std::vector<float> x(static_cast<size_t>(kBlocks) * kQK_K);
    for (int b = 0; b < kBlocks; ++b) {
        float* v = x.data() + b * kQK_K;
        const float scale = std::ldexp(1.f, static_cast<int>(next() % 40) - 20);
        for (int j = 0; j < kQK_K; ++j) v[j] = scale * (static_cast<float>(next() % 20001) / 10000.f - 1.f);
        const int at = static_cast<int>(next() % kQK_K), at2 = static_cast<int>(next() % kQK_K);
        switch (b % 12) {
            case 0: std::fill(v, v + kQK_K, 0.f); break;
            case 1: std::fill(v, v + kQK_K, -0.f); break;
            case 2: v[at] = 4 * scale, v[at2] = -4 * scale; break;  // a tie: whichever comes first
            case 3: v[at] = -4 * scale, v[at2] = 4 * scale; break;
            case 4: v[at] = from_bits(0x7fc00000u); break;             // quiet NaN
            case 5: v[at] = from_bits(0xffc12345u), v[at2] = from_bits(0x7f800001u); break;  // payloads
            case 6: v[at] = INFINITY; break;
            case 7: v[at] = -INFINITY, v[at2] = from_bits(0x7fc00000u); break;
            case 8: for (int j = 0; j < kQK_K; ++j) v[j] = from_bits(next() % 0x00800000u); break;  // subnormal
            case 9: std::fill(v, v + kQK_K, from_bits(0x7fc00000u)); break;  // all NaN
            case 10: v[kQK_K - 1] = 8 * scale; break;                      // the last lane
            default: break;
        }
    }
    std::vector<block_q8_K> want(kBlocks), got(kBlocks);
    quantize_row_q8_K_ref(x.data(), want.data(), static_cast<int64_t>(x.size()));
    std::memset(got.data(), 0x5a, got.size() * sizeof(block_q8_K));
    quantize_row_q8_K_avx2(x.data(), got.data(), static_cast<int64_t>(x.size()));
    for (int b = 0; b < kBlocks; ++b)
        EXPECT_EQ(std::memcmp(&want[b], &got[b], sizeof(block_q8_K)), 0) << "block " << b << " (case " << b % 12 << ")";
}

// llama mode's f32 attention dots on AVX2 give the bits of the scalar emulation of ggml's orders.
TEST(AttentionDotsAvx2, SameBitsAsTheEmulation) {
    if (!ls::avx2_kernels_usable())
        GTEST_SKIP() << "this processor has no AVX2/FMA/F16C: the emulation runs everywhere";
    int checked = 0;
    for (int64_t n : {8, 32, 64, 96, 128, 256, 1024}) {
        for (int seed = 0; seed < 6; ++seed) {
            const std::vector<float> a = wavy_row(n, 0.1f * seed, 3.0f), b = wavy_row(n, 1.7f + seed, 0.01f * (seed + 1));
            EXPECT_EQ(bits_of(dot_tinyblas8_avx2(a.data(), b.data(), n)), bits_of(ggml_order::dot_tinyblas8(a.data(), b.data(), n)))
                << "tinyBLAS n " << n;
            const int64_t np = n & ~int64_t(31);
            EXPECT_EQ(bits_of(dot_blocks8_avx2(a.data(), b.data(), np)), bits_of(ggml_order::dot_blocks<8>(a.data(), b.data(), np)))
                << "vec_dot blocks n " << np;
            checked += 2;
        }
    }
    EXPECT_EQ(checked, 7 * 6 * 2);

    // A decode call's values from V's rows as the cache holds them: each column's dot_blocks<8>
    // with the probabilities, both padded with zeros.
    for (int64_t hd : {8, 64, 72, 128}) {
        for (int64_t n : {1, 31, 33, 100, 2053}) {
            const int64_t stride = 3 * hd + 8, np = (n + 127) / 128 * 128;
            std::vector<float> v(n * stride), p = wavy_row(n, 0.9f, 0.3f), got(hd);
            for (int64_t j = 0; j < n; ++j) {
                const std::vector<float> r = wavy_row(hd, 0.1f * j, 1.0f + 0.001f * j);
                std::copy(r.begin(), r.end(), v.begin() + j * stride);
            }
            dot_blocks8_columns_avx2(v.data(), stride, hd, p.data(), n, got.data());
            int wrong = 0;
            for (int64_t d = 0; d < hd; ++d) {
                std::vector<float> column(np, 0.0f), row(np, 0.0f);
                for (int64_t j = 0; j < n; ++j) column[j] = v[j * stride + d], row[j] = p[j];
                wrong += bits_of(got[d]) != bits_of(ggml_order::dot_blocks<8>(column.data(), row.data(), np));
            }
            EXPECT_EQ(wrong, 0) << "columns of V: hd " << hd << " n " << n;
            exact_columns_avx2(v.data(), stride, hd, p.data(), n, got.data());
            wrong = 0;
            for (int64_t d = 0; d < hd; ++d) {
                std::vector<float> column(n);
                for (int64_t j = 0; j < n; ++j) column[j] = v[j * stride + d];
                wrong += bits_of(got[d]) != bits_of(exact_dot_f32(column.data(), p.data(), n));
            }
            EXPECT_EQ(wrong, 0) << "exact columns of V: hd " << hd << " n " << n;
        }
    }

    // A decode call's scores: dot_blocks<8> of each row, eight rows' sums reduced at once and the
    // rest one by one.
    for (int64_t np : {32, 64, 128}) {
        for (int64_t count : {1, 7, 8, 19, 64}) {
            const int64_t stride = np + 24;
            std::vector<float> a(count * stride), got(count + 1, -7.0f);
            const std::vector<float> b = wavy_row(np, 0.4f, 0.2f);
            for (int64_t r = 0; r < count; ++r) {
                const std::vector<float> row = wavy_row(np, 0.05f * r, 1.0f + 0.01f * r);
                std::copy(row.begin(), row.end(), a.begin() + r * stride);
            }
            dot_blocks8_rows_avx2(a.data(), stride, count, b.data(), np, got.data());
            int wrong = got[count] != -7.0f;  // nothing written past the rows
            for (int64_t r = 0; r < count; ++r)
                wrong += bits_of(got[r]) != bits_of(ggml_order::dot_blocks<8>(a.data() + r * stride, b.data(), np));
            EXPECT_EQ(wrong, 0) << "rows against one vector: np " << np << " count " << count;
        }
    }

    // The tiled form: every output of a block, whatever its tile (4 x 3 and the edges), and the
    // rows' L1 blocks for short and long k.
    for (int64_t k : {8, 64, 2064}) {
        for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1}, {4, 3}, {7, 5}, {70, 26}, {129, 4}}) {
            const int64_t lda = k + 8, ldb = k + 16, ldc = m + 3;
            std::vector<float> a(m * lda), b(n * ldb);
            for (int64_t i = 0; i < m; ++i) {
                const std::vector<float> r = wavy_row(k, 0.3f + 0.01f * i, 2.0f);
                std::copy(r.begin(), r.end(), a.begin() + i * lda);
            }
            for (int64_t j = 0; j < n; ++j) {
                const std::vector<float> r = wavy_row(k, 1.1f + 0.07f * j, 0.05f * (j + 1));
                std::copy(r.begin(), r.end(), b.begin() + j * ldb);
            }
            std::vector<float> c(n * ldc, -7.0f);
            tinyblas8_avx2(a.data(), lda, m, b.data(), ldb, n, k, c.data(), ldc);
            int wrong = 0;
            for (int64_t j = 0; j < n; ++j) {
                for (int64_t i = 0; i < m; ++i)
                    wrong += bits_of(c[j * ldc + i]) != bits_of(ggml_order::dot_tinyblas8(a.data() + i * lda, b.data() + j * ldb, k));
                for (int64_t i = m; i < ldc; ++i) wrong += c[j * ldc + i] != -7.0f;  // nothing written beyond the block
            }
            EXPECT_EQ(wrong, 0) << "tiled tinyBLAS m " << m << " n " << n << " k " << k;
        }
    }
}

// Exact mode's attention dots in tiles give every output the bits of exact_dot_f32 (leftovers past
// the last 16 included).
TEST(ExactAvx2, TiledDotsSameBitsAsTheExactOrder) {
    if (!avx2_kernels_usable()) GTEST_SKIP() << "this processor has no AVX2/FMA/F16C";
    for (int64_t k : {5, 16, 64, 77, 2069}) {
        for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1}, {4, 3}, {7, 5}, {70, 26}}) {
            const int64_t lda = k + 3, ldb = k + 1, ldc = m + 2;
            std::vector<float> a(m * lda), b(n * ldb);
            for (int64_t i = 0; i < m; ++i) {
                const std::vector<float> r = wavy_row(k, 0.2f + 0.013f * i, 1.5f);
                std::copy(r.begin(), r.end(), a.begin() + i * lda);
            }
            for (int64_t j = 0; j < n; ++j) {
                const std::vector<float> r = wavy_row(k, 2.1f + 0.05f * j, 0.02f * (j + 1));
                std::copy(r.begin(), r.end(), b.begin() + j * ldb);
            }
            std::vector<float> c(n * ldc, -7.0f);
            exact_dots_avx2(a.data(), lda, m, b.data(), ldb, n, k, c.data(), ldc);
            int wrong = 0;
            for (int64_t j = 0; j < n; ++j) {
                for (int64_t i = 0; i < m; ++i)
                    wrong += bits_of(c[j * ldc + i]) != bits_of(exact_dot_f32(a.data() + i * lda, b.data() + j * ldb, k));
                for (int64_t i = m; i < ldc; ++i) wrong += c[j * ldc + i] != -7.0f;
            }
            EXPECT_EQ(wrong, 0) << "m " << m << " n " << n << " k " << k;
        }
    }
}

// Softmax's exponentials and sums, and SwiGLU, on AVX2: the bits of the scalar emulation of
// ggml's AVX2 expf (llama mode) and of ggml_v_expf16 (exact mode), over every range of the
// exponent (the scaled, the two-factor and the saturated ones), -inf (masked cells) and NaN.
TEST(AttentionDotsAvx2, ExponentialsAndSwigluSameBitsAsTheEmulation) {
    if (!ls::avx2_kernels_usable())
        GTEST_SKIP() << "this processor has no AVX2/FMA/F16C: the emulation runs everywhere";
    uint32_t state = 5;
    auto next = [&] { return state = state * 1664525u + 1013904223u; };
    auto same = [](float a, float b) { return bits_of(a) == bits_of(b) || (std::isnan(a) && std::isnan(b)); };
    const int64_t n = 4096;
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) {
        const float spread[] = {1.0f, 10.0f, 80.0f, 95.0f, 130.0f, 150.0f};  // |x| / ln 2 up to past 192
        x[i] = (static_cast<float>(next() % 2000001) / 1e6f - 1.0f) * spread[i % 6];
    }
    x[5] = -INFINITY, x[77] = -INFINITY, x[300] = NAN, x[301] = INFINITY, x[900] = -88.8f, x[901] = -103.1f;
    for (int lanes : {8, 16}) {
        for (float max : {0.0f, 3.5f, -2.0f}) {
            std::vector<float> want = x, got = x;
            double want_sum = 0.25;
            for (int64_t j0 = 0; j0 < n; j0 += lanes) {
                float block[16] = {};
                for (int l = 0; l < lanes; ++l) {
                    float& v = want[j0 + l];
                    v = lanes == 8 ? ggml_order::v_expf_avx2(v - max) : ggml_order::v_expf(v - max);
                    block[l] = v;
                }
                want_sum += lanes == 8 ? ggml_order::hsum8(block) : ggml_order::reduce_add16(block);
            }
            const double got_sum = exp_blocks_avx2(got.data(), n, max, lanes, 0.25);
            int wrong = 0;
            for (int64_t i = 0; i < n; ++i) wrong += !same(got[i], want[i]);
            EXPECT_EQ(wrong, 0) << "lanes " << lanes << " max " << max;
            EXPECT_TRUE(std::isnan(want_sum) ? std::isnan(got_sum) : got_sum == want_sum) << lanes;
        }
    }
    std::vector<float> x2(x), g(n), y_want(n), y_got(n);
    for (float& v : x2) v = std::isfinite(v) ? v * 0.1f : v;
    for (int64_t i = 0; i < n; ++i) g[i] = 0.5f + static_cast<float>(i % 13) * 0.25f;
    for (int64_t len : {n, n - 3}) {
        ggml_order::swiglu_row_avx2(x2.data(), g.data(), y_want.data(), len);
        swiglu_row_avx2_vec(x2.data(), g.data(), y_got.data(), len);
        int wrong = 0;
        for (int64_t i = 0; i < len; ++i) wrong += !same(y_got[i], y_want[i]);
        EXPECT_EQ(wrong, 0) << "SwiGLU, llama mode, n " << len;
        for (int64_t i = 0; i < len; ++i) y_want[i] = x2[i] / (1.0f + ggml_order::v_expf(0.0f - x2[i])) * g[i];
        swiglu_exact_avx2(x2.data(), g.data(), y_got.data(), len);
        wrong = 0;
        for (int64_t i = 0; i < len; ++i) wrong += !same(y_got[i], y_want[i]);
        EXPECT_EQ(wrong, 0) << "SwiGLU, exact mode, n " << len;
    }
}

// llama mode's AVX-512 kernels give the bits of the scalar emulation of ggml's orders: the q4_K
// dots (64 quants to an instruction, the lanes added at the end; one row against one column, and
// several weight rows against several columns) on random blocks with every scale and min and extreme activations, and the f32
// orders of ggml's AVX-512
// build (tinyBLAS, vec_dot's blocks, softmax's exponentials and sums, SwiGLU).
TEST(VecDotAvx512, SameBitsAsTheEmulation) {
    if (!avx512_kernels_usable()) GTEST_SKIP() << "this processor has no AVX-512 F/BW/DQ/VL";
    uint32_t state = 11;
    auto next = [&] { return state = state * 1664525u + 1013904223u; };
    int checked = 0;
    for (int trial = 0; trial < 400; ++trial) {
        const int64_t n = kQK_K * (1 + trial % 9);
        std::vector<block_q4_K> w(static_cast<size_t>(n / kQK_K));
        std::vector<block_q8_K> a(w.size() * 5);
        for (block_q4_K& b : w) {
            auto* bytes = reinterpret_cast<uint8_t*>(&b);
            for (size_t i = 0; i < sizeof b; ++i) bytes[i] = static_cast<uint8_t>(next() >> 24);
            b.d = fp32_to_fp16(static_cast<float>(next() % 2000) * 1e-5f);
            b.dmin = fp32_to_fp16(static_cast<float>(next() % 2000) * 1e-5f);
        }
        for (size_t k = 0; k < a.size(); ++k) {
            block_q8_K& b = a[k];
            b.d = static_cast<float>(next() % 1000) * 1e-4f;
            int32_t sums[16] = {};
            for (int i = 0; i < kQK_K; ++i) {
                const int8_t v = trial % 3 == 0 ? static_cast<int8_t>(i % 2 ? -128 : 127) : static_cast<int8_t>(next() >> 24);
                sums[i / 16] += (b.qs[i] = v);
            }
            for (int g = 0; g < 16; ++g) b.bsums[g] = static_cast<int16_t>(sums[g]);
        }
        const int64_t nb = static_cast<int64_t>(w.size());
        float want = 0;
        ASSERT_TRUE(vec_dot_row_x86_emulated(GgmlType::Q4_K, n, w.data(), a.data(), &want));
        ASSERT_EQ(bits_of(dot_q4_K_avx512(n, w.data(), a.data())), bits_of(want)) << "q4_K trial " << trial;
        // Several weight rows (the row again, then its blocks in reverse) against one group of four
        // activation rows and the tails.
        const int count = 1 + trial % 5, rows = 1 + trial % 3;
        std::vector<block_q4_K> w_rows(static_cast<size_t>(rows * nb));
        for (int r = 0; r < rows; ++r)
            for (int64_t b = 0; b < nb; ++b) w_rows[r * nb + b] = w[r % 2 == 0 ? b : nb - 1 - b];
        const int64_t out_stride = rows + 1;
        std::vector<float> many(static_cast<size_t>(count * out_stride), -1.0f);
        std::vector<Q8KColumnBlock> columns(static_cast<size_t>((count + 3) / 4 * nb));
        q8_K_column_blocks(a.data(), nb, count, nb, columns.data());
        dot_q4_K_avx512_rows(n, w_rows.data(), nb * sizeof(block_q4_K), rows, a.data(), nb, columns.data(), count,
                             many.data(), out_stride);
        for (int c = 0; c < count; ++c) {
            for (int r = 0; r < rows; ++r) {
                ASSERT_TRUE(vec_dot_row_x86_emulated(GgmlType::Q4_K, n, w_rows.data() + r * nb, a.data() + c * nb, &want));
                ASSERT_EQ(bits_of(many[c * out_stride + r]), bits_of(want))
                    << "q4_K rows trial " << trial << " weight row " << r << " activation row " << c;
            }
            ASSERT_EQ(many[c * out_stride + rows], -1.0f);
        }
        ++checked;
    }
    EXPECT_EQ(checked, 400);
}

TEST(GgmlOrderAvx512, SameBitsAsTheEmulation) {
    if (!avx512_kernels_usable()) GTEST_SKIP() << "this processor has no AVX-512 F/BW/DQ/VL";
    for (int64_t n : {16, 64, 128, 192, 256, 1024}) {
        for (int seed = 0; seed < 6; ++seed) {
            const std::vector<float> a = wavy_row(n, 0.1f * seed, 3.0f), b = wavy_row(n, 1.7f + seed, 0.01f * (seed + 1));
            EXPECT_EQ(bits_of(dot_tinyblas16_avx512(a.data(), b.data(), n)), bits_of(ggml_order::dot_tinyblas(a.data(), b.data(), n)))
                << "tinyBLAS n " << n;
            const int64_t np = n & ~int64_t(63);
            EXPECT_EQ(bits_of(dot_blocks16_avx512(a.data(), b.data(), np)), bits_of(ggml_order::dot_blocks<16>(a.data(), b.data(), np)))
                << "vec_dot blocks n " << np;
        }
    }
    // Softmax rows: masked cells (-inf), values far below the maximum (flushed to zero), a tail
    // shorter than 16; SwiGLU with gates from -200 to 200 (both of expf's special ranges) and a tail.
    for (int64_t n : {1, 15, 16, 17, 40, 256}) {
        std::vector<float> row = wavy_row(n, 0.3f, 40.0f);
        for (int64_t j = 1; j < n; j += 7) row[j] = -INFINITY;
        for (int64_t j = 3; j < n; j += 11) row[j] = -150.0f;
        float max = -INFINITY;
        for (float v : row) max = std::max(max, v);
        std::vector<float> want = row, got = row;
        double want_sum = 0.0;
        for (int64_t j0 = 0; j0 < n; j0 += 16) {
            float block[16] = {};
            for (int l = 0; l < 16 && j0 + l < n; ++l) block[l] = want[j0 + l] = ggml_order::v_expf(want[j0 + l] - max);
            want_sum += ggml_order::reduce_add16(block);
        }
        const double got_sum = exp_row_avx512(got.data(), n, max);
        EXPECT_EQ(want_sum, got_sum) << "softmax sum n " << n;
        for (int64_t j = 0; j < n; ++j) ASSERT_EQ(bits_of(got[j]), bits_of(want[j])) << "softmax n " << n << " j " << j;
        const std::vector<float> gate = wavy_row(n + 21, 0.9f, 200.0f), up = wavy_row(n + 21, 0.2f, 2.0f);
        std::vector<float> y_want(gate.size()), y_got(gate.size());
        ggml_order::swiglu_row(gate.data(), up.data(), y_want.data(), static_cast<int64_t>(gate.size()));
        swiglu_row_avx512(gate.data(), up.data(), y_got.data(), static_cast<int64_t>(gate.size()));
        for (size_t i = 0; i < gate.size(); ++i)
            ASSERT_EQ(bits_of(y_got[i]), bits_of(y_want[i])) << "swiglu n " << gate.size() << " i " << i << " gate " << gate[i];
        // Exact mode's swiglu: v_expf for every value, the leftovers included.
        swiglu_exact_avx512(gate.data(), up.data(), y_got.data(), static_cast<int64_t>(gate.size()));
        for (size_t i = 0; i < gate.size(); ++i) {
            const float want_exact = gate[i] / (1.0f + ggml_order::v_expf(0.0f - gate[i])) * up[i];
            ASSERT_EQ(bits_of(y_got[i]), bits_of(want_exact)) << "exact swiglu n " << gate.size() << " i " << i;
        }
    }
}

// A prompt's attention products on AVX-512, in 4 x 4 tiles whose lanes are summed sixteen outputs
// at once: every output has the bits of the one-dot kernels (tinyBLAS's sixteen lanes; exact mode's
// order with its leftovers), whatever its tile (the edges included), for short and long k and
// outputs of every size (a sum's rounding shows in its last bits when the terms differ widely).
TEST(AttentionDotsAvx512, TiledDotsSameBitsAsOneDotAtATime) {
    if (!avx512_kernels_usable()) GTEST_SKIP() << "this processor has no AVX-512 F/BW/DQ/VL";
    for (int64_t k : {5, 16, 64, 77, 128, 2069}) {
        for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1}, {4, 4}, {3, 2}, {7, 5}, {70, 26}, {129, 4}, {16, 24}}) {
            const int64_t lda = k + 3, ldb = k + 1, ldc = m + 2;
            std::vector<float> a(m * lda), b(n * ldb);
            for (int64_t i = 0; i < m; ++i) {
                const std::vector<float> r = wavy_row(k, 0.2f + 0.013f * i, i % 3 == 0 ? 1e4f : 1.5f);
                std::copy(r.begin(), r.end(), a.begin() + i * lda);
            }
            for (int64_t j = 0; j < n; ++j) {
                const std::vector<float> r = wavy_row(k, 2.1f + 0.05f * j, 0.02f * (j + 1));
                std::copy(r.begin(), r.end(), b.begin() + j * ldb);
            }
            std::vector<float> c(n * ldc, -7.0f);
            exact_dots_avx512(a.data(), lda, m, b.data(), ldb, n, k, c.data(), ldc);
            int wrong = 0;
            for (int64_t j = 0; j < n; ++j) {
                for (int64_t i = 0; i < m; ++i)
                    wrong += bits_of(c[j * ldc + i]) != bits_of(exact_dot_f32(a.data() + i * lda, b.data() + j * ldb, k));
                for (int64_t i = m; i < ldc; ++i) wrong += c[j * ldc + i] != -7.0f;  // nothing written beyond the block
            }
            EXPECT_EQ(wrong, 0) << "exact m " << m << " n " << n << " k " << k;
            if (k % 16 != 0) continue;
            std::fill(c.begin(), c.end(), -7.0f);
            tinyblas16_avx512(a.data(), lda, m, b.data(), ldb, n, k, c.data(), ldc);
            wrong = 0;
            for (int64_t j = 0; j < n; ++j) {
                for (int64_t i = 0; i < m; ++i)
                    wrong += bits_of(c[j * ldc + i]) != bits_of(ggml_order::dot_tinyblas(a.data() + i * lda, b.data() + j * ldb, k));
                for (int64_t i = m; i < ldc; ++i) wrong += c[j * ldc + i] != -7.0f;
            }
            EXPECT_EQ(wrong, 0) << "tinyBLAS m " << m << " n " << n << " k " << k;
        }
    }
}

}  // namespace
}  // namespace ls
#endif
