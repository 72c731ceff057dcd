// Tests of the half-float conversions, block decoders and weight quantizers: pure unit tests, then
// bit-for-bit comparisons with llama.cpp's output in ../shared/fixtures/quant.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/fp16.h"
#include "kernels/common/quant_blocks.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/quantize.h"
#include "engine/gguf/gguf.h"
#include "tests/test_support.h"

namespace ls {
namespace {

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

float float_of(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// Independent decoding of a half by its definition, in double.
double half_value(uint16_t h) {
    const int sign = (h >> 15) ? -1 : 1;
    const int exp = (h >> 10) & 0x1f;
    const int mant = h & 0x3ff;
    if (exp == 0) return sign * std::ldexp(static_cast<double>(mant), -24);
    if (exp == 31) return mant ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
    return sign * std::ldexp(static_cast<double>(mant + 1024), exp - 25);
}

TEST(Fp16, DecodesEveryHalfByDefinition) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = fp16_to_fp32(static_cast<uint16_t>(h));
        const double expected = half_value(static_cast<uint16_t>(h));
        if (std::isnan(expected)) {
            ASSERT_TRUE(std::isnan(f)) << "half 0x" << std::hex << h;
            ASSERT_EQ(bits_of(f) & 0x00400000u, 0x00400000u) << "NaN not quiet for half 0x" << std::hex << h;
            continue;
        }
        ASSERT_EQ(static_cast<double>(f), expected) << "half 0x" << std::hex << h;
        ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << "half 0x" << std::hex << h;
    }
}

TEST(Fp16, RoundTripsEveryNonNanHalf) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const uint16_t half = static_cast<uint16_t>(h);
        const uint16_t back = fp32_to_fp16(fp16_to_fp32(half));
        if (((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0) {
            ASSERT_EQ(back, (h & 0x8000) | 0x7e00) << "NaN half 0x" << std::hex << h;
        } else {
            ASSERT_EQ(back, half) << "half 0x" << std::hex << h;
        }
    }
}

TEST(Fp16, RoundsToNearestEvenBetweenNeighbours) {
    // For each pair of adjacent positive finite halves, the midpoint goes to the even one and
    // anything a hair off the midpoint goes to the nearer one.
    for (uint16_t h = 0; h < 0x7bff; ++h) {
        const double lo = half_value(h);
        const double hi = half_value(static_cast<uint16_t>(h + 1));
        const float mid = static_cast<float>((lo + hi) / 2);  // exact: needs at most 12 bits
        ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
        const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : h;
        ASSERT_EQ(fp32_to_fp16(mid), even) << "midpoint above half 0x" << std::hex << h;
        ASSERT_EQ(fp32_to_fp16(-mid), even | 0x8000) << "negative midpoint above half 0x" << std::hex << h;
        ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 0.0f)), h) << "below midpoint above 0x" << std::hex << h;
        ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 1e9f)), h + 1) << "above midpoint above 0x" << std::hex << h;
    }
}

TEST(Fp16, HandlesOverflowUnderflowAndSpecials) {
    EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
    EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7bff);
    EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // the tie rounds to even, which is inf
    EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
    EXPECT_EQ(fp32_to_fp16(-1e10f), 0xfc00);
    EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
    EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and the smallest subnormal
    EXPECT_EQ(fp32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
    EXPECT_EQ(fp32_to_fp16(-std::ldexp(1.0f, -30)), 0x8000);
    EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
    EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
    EXPECT_EQ(fp32_to_fp16(std::nanf("")), 0x7e00);
    EXPECT_EQ(fp32_to_fp16(float_of(0xffc00001u)), 0xfe00);
    EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
    EXPECT_EQ(fp32_to_fp16(0.1f), 0x2e66);
}

