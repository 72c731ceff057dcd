// Tests of the activation quantizers and quantized dot products: consistency with dequantized
// math, then bit-for-bit comparisons with ggml's vec_dot in ../shared/fixtures/quant/rows_q8.gguf.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/quant_blocks.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/vec_dot.h"
#include "engine/gguf/gguf.h"
#include "tests/test_support.h"

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

std::vector<uint8_t> encode(GgmlType type, const std::vector<float>& x, bool as_activation) {
    uint64_t row_bytes = 0;
    EXPECT_TRUE(ggml_row_bytes(type, static_cast<int64_t>(x.size()), &row_bytes));
    std::vector<uint8_t> out(row_bytes);
    const int64_t n = static_cast<int64_t>(x.size());
    const bool ok = as_activation ? quantize_activation_row(type, x.data(), out.data(), n)
                                  : quantize_rows(type, x.data(), out.data(), 1, n);
    EXPECT_TRUE(ok) << ggml_type_name(type);
    return out;
}

// The dot product of the decoded rows, in long double: what every kernel approximates.
long double decoded_dot(GgmlType wt, const std::vector<uint8_t>& w, GgmlType at, const std::vector<uint8_t>& a,
                        int64_t n) {
    std::vector<float> wf(static_cast<size_t>(n)), af(static_cast<size_t>(n));
    EXPECT_TRUE(dequantize_row(wt, w.data(), wf.data(), n));
    if (at == GgmlType::Q8_1) {
        // Q8_1 has no decoder of its own: d * q, like Q8_0.
        const block_q8_1* blocks = reinterpret_cast<const block_q8_1*>(a.data());
        for (int64_t i = 0; i < n; ++i) af[i] = fp16_to_fp32(blocks[i / 32].d) * blocks[i / 32].qs[i % 32];
    } else {
        EXPECT_TRUE(dequantize_row(at, a.data(), af.data(), n));
    }
    long double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<long double>(wf[i]) * af[i];
    return sum;
}

TEST(VecDot, AgreesWithDecodedRowsForEveryType) {
    const int64_t n = 1024;
    const std::vector<float> w_src = wavy_row(n, 0.3f, 0.05f);
    const std::vector<float> a_src = wavy_row(n, 1.1f, 3.0f);
    const GgmlType weight_types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                     GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                                     GgmlType::Q5_K, GgmlType::Q6_K,
                                     GgmlType::F16,  GgmlType::BF16, GgmlType::F32};
    for (GgmlType wt : weight_types) {
        GgmlType at;
        ASSERT_TRUE(vec_dot_activation_type(wt, &at)) << ggml_type_name(wt);
        const std::vector<uint8_t> w = encode(wt, w_src, false);
        const std::vector<uint8_t> a = encode(at, a_src, true);
        float got = 0;
        ASSERT_TRUE(vec_dot_row(wt, n, w.data(), a.data(), &got));
        const long double expected = decoded_dot(wt, w, at, a, n);
        // Only the float accumulation differs from the exact sum of decoded products.
        EXPECT_NEAR(got, static_cast<double>(expected), 1e-5 * n * 0.05 * 3.0) << ggml_type_name(wt);
    }
}

