// The emulation of ggml's x86 arithmetic: f16 rounding of exact values (used for native f16 FMA),
// the summation orders, and the end-to-end check lives in test_parity.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

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

#if defined(__x86_64__)
#include <immintrin.h>

namespace ls {
namespace {

// The 256-bit operations, written with the instructions themselves, to check the scalar emulation
// of ggml's AVX2 build on processors that have them.
__attribute__((target("avx2,fma"))) float hsum8_simd(const float* values) {
    const __m256 x = _mm256_loadu_ps(values);
    __m128 v = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    v = _mm_add_ss(v, _mm_movehdup_ps(v));
    return _mm_cvtss_f32(v);
}

__attribute__((target("avx2,fma"))) float dot_f32_simd(const float* a, const float* b, int n) {
    const int np = n & ~31;
    __m256 sum[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int i = 0; i < np; i += 32)
        for (int j = 0; j < 4; ++j)
            sum[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * j), _mm256_loadu_ps(b + i + 8 * j), sum[j]);
    sum[0] = _mm256_add_ps(sum[0], sum[2]);
    sum[1] = _mm256_add_ps(sum[1], sum[3]);
    sum[0] = _mm256_add_ps(sum[0], sum[1]);
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(sum[0]), _mm256_extractf128_ps(sum[0], 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    float s = _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
    for (int i = np; i < n; ++i) s = s + a[i] * b[i];  // not fused, as in llama.cpp's build
    return s;
}

__attribute__((target("avx2,fma"))) float expf_simd(float x) {
    float in[8], out[8];
    for (float& v : in) v = x;
    const __m256 xv = _mm256_loadu_ps(in);
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(xv, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), xv));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1))));
    const __m256i c = _mm256_castps_si256(_mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), n), _mm256_set1_ps(126), _CMP_GT_OQ));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    __m256 res;
    if (!_mm256_movemask_ps(_mm256_castsi256_ps(c))) {
        res = _mm256_fmadd_ps(j, k, k);
    } else {
        const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                           _mm256_set1_epi32(static_cast<int>(0x82000000u)));
        const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
        const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
        const __m256i d = _mm256_castps_si256(_mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), n), _mm256_set1_ps(192), _CMP_GT_OQ));
        res = _mm256_or_ps(_mm256_and_ps(_mm256_castsi256_ps(d), _mm256_mul_ps(s1, s1)),
                           _mm256_andnot_ps(_mm256_castsi256_ps(d),
                                            _mm256_or_ps(_mm256_and_ps(_mm256_castsi256_ps(c), _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1)),
                                                         _mm256_andnot_ps(_mm256_castsi256_ps(c), _mm256_fmadd_ps(k, j, k)))));
    }
    _mm256_storeu_ps(out, res);
    return out[0];
}

bool have_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

TEST(GgmlOrderAvx2, ExpfMatchesTheInstructions) {
    if (!have_avx2()) GTEST_SKIP() << "this processor has no AVX2/FMA to check against";
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> d(-110.0f, 95.0f);
    int checked = 0;
    for (int i = 0; i < 200000; ++i) {
        const float x = i < 20 ? -100.0f - i * 5.0f : d(rng);  // also the scaled and the flushed ranges
        const float want = expf_simd(x), got = ggml_order::v_expf_avx2(x);
        ASSERT_EQ(std::memcmp(&want, &got, 4), 0) << "x " << x << ": " << want << " vs " << got;
        ++checked;
    }
    EXPECT_EQ(ggml_order::v_expf_avx2(-INFINITY), 0.0f);
    EXPECT_EQ(checked, 200000);
}

TEST(GgmlOrderAvx2, SumOrdersMatchTheInstructions) {
    if (!have_avx2()) GTEST_SKIP() << "this processor has no AVX2/FMA to check against";
    std::mt19937 rng(6);
    std::normal_distribution<float> d(0.0f, 10.0f);
    for (int n : {1, 7, 8, 31, 32, 33, 64, 100, 257, 1024, 5632}) {
        std::vector<float> a(n), b(n);
        for (int i = 0; i < n; ++i) a[i] = d(rng), b[i] = d(rng);
        const float want = dot_f32_simd(a.data(), b.data(), n), got = ggml_order::vec_dot_f32_avx2(a.data(), b.data(), n);
        EXPECT_EQ(std::memcmp(&want, &got, 4), 0) << "vec_dot_f32 n " << n << ": " << want << " vs " << got;
    }
    for (int t = 0; t < 1000; ++t) {
        float v[8];
        for (float& x : v) x = d(rng) * std::pow(10.0f, static_cast<float>(t % 7) - 3);
        const float want = hsum8_simd(v), got = ggml_order::hsum8(v);
        ASSERT_EQ(std::memcmp(&want, &got, 4), 0) << "hsum8 case " << t;
    }
}

}  // namespace
}  // namespace ls
#endif