TEST(Bf16, RoundsToNearestEvenAndKeepsNanQuiet) {
    EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(fp32_to_bf16(float_of(0x3f808000u)), 0x3f80);  // tie, even below
    EXPECT_EQ(fp32_to_bf16(float_of(0x3f818000u)), 0x3f82);  // tie, even above
    EXPECT_EQ(fp32_to_bf16(float_of(0x3f808001u)), 0x3f81);
    EXPECT_EQ(fp32_to_bf16(float_of(0x3f807fffu)), 0x3f80);
    EXPECT_EQ(fp32_to_bf16(float_of(0xbf818000u)), 0xbf82);
    EXPECT_EQ(fp32_to_bf16(float_of(0x7f7fffffu)), 0x7f80);  // largest float rounds up to inf
    EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
    EXPECT_EQ(fp32_to_bf16(float_of(0x7f800001u)), 0x7fc0);  // signaling NaN made quiet
    EXPECT_EQ(fp32_to_bf16(float_of(0xffc12345u)), 0xffc1);
    EXPECT_EQ(fp32_to_bf16(float_of(0x00018000u)), 0x0002);  // subnormals round, not flush
    for (uint32_t b = 0; b < 65536; ++b) {
        const float f = bf16_to_fp32(static_cast<uint16_t>(b));
        ASSERT_EQ(bits_of(f), b << 16);
        if (!std::isnan(f)) {
            ASSERT_EQ(fp32_to_bf16(f), b);
        }
    }
}

TEST(QuantBlocks, DecodesHandMadeBlocks) {
    block_q4_0 q4{};
    q4.d = 0x4000;  // 2.0
    for (int j = 0; j < 16; ++j) q4.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    float out[256];
    dequantize_block_q4_0(&q4, out);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(out[j], 2.0f * (j - 8)) << j;
        EXPECT_EQ(out[j + 16], 2.0f * (7 - j)) << j;
    }

    block_q8_K q8k{};
    q8k.d = -0.5f;
    for (int j = 0; j < 256; ++j) q8k.qs[j] = static_cast<int8_t>(j - 128);
    dequantize_block_q8_K(&q8k, out);
    for (int j = 0; j < 256; ++j) ASSERT_EQ(out[j], -0.5f * (j - 128)) << j;

    const int expected_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    for (int i = 0; i < 16; ++i) EXPECT_EQ(iq4nl_value(i), expected_levels[i]) << i;

    // Q4_K sub-block 5: scale and min split across the low nibbles and the top two bits.
    block_q4_K q4k{};
    q4k.d = 0x3c00;     // 1.0
    q4k.dmin = 0x3800;  // 0.5
    q4k.scales[1] = 0x80;         // scale 5 high bits = 2
    q4k.scales[5] = 0x40;         // min 5 high bits = 1
    q4k.scales[9] = 0x3 | (0x7 << 4);  // scale 5 low = 3, min 5 low = 7
    for (int l = 0; l < 32; ++l) q4k.qs[64 + l] = 0x90;  // sub-block 5 is the high nibbles of bytes 64..95
    dequantize_block_q4_K(&q4k, out);
    EXPECT_EQ(out[5 * 32], 35.0f * 9 - 0.5f * 23);
}

// An E2M1 code (1 sign, 2 exponent, 1 mantissa bit) by the OCP definition, in double: exponent
// field 0 is subnormal (m * 0.5), otherwise (1 + m / 2) * 2^(exp - 1).
double e2m1_value(int code) {
    const int exp = (code >> 1) & 3, mant = code & 1;
    const double magnitude = exp == 0 ? 0.5 * mant : (1.0 + 0.5 * mant) * std::ldexp(1.0, exp - 1);
    return (code & 8) ? -magnitude : magnitude;
}