TEST(VecDot, LowBitKQuantsWithHandMadeSuperBlocks) {
    // Arbitrary bit patterns reach scale and sign combinations the quantizers rarely produce.
    block_q2_K q2{};
    block_q3_K q3{};
    for (int i = 0; i < 16; ++i) q2.scales[i] = static_cast<uint8_t>((i % 16) | ((15 - i) << 4));
    for (int i = 0; i < 64; ++i) q2.qs[i] = static_cast<uint8_t>(i * 37 + 11);
    q2.d = 0x2e66;     // 0.1
    q2.dmin = 0x2a66;  // 0.05
    for (int i = 0; i < 32; ++i) q3.hmask[i] = static_cast<uint8_t>(i * 53 + 7);
    for (int i = 0; i < 64; ++i) q3.qs[i] = static_cast<uint8_t>(i * 29 + 3);
    for (int i = 0; i < 12; ++i) q3.scales[i] = static_cast<uint8_t>(i * 71 + 5);
    q3.d = 0x2e66;
    const std::vector<float> a_src = wavy_row(256, 0.7f, 2.0f);
    const std::vector<uint8_t> a = encode(GgmlType::Q8_K, a_src, true);
    const std::vector<uint8_t> w2(reinterpret_cast<uint8_t*>(&q2), reinterpret_cast<uint8_t*>(&q2) + sizeof q2);
    const std::vector<uint8_t> w3(reinterpret_cast<uint8_t*>(&q3), reinterpret_cast<uint8_t*>(&q3) + sizeof q3);
    float got = 0;
    ASSERT_TRUE(vec_dot_row(GgmlType::Q2_K, 256, w2.data(), a.data(), &got));
    EXPECT_NEAR(got, static_cast<double>(decoded_dot(GgmlType::Q2_K, w2, GgmlType::Q8_K, a, 256)), 1e-3);
    ASSERT_TRUE(vec_dot_row(GgmlType::Q3_K, 256, w3.data(), a.data(), &got));
    EXPECT_NEAR(got, static_cast<double>(decoded_dot(GgmlType::Q3_K, w3, GgmlType::Q8_K, a, 256)), 1e-3);
}

TEST(VecDot, RejectsUnsupportedTypesAndLengths) {
    float out = 0;
    GgmlType at;
    EXPECT_FALSE(vec_dot_activation_type(GgmlType::IQ2_XXS, &at));
    EXPECT_FALSE(vec_dot_row(GgmlType::IQ2_XXS, 256, nullptr, nullptr, &out));
    EXPECT_FALSE(vec_dot_row(GgmlType::Q4_K, 100, nullptr, nullptr, &out));
    EXPECT_FALSE(quantize_activation_row(GgmlType::Q4_0, nullptr, nullptr, 32));
}

// ---- rows_q8.gguf ------------------------------------------------------------------------------

// ".k" of the fixture's tensor names.
std::string tensor_suffix(int k) {
    std::string suffix(1, '.');
    suffix += std::to_string(k);
    return suffix;
}

