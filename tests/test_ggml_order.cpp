// The emulation of ggml's x86 arithmetic: f16 rounding of exact values (used for native f16 FMA),
// the summation orders, and the end-to-end check lives in test_parity.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/common/fp16.h"
#include "kernels/cpu/ggml_order.h"

namespace ls {
namespace {

// Every f16 value rounds to itself; the midpoint of two neighbours rounds to the one with an even
// mantissa; a hair above / below the midpoint rounds away / towards.
TEST(GgmlOrder, RoundToF16OnEveryValueAndMidpoint) {
    int checked = 0;
    for (uint32_t h = 0; h < 0x7C00; ++h) {  // positive finite halves
        const double a = fp16_to_fp32(static_cast<uint16_t>(h));
        ASSERT_EQ(ggml_order::round_to_f16(a), static_cast<float>(a)) << h;
        ASSERT_EQ(ggml_order::round_to_f16(-a), -static_cast<float>(a)) << h;
        if (h + 1 >= 0x7C00) continue;
        const double b = fp16_to_fp32(static_cast<uint16_t>(h + 1));
        const double mid = (a + b) / 2;
        const float even = static_cast<float>((h & 1) ? b : a);
        ASSERT_EQ(ggml_order::round_to_f16(mid), even) << h;
        const double eps = (b - a) / 1024;
        ASSERT_EQ(ggml_order::round_to_f16(mid + eps), static_cast<float>(b)) << h;
        ASSERT_EQ(ggml_order::round_to_f16(mid - eps), static_cast<float>(a)) << h;
        ++checked;
    }
    EXPECT_EQ(checked, 0x7C00 - 1);
    EXPECT_EQ(ggml_order::round_to_f16(65520.0), INFINITY);        // halfway to the next power: overflow
    EXPECT_EQ(ggml_order::round_to_f16(65519.0), 65504.0f);
    EXPECT_EQ(ggml_order::round_to_f16(std::ldexp(1.0, -25)), 0.0f);  // half the smallest subnormal: even (0)
    EXPECT_EQ(ggml_order::round_to_f16(std::ldexp(1.5, -25)), std::ldexp(1.0f, -24));
}

TEST(GgmlOrder, ReduceAdd16Order) {
    // Values whose float sum depends on the order: only ggml's tree gives this result.
    float v[16];
    for (int i = 0; i < 16; ++i) v[i] = (i % 2 ? 1.0f : -1.0f) * std::ldexp(1.0f, i % 3 == 0 ? 24 : 0);
    float tree = ggml_order::reduce_add16(v);
    float t3[8], t6[4];
    for (int i = 0; i < 8; ++i) t3[i] = v[i] + v[i + 8];
    for (int i = 0; i < 4; ++i) t6[i] = t3[i] + t3[i + 4];
    EXPECT_EQ(tree, (t6[0] + t6[2]) + (t6[1] + t6[3]));
}

TEST(GgmlOrder, DotProductsAreExactOnIntegers) {
    // On small integers every order gives the exact sum: a check of indexing, not of order.
    std::vector<float> a(300), b(300);
    double want = 0;
    for (int i = 0; i < 300; ++i) {
        a[i] = static_cast<float>(i % 7 - 3);
        b[i] = static_cast<float>(i % 5 - 2);
        want += a[i] * b[i];
    }
    EXPECT_EQ(ggml_order::vec_dot_f32(a.data(), b.data(), 300), want);
    EXPECT_EQ(ggml_order::vec_dot_f16(a.data(), b.data(), 300), want);
    EXPECT_EQ(ggml_order::dot_tinyblas(a.data(), b.data(), 288), [&] {
        double s = 0;
        for (int i = 0; i < 288; ++i) s += a[i] * b[i];
        return s;
    }());
}

}  // namespace
}  // namespace ls