// MXFP4 blocks: element j and j+16 come from the low and high nibble of qs[j], value = E2M1(code) *
// 2^(e - 127), for every code in both halves and the exponent's edges: e 0 and 1 (subnormal
// scales), 127 (unit), 254 and 255 (the levels of 4 and above overflow to infinity in f32).
TEST(QuantBlocks, DecodesMxfp4ByTheFormatsDefinition) {
    const int expected_levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    for (int i = 0; i < 16; ++i) EXPECT_EQ(mxfp4_value(i), expected_levels[i]) << i;
    for (int e = 0; e < 256; ++e)
        ASSERT_EQ(bits_of(e8m0_to_fp32_half(static_cast<uint8_t>(e))), bits_of(std::ldexp(1.0f, e - 128))) << e;
    EXPECT_EQ(bits_of(e8m0_to_fp32_half(0)), 0x00200000u);  // 2^-128, a subnormal
    EXPECT_EQ(bits_of(e8m0_to_fp32_half(1)), 0x00400000u);  // 2^-127
    EXPECT_EQ(e8m0_to_fp32_half(128), 1.0f);

    for (int e : {0, 1, 2, 100, 127, 128, 200, 254, 255}) {
        block_mxfp4 b{};
        b.e = static_cast<uint8_t>(e);
        for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
        float out[32];
        dequantize_block_mxfp4(&b, out);
        for (int j = 0; j < 16; ++j) {
            const float lo = static_cast<float>(e2m1_value(j) * std::ldexp(1.0, e - 127));
            const float hi = static_cast<float>(e2m1_value(15 - j) * std::ldexp(1.0, e - 127));
            // ggml's table holds a plain 0 for code 8, so the negative zero decodes as +0.
            EXPECT_EQ(bits_of(out[j]), bits_of(j == 8 ? 0.0f : lo)) << "e " << e << " element " << j;
            EXPECT_EQ(bits_of(out[j + 16]), bits_of(15 - j == 8 ? 0.0f : hi)) << "e " << e << " element " << j + 16;
        }
    }
    // The row decoder walks 17-byte blocks.
    block_mxfp4 row[2] = {};
    row[0].e = 127;
    row[0].qs[3] = 0x7F;  // element 3: code 15 (E2M1 -6, at e 127 itself), element 19: code 7 (+6)
    row[1].e = 130;
    row[1].qs[15] = 0x90;  // element 31 of block 1: code 9 (E2M1 -0.5 times 2^3)
    float out[64];
    ASSERT_TRUE(dequantize_row(GgmlType::MXFP4, row, out, 64));
    EXPECT_EQ(out[3], -6.0f);
    EXPECT_EQ(out[19], 6.0f);
    EXPECT_EQ(out[32 + 31], -4.0f);
    EXPECT_EQ(out[32 + 15], 0.0f);
}