class RowsQ8 : public testing::Test {
protected:
    void SetUp() override {
        if (!test::have_fixtures()) GTEST_SKIP() << "../shared/fixtures not found beside the checkout";
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

    // Quantizes every row of act.k with `quantize` and compares with tensor `expected_name`, block
    // by block.
    void expect_activation_bytes(const std::string& expected_name, GgmlType type,
                                 bool (*quantize)(GgmlType, const float*, void*, int64_t)) {
        for (int k = 0; k < 3; ++k) {
            const std::string suffix = tensor_suffix(k);
            const GgufTensorInfo& expected = get(expected_name + suffix);
            ASSERT_EQ(expected.type, type);
            const std::vector<float> act = f32("act" + suffix);
            const int64_t n = expected.ne[0];
            uint64_t row_bytes = 0;
            ASSERT_TRUE(ggml_row_bytes(type, n, &row_bytes));
            const uint32_t block_bytes = ggml_type_traits(type)->block_bytes;
            std::vector<uint8_t> ours(row_bytes);
            for (int64_t r = 0; r < expected.n_rows(); ++r) {
                ASSERT_TRUE(quantize(type, act.data() + r * n, ours.data(), n));
                const uint8_t* theirs = expected.data + r * row_bytes;
                for (uint64_t off = 0; off < row_bytes; off += block_bytes) {
                    EXPECT_EQ(std::memcmp(ours.data() + off, theirs + off, block_bytes), 0)
                        << expected_name << suffix << " row " << r << " block " << off / block_bytes;
                }
            }
        }
    }

    std::unique_ptr<GgufFile> file_;
};

bool quantize_simd_path(GgmlType type, const float* x, void* y, int64_t n) {
    return quantize_activation_row(type, x, y, n);
}

bool quantize_ref_q8_0(GgmlType, const float* x, void* y, int64_t n) {
    quantize_row_q8_0_ref(x, static_cast<block_q8_0*>(y), n);
    return true;
}

TEST_F(RowsQ8, ActivationQ8_0MatchesX86Path) { expect_activation_bytes("act_q8_0", GgmlType::Q8_0, quantize_simd_path); }

TEST_F(RowsQ8, ActivationQ8_0RefMatchesRefPath) { expect_activation_bytes("act_q8_0_ref", GgmlType::Q8_0, quantize_ref_q8_0); }

TEST_F(RowsQ8, ActivationQ8_KMatches) { expect_activation_bytes("act_q8_K", GgmlType::Q8_K, quantize_simd_path); }

TEST_F(RowsQ8, WeightRowsMatchGgmlQuantizer) {
    const std::pair<const char*, GgmlType> weights[] = {
        {"q4_0", GgmlType::Q4_0}, {"q8_0", GgmlType::Q8_0}, {"q4_K", GgmlType::Q4_K}, {"q6_K", GgmlType::Q6_K}};
    for (int k = 0; k < 3; ++k) {
        const std::string suffix = tensor_suffix(k);
        const std::vector<float> src = f32("w_src" + suffix);
        for (const auto& [name, type] : weights) {
            const GgufTensorInfo& expected = get(std::string("w_") + name + suffix);
            ASSERT_EQ(expected.type, type);
            std::vector<uint8_t> ours(expected.n_bytes);
            ASSERT_TRUE(quantize_rows(type, src.data(), ours.data(), expected.n_rows(), expected.ne[0]));
            EXPECT_EQ(std::memcmp(ours.data(), expected.data, ours.size()), 0) << "w_" << name << suffix;
        }
    }
}

TEST_F(RowsQ8, VecDotMatchesGgmlGenericBitForBit) {
    const std::pair<const char*, GgmlType> weights[] = {
        {"q4_0", GgmlType::Q4_0}, {"q8_0", GgmlType::Q8_0}, {"q4_K", GgmlType::Q4_K}, {"q6_K", GgmlType::Q6_K}};
    int total = 0, equal_simd = 0;
    for (int k = 0; k < 3; ++k) {
        const std::string suffix = tensor_suffix(k);
        for (const auto& [name, type] : weights) {
            const GgufTensorInfo& w = get(std::string("w_") + name + suffix);
            GgmlType act_type;
            ASSERT_TRUE(vec_dot_activation_type(type, &act_type));
            const GgufTensorInfo& act = get(act_type == GgmlType::Q8_K ? "act_q8_K" + suffix : "act_q8_0" + suffix);
            const std::vector<float> generic = f32(std::string("dot_generic.") + name + suffix);
            const std::vector<float> simd = f32(std::string("dot.") + name + suffix);
            const int64_t n = w.ne[0];
            uint64_t w_row_bytes = 0, a_row_bytes = 0;
            ASSERT_TRUE(ggml_row_bytes(type, n, &w_row_bytes));
            ASSERT_TRUE(ggml_row_bytes(act_type, n, &a_row_bytes));
            const int64_t w_rows = w.n_rows();
            ASSERT_EQ(static_cast<int64_t>(generic.size()), w_rows * act.n_rows());
            for (int64_t j = 0; j < act.n_rows(); ++j) {
                for (int64_t i = 0; i < w_rows; ++i) {
                    float ours = 0;
                    ASSERT_TRUE(vec_dot_row(type, n, w.data + i * w_row_bytes, act.data + j * a_row_bytes, &ours));
                    const float expected = generic[j * w_rows + i];
                    EXPECT_EQ(bits_of(ours), bits_of(expected))
                        << name << suffix << " weight row " << i << " . activation row " << j << ": ours "
                        << ours << ", ggml generic " << expected << " (ggml SIMD " << simd[j * w_rows + i] << ")";
                    ++total;
                    equal_simd += bits_of(ours) == bits_of(simd[j * w_rows + i]);
                }
            }
        }
    }
    EXPECT_EQ(total, 108);
    // The SIMD path sums in another order; it must differ sometimes, or the fixture would not tell
    // the two apart (the fixture README counts 62 differences).
    RecordProperty("equal_to_simd_dot", equal_simd);
    EXPECT_EQ(total - equal_simd, 62);
}

}  // namespace
}  // namespace ls