// quantize_row_mxfp4_ref on blocks whose bytes follow from the definition: e = floor(log2(amax)) - 2
// + 127 puts amax in [4, 8) * 2^(e - 127), each value takes the nearest E2M1 level * 2^(e - 127)
// (the lowest code on a tie), larger values clamp to +-6.
TEST(Quantize, Mxfp4BlocksFromTheDefinition) {
    auto quantize = [](const float* x) {
        block_mxfp4 b{};
        EXPECT_TRUE(quantize_rows(GgmlType::MXFP4, x, &b, 1, 32));
        return b;
    };
    auto code = [](const block_mxfp4& b, int j) { return j < 16 ? b.qs[j] & 0xF : b.qs[j - 16] >> 4; };
    // amax 6: e 127, the levels are the E2M1 values themselves.
    float x[32];
    const float exact[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (int j = 0; j < 16; ++j) x[j] = (j & 8) ? -exact[j & 7] : exact[j & 7];  // every code once
    const float ties_and_clamps[16] = {0.25f, -0.25f, 0.75f, 1.25f, 2.5f, 3.5f, 5.0f, -5.0f,
                                       5.99f, -2.75f, 0.1f, -0.0f, 1.75f, -3.5f, 4.5f, 0.26f};
    const int expected_codes[16] = {0, 0, 1, 2, 4, 5, 6, 14, 7, 13, 0, 0, 3, 13, 6, 1};
    for (int j = 0; j < 16; ++j) x[16 + j] = ties_and_clamps[j];
    block_mxfp4 b = quantize(x);
    EXPECT_EQ(b.e, 127);
    for (int j = 0; j < 16; ++j) EXPECT_EQ(code(b, j), j == 8 ? 0 : j) << j;  // -0.0 ties with +0 -> code 0
    for (int j = 0; j < 16; ++j) EXPECT_EQ(code(b, 16 + j), expected_codes[j]) << ties_and_clamps[j];

    // amax 7.9 keeps e 127 and clamps to 6; amax 8 moves to e 128 (levels doubled); negative amax too.
    for (float& v : x) v = 0.0f;
    x[5] = 7.9f;
    b = quantize(x);
    EXPECT_EQ(b.e, 127);
    EXPECT_EQ(code(b, 5), 7);
    x[5] = -8.0f;
    x[20] = 3.0f;  // 3 = E2M1 1.5 * 2
    b = quantize(x);
    EXPECT_EQ(b.e, 128);
    EXPECT_EQ(code(b, 5), 14);
    EXPECT_EQ(code(b, 20), 3);
    // amax 1: e 125, levels * 1/4 (1.0 -> 4 -> code 6; 0.3 lies between 0.25 and 0.375 -> 0.25).
    for (float& v : x) v = 0.0f;
    x[0] = 1.0f;
    x[31] = -0.3f;
    b = quantize(x);
    EXPECT_EQ(b.e, 125);
    EXPECT_EQ(code(b, 0), 6);
    EXPECT_EQ(code(b, 31), 10);
    // All zeros: e 0 and zero codes.
    for (float& v : x) v = 0.0f;
    b = quantize(x);
    EXPECT_EQ(b.e, 0);
    for (uint8_t q : b.qs) EXPECT_EQ(q, 0);
    // amax 2^-130 (subnormal): floor(log2) - 2 + 127 = -5, which ggml's x86 build stores as the
    // byte 251 (its float -> uint8_t cast truncates to a 32-bit int first); every level is then
    // far larger than the values, so all codes are 0.
    x[7] = std::ldexp(1.0f, -130);
    b = quantize(x);
    EXPECT_EQ(b.e, 251);
    for (uint8_t q : b.qs) EXPECT_EQ(q, 0);
}

// UE4M3 by its definition: exponent bits 6-3 with bias 7, mantissa bits 2-0, exponent 0 subnormal
// (man * 2^-9); 0x00 and 0x7F (E4M3's NaN) read as 0 and bit 7 is ignored, as ggml's decoder does;
// ue4m3_to_fp32_half gives half the value (for the doubled E2M1 levels).
double ue4m3_value(int x) {
    if (x == 0 || x == 0x7F) return 0.0;
    const int exp = (x >> 3) & 15, man = x & 7;
    return exp == 0 ? man * std::ldexp(1.0, -9) : (1.0 + man / 8.0) * std::ldexp(1.0, exp - 7);
}

// NVFP4 blocks: four 16-element sub-blocks, each with its UE4M3 scale; element j of sub-block s is
// the low nibble of qs[8s + j] for j < 8, the high nibble of qs[8s + j - 8] after.
TEST(QuantBlocks, DecodesNvfp4ByTheFormatsDefinition) {
    for (int x = 0; x < 256; ++x)
        ASSERT_EQ(bits_of(ue4m3_to_fp32_half(static_cast<uint8_t>(x))), bits_of(static_cast<float>(ue4m3_value(x) / 2)))
            << x;
    EXPECT_EQ(ue4m3_to_fp32_half(0x38), 0.5f);     // 1.0, halved
    EXPECT_EQ(ue4m3_to_fp32_half(0x7E), 224.0f);   // 448, the largest
    EXPECT_EQ(ue4m3_to_fp32_half(0xFF), 240.0f);   // bit 7 ignored: exponent 15, mantissa 7
    EXPECT_EQ(ue4m3_to_fp32_half(0x01), std::ldexp(1.0f, -10));  // the smallest subnormal, halved
    block_nvfp4 b{};
    const uint8_t scales[4] = {0x38, 0x01, 0x7F, 0x5A};
    for (int s = 0; s < 4; ++s) b.d[s] = scales[s];
    for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<uint8_t>((j % 16) | ((15 - j % 16) << 4));
    float out[64];
    dequantize_block_nvfp4(&b, out);
    for (int s = 0; s < 4; ++s)
        for (int j = 0; j < 16; ++j) {
            const uint8_t byte = b.qs[8 * s + j % 8];
            const int code = j < 8 ? byte & 0xF : byte >> 4;
            const float want = code == 8 ? 0.0f : static_cast<float>(e2m1_value(code) * ue4m3_value(scales[s]));
            EXPECT_EQ(bits_of(out[16 * s + j]), bits_of(want)) << "sub-block " << s << " element " << j;
        }
    // The row decoder walks 36-byte blocks.
    block_nvfp4 row[2] = {};
    row[1].d[3] = 0x40;   // 2.0
    row[1].qs[31] = 0x7F;  // sub-block 3: element 7 code 15 (-6), element 15 code 7 (+6)
    float two[128];
    ASSERT_TRUE(dequantize_row(GgmlType::NVFP4, row, two, 128));
    EXPECT_EQ(two[64 + 48 + 7], -12.0f);
    EXPECT_EQ(two[64 + 48 + 15], 12.0f);
    EXPECT_EQ(two[64 + 48 + 6], 0.0f);
}

// quantize_row_nvfp4_ref: each sub-block's scale is fp32_to_ue4m3(amax / 6), which gives back
// every UE4M3 code below exponent 15 from its own value, rounds half up between codes, sends
// everything from 256 up to 448 (0x7E: ggml saturates the whole top exponent) and zero, negatives
// and NaN to 0; the values take the nearest level times that scale.
TEST(Quantize, Nvfp4BlocksFromTheDefinition) {
    for (int x = 1; x < 0x78; ++x) ASSERT_EQ(fp32_to_ue4m3(static_cast<float>(ue4m3_value(x))), x) << x;
    for (int x = 0x78; x < 0x7F; ++x) ASSERT_EQ(fp32_to_ue4m3(static_cast<float>(ue4m3_value(x))), 0x7E) << x;
    EXPECT_EQ(fp32_to_ue4m3(0.0f), 0);
    EXPECT_EQ(fp32_to_ue4m3(-1.0f), 0);
    EXPECT_EQ(fp32_to_ue4m3(std::nanf("")), 0);
    EXPECT_EQ(fp32_to_ue4m3(448.0f), 0x7E);
    EXPECT_EQ(fp32_to_ue4m3(1e9f), 0x7E);
    EXPECT_EQ(fp32_to_ue4m3(1.0625f), 0x39);  // halfway between 1 (0x38) and 1.125: up
    EXPECT_EQ(fp32_to_ue4m3(1.0624f), 0x38);
    EXPECT_EQ(fp32_to_ue4m3(1.9375f), 0x40);  // halfway between 1.875 and 2: up, into the next exponent
    EXPECT_EQ(fp32_to_ue4m3(2.5f * std::ldexp(1.0f, -9)), 3);  // subnormal: man 2.5 rounds up
    EXPECT_EQ(fp32_to_ue4m3(0.4f * std::ldexp(1.0f, -9)), 0);  // below the smallest subnormal's half

    float x[64] = {};
    // Sub-block 0: amax 6 -> scale 1 (0x38), the values are the levels themselves.
    const float exact[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (int j = 0; j < 16; ++j) x[j] = (j & 8) ? -exact[j & 7] : exact[j & 7];
    x[8] = 6.0f;  // code 8 would be -0: keep amax 6 on both signs
    // Sub-block 1: amax 12 -> scale 2 (0x40), the levels times 1: 5 lies halfway between 4 and 6.
    x[16] = 12.0f, x[17] = 5.0f, x[18] = -1.0f;
    // Sub-block 2: all zero -> scale byte 0 and zero codes. Sub-block 3: amax 3000 -> 448 (0x7E).
    x[48] = 3000.0f, x[49] = 448.0f;
    block_nvfp4 b{};
    ASSERT_TRUE(quantize_rows(GgmlType::NVFP4, x, &b, 1, 64));
    EXPECT_EQ(b.d[0], 0x38);
    EXPECT_EQ(b.d[1], 0x40);
    EXPECT_EQ(b.d[2], 0);
    EXPECT_EQ(b.d[3], 0x7E);
    auto code = [&](int e) {
        const int s = e / 16, j = e % 16;
        const uint8_t byte = b.qs[8 * s + j % 8];
        return j < 8 ? byte & 0xF : byte >> 4;
    };
    for (int j = 0; j < 16; ++j) EXPECT_EQ(code(j), j == 8 ? 7 : j) << j;
    EXPECT_EQ(code(16), 7);
    EXPECT_EQ(code(17), 4);   // the tie goes to the lower code (4, not 5)
    EXPECT_EQ(code(18), 9);   // -1
    for (int e = 32; e < 48; ++e) EXPECT_EQ(code(e), 0) << e;
    EXPECT_EQ(code(48), 7);   // clamped to 6 * 448
    EXPECT_EQ(code(49), 2);   // 448 / 448 = 1
}

// Q4_K and Q5_K as quantize_rows writes them (the scale search eight sub-blocks at a time where
// the processor has AVX2) are the reference code's bytes: random rows over many magnitudes, and
// sub-blocks that are flat (constant, all zero, -0.0), one-signed, or hold one outlier.
TEST(Quantize, KQuantFastSearchSameBytesAsTheReference) {
    std::mt19937 rng(11);
    std::vector<float> x(kQK_K * 64);
    for (int trial = 0; trial < 40; ++trial) {
        std::normal_distribution<float> normal(0.0f, std::ldexp(1.0f, trial % 30 - 15));
        for (float& v : x) v = normal(rng);
        for (int b = 0; b < 64; ++b) {
            float* sub = x.data() + kQK_K * b + 32 * ((b + trial) % 8);
            switch ((b + trial) % 9) {
                case 0: for (int i = 0; i < 32; ++i) sub[i] = 0.25f; break;            // flat
                case 1: for (int i = 0; i < 32; ++i) sub[i] = 0.0f; break;             // zero
                case 2: for (int i = 0; i < 32; ++i) sub[i] = -0.0f; break;            // negative zero
                case 3: for (int i = 0; i < 32; ++i) sub[i] = std::fabs(sub[i]); break;  // positive only
                case 4: for (int i = 0; i < 32; ++i) sub[i] = -std::fabs(sub[i]); break;
                case 5: sub[7] *= 1000.0f; break;                                      // an outlier
                case 6: for (int i = 0; i < kQK_K; ++i) x[kQK_K * b + i] = 0.0f; break;  // a zero super-block
                default: break;
            }
        }
        std::vector<block_q4_K> q4_ref(64), q4_fast(64);
        std::vector<block_q5_K> q5_ref(64), q5_fast(64);
        quantize_row_q4_K_ref(x.data(), q4_ref.data(), static_cast<int64_t>(x.size()));
        quantize_row_q5_K_ref(x.data(), q5_ref.data(), static_cast<int64_t>(x.size()));
        ASSERT_TRUE(quantize_rows(GgmlType::Q4_K, x.data(), q4_fast.data(), 64, kQK_K));
        ASSERT_TRUE(quantize_rows(GgmlType::Q5_K, x.data(), q5_fast.data(), 64, kQK_K));
        for (int b = 0; b < 64; ++b) {
            ASSERT_EQ(0, std::memcmp(&q4_ref[b], &q4_fast[b], sizeof(block_q4_K))) << "q4_K trial " << trial << " block " << b;
            ASSERT_EQ(0, std::memcmp(&q5_ref[b], &q5_fast[b], sizeof(block_q5_K))) << "q5_K trial " << trial << " block " << b;
        }
    }
}

// The word-at-a-time unpack of the SIMD kernels gives get_scale_min_k4's values for every
// sub-block, over random packed bytes (every bit of each byte is used by some field).
TEST(QuantBlocks, WordwiseScaleUnpackMatchesGetScaleMinK4) {
    uint32_t state = 3;
    for (int trial = 0; trial < 2000; ++trial) {
        uint8_t packed[12];
        for (uint8_t& b : packed) b = static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
        uint8_t out[16];
        unpack_scales_mins_k4(packed, out);
        for (int j = 0; j < 8; ++j) {
            uint8_t sc = 0, m = 0;
            get_scale_min_k4(j, packed, &sc, &m);
            ASSERT_EQ(out[j], sc) << "trial " << trial << " scale " << j;
            ASSERT_EQ(out[8 + j], m) << "trial " << trial << " min " << j;
        }
    }
}

TEST(Quantize, RoundTripErrorIsSmall) {
    std::vector<float> x(1024);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * i) * (1.0f + (i % 7));
    const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                              GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K, GgmlType::F16,
                              GgmlType::BF16, GgmlType::MXFP4, GgmlType::NVFP4};
    // Values span [-7, 7]; bounds follow from each format's step (one step where the top code is
    // clamped, half a step otherwise) with some room for the f16 rounding of the scales.
    // MXFP4: a block with amax in [4, 8) has levels 4 and 6 around its largest values and clamps at 6.
    // NVFP4: a sub-block's scale is amax / 6 (rounded to UE4M3's 3 mantissa bits, up to 1/16 off),
    // so its largest step, 4 to 6 times the scale, is about amax / 3 (7 / 3 here), half of it the
    // rounding error.
    const double tolerance[] = {0.9, 0.5, 0.45, 0.25, 0.04, 0.6, 0.3, 0.15, 0.04, 0.005, 0.04, 1.0001, 1.3};
    for (size_t t = 0; t < std::size(types); ++t) {
        uint64_t row_bytes = 0;
        ASSERT_TRUE(ggml_row_bytes(types[t], 1024, &row_bytes));
        std::vector<uint8_t> q(row_bytes);
        ASSERT_TRUE(quantize_rows(types[t], x.data(), q.data(), 1, 1024)) << ggml_type_name(types[t]);
        std::vector<float> y(1024);
        ASSERT_TRUE(dequantize_row(types[t], q.data(), y.data(), 1024));
        double max_err = 0;
        for (size_t i = 0; i < x.size(); ++i) max_err = std::max(max_err, std::fabs(double(x[i]) - y[i]));
        EXPECT_LT(max_err, tolerance[t]) << ggml_type_name(types[t]);
    }
    EXPECT_FALSE(quantize_rows(GgmlType::Q4_0, x.data(), nullptr, 1, 1000));
    EXPECT_FALSE(dequantize_row(GgmlType::IQ2_XXS, x.data(), nullptr, 256));
}

TEST(Quantize, ActivationQ8VariantsDifferOnlyOnTies) {
    float x[32];
    for (int j = 0; j < 32; ++j) x[j] = j - 15.5f;  // amax 16.5 -> not a tie grid
    x[0] = 127.0f;                                   // amax 127 -> d = 1, the values x.5 are ties
    x[1] = 2.5f;
    x[2] = -3.5f;
    block_q8_0 simd{}, ref{};
    quantize_activation_q8_0(x, &simd, 32);
    quantize_row_q8_0_ref(x, &ref, 32);
    EXPECT_EQ(simd.d, 0x3c00);
    EXPECT_EQ(ref.d, 0x3c00);
    EXPECT_EQ(simd.qs[1], 2);   // half to even
    EXPECT_EQ(ref.qs[1], 3);    // half away from zero
    EXPECT_EQ(simd.qs[2], -4);
    EXPECT_EQ(ref.qs[2], -4);
    EXPECT_EQ(simd.qs[0], 127);
}

// ---- fixtures ---------------------------------------------------------------------------------

std::unique_ptr<GgufFile> open_quant_fixture(const std::string& file) {
    auto r = GgufFile::open(test::fixture_path("quant/" + file));
    if (!r.ok()) {
        ADD_FAILURE() << "cannot open quant/" << file << ": " << r.error().message;
        return nullptr;
    }
    return std::move(r).value();
}

const GgufTensorInfo* tensor(const GgufFile& f, const std::string& name) {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (t == nullptr) ADD_FAILURE() << f.path() << " has no tensor " << name;
    return t;
}

std::vector<float> f32_values(const GgufTensorInfo& t) {
    std::vector<float> v(static_cast<size_t>(t.n_elements()));
    std::memcpy(v.data(), t.data, v.size() * sizeof(float));
    return v;
}

const char* const kRequiredTypes[] = {"F16",  "BF16", "Q4_0", "Q4_1",   "Q5_0",   "Q5_1",  "Q8_0",  "Q2_K", "Q3_K",
                                      "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4"};

class QuantFixture : public testing::TestWithParam<const char*> {};

TEST_P(QuantFixture, DequantizeMatchesGgmlBitForBit) {
    LS_REQUIRE_FIXTURES();
    const std::string type_name = GetParam();
    auto file = open_quant_fixture(type_name + ".gguf");
    ASSERT_TRUE(file);
    GgmlType type;
    ASSERT_TRUE(ggml_type_from_name(type_name.c_str(), &type));
    for (int k = 0; k < 3; ++k) {
        const GgufTensorInfo* q = tensor(*file, "q." + std::to_string(k));
        const GgufTensorInfo* ref = tensor(*file, "ref." + std::to_string(k));
        ASSERT_TRUE(q && ref);
        ASSERT_EQ(q->type, type);
        ASSERT_EQ(ref->type, GgmlType::F32);
        const int64_t ne0 = q->ne[0];
        const int64_t rows = q->n_rows();
        std::vector<float> ours(static_cast<size_t>(ne0 * rows));
        ASSERT_TRUE(dequantize_rows(type, q->data, 0, ours.data(), rows, ne0));
        const std::vector<float> expected = f32_values(*ref);
        int mismatches = 0;
        for (size_t i = 0; i < ours.size(); ++i) {
            if (bits_of(ours[i]) != bits_of(expected[i]) && ++mismatches <= 5) {
                ADD_FAILURE() << type_name << " q." << k << " row " << i / ne0 << " col " << i % ne0 << ": got "
                              << ours[i] << " (0x" << std::hex << bits_of(ours[i]) << "), ggml "
                              << expected[i] << " (0x" << bits_of(expected[i]) << ")" << std::dec;
            }
        }
        EXPECT_EQ(mismatches, 0) << type_name << " q." << k << " differs in " << mismatches << " elements";
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantFixture, testing::ValuesIn(kRequiredTypes),
                         [](const testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

class QuantizerFixture : public testing::TestWithParam<const char*> {};

TEST_P(QuantizerFixture, QuantizeMatchesGgmlByteForByte) {
    LS_REQUIRE_FIXTURES();
    const std::string type_name = GetParam();
    auto file = open_quant_fixture(type_name + ".gguf");
    ASSERT_TRUE(file);
    GgmlType type;
    ASSERT_TRUE(ggml_type_from_name(type_name.c_str(), &type));
    for (int k = 0; k < 3; ++k) {
        const GgufTensorInfo* q = tensor(*file, "q." + std::to_string(k));
        const GgufTensorInfo* src = tensor(*file, "src." + std::to_string(k));
        ASSERT_TRUE(q && src);
        const int64_t ne0 = src->ne[0];
        const int64_t rows = src->n_rows();
        uint64_t row_bytes = 0;
        ASSERT_TRUE(ggml_row_bytes(type, ne0, &row_bytes));
        ASSERT_EQ(q->n_bytes, row_bytes * rows);
        const std::vector<float> x = f32_values(*src);
        std::vector<uint8_t> ours(row_bytes * rows, 0xAB);
        ASSERT_TRUE(quantize_rows(type, x.data(), ours.data(), rows, ne0));
        const uint32_t block_bytes = ggml_type_traits(type)->block_bytes;
        int bad_blocks = 0;
        for (uint64_t off = 0; off < ours.size(); off += block_bytes) {
            if (std::memcmp(ours.data() + off, q->data + off, block_bytes) != 0 && ++bad_blocks <= 5) {
                uint64_t byte = off;
                while (ours[byte] == q->data[byte]) ++byte;
                ADD_FAILURE() << type_name << " src." << k << " row " << off / row_bytes << " block "
                              << (off % row_bytes) / block_bytes << " differs first at byte " << byte - off
                              << " of the block: ours " << int(ours[byte]) << ", ggml " << int(q->data[byte]);
            }
        }
        EXPECT_EQ(bad_blocks, 0) << type_name << " src." << k;
    }
}

const char* const kQuantizedTypes[] = {"F16",  "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
                                       "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "MXFP4"};

INSTANTIATE_TEST_SUITE_P(Quantizable, QuantizerFixture, testing::ValuesIn(kQuantizedTypes),
                         [](const testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace ls

namespace ls {
namespace {

// A hostile GGUF's tensor of 2^50 empty rows (ne [0, 2^50]) holds no data and passes every size
// check; decoding it looped over every row (a fuzzer's timeout). Empty rows decode at once.
TEST(DequantGuards, EmptyRowsDecodeAtOnceHoweverMany) {
    EXPECT_TRUE(dequantize_rows(GgmlType::Q4_1, nullptr, 0, nullptr, int64_t{1} << 50, 0));
    EXPECT_TRUE(dequantize_rows(GgmlType::F32, nullptr, 0, nullptr, int64_t{1} << 50, 0));
    EXPECT_FALSE(dequantize_rows(GgmlType::Q4_1, nullptr, 0, nullptr, 1, 31));  // not whole blocks
}

}  // namespace
}  // namespace ls
