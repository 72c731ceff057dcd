// ggml's quantized block layouts and per-block decoding to f32, shared by the CPU and CUDA backends.
// Each decoder reproduces ggml's to_float bit for bit, including its order of float operations.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/common/fp16.h"
#include "kernels/common/hd.h"

namespace ls {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK8_1 = 32;
inline constexpr int kQK4_NL = 32;
inline constexpr int kQK_MXFP4 = 32;
inline constexpr int kQK_NVFP4 = 64;
inline constexpr int kQK_NVFP4_SUB = 16;  // elements per UE4M3 scale
inline constexpr int kQK_K = 256;       // super-block of the K and IQ formats
inline constexpr int kKScaleBytes = 12;  // packed 6-bit scales and mins of Q4_K / Q5_K

// Half-precision fields are raw IEEE binary16 bits (decode with fp16_to_fp32).
struct block_q4_0 {
    uint16_t d;
    uint8_t qs[kQK4_0 / 2];  // element j: low nibble of qs[j]; element j+16: high nibble
};
struct block_q4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[kQK4_1 / 2];
};
struct block_q5_0 {
    uint16_t d;
    uint8_t qh[4];  // little-endian u32, bit j = 5th bit of element j
    uint8_t qs[kQK5_0 / 2];
};
struct block_q5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[kQK5_1 / 2];
};
struct block_q8_0 {
    uint16_t d;
    int8_t qs[kQK8_0];
};
// Activation-only format paired with Q4_1 / Q5_1 weights: s = d * sum(qs).
struct block_q8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[kQK8_1];
};
struct block_q2_K {
    uint8_t scales[kQK_K / 16];  // low nibble scale, high nibble min, per 16 elements
    uint8_t qs[kQK_K / 4];
    uint16_t d;
    uint16_t dmin;
};
struct block_q3_K {
    uint8_t hmask[kQK_K / 8];
    uint8_t qs[kQK_K / 4];
    uint8_t scales[12];  // 16 6-bit scales, biased by 32
    uint16_t d;
};
struct block_q4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[kKScaleBytes];
    uint8_t qs[kQK_K / 2];
};
struct block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[kKScaleBytes];
    uint8_t qh[kQK_K / 8];
    uint8_t qs[kQK_K / 2];
};
struct block_q6_K {
    uint8_t ql[kQK_K / 2];
    uint8_t qh[kQK_K / 4];
    int8_t scales[kQK_K / 16];
    uint16_t d;
};
// Activation format of the K-quant dot products; its scale is a full f32.
struct block_q8_K {
    float d;
    int8_t qs[kQK_K];
    int16_t bsums[kQK_K / 16];  // sum of each group of 16 quants
};
struct block_iq4_nl {
    uint16_t d;
    uint8_t qs[kQK4_NL / 2];
};
struct block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[kQK_K / 64];
    uint8_t qs[kQK_K / 2];
};
// MXFP4 (OCP microscaling FP4; gpt-oss's expert weights): one E8M0 exponent byte, a power of two
// shared by the block, then 32 E2M1 codes as nibbles (element j: low nibble of qs[j]; element
// j+16: high nibble). No fp16 field, so the block is 17 bytes and byte-aligned.
struct block_mxfp4 {
    uint8_t e;
    uint8_t qs[kQK_MXFP4 / 2];
};
// NVFP4 (NVIDIA's FP4, from ModelOpt conversions): four 16-element sub-blocks, each with a UE4M3
// scale byte, then their E2M1 codes as nibbles sub-block by sub-block (element j of sub-block s:
// low nibble of qs[8s + j]; element j + 8: high nibble). A tensor-wide scale, if any, is a
// separate `.scale` tensor the graph multiplies in after the matmul.
struct block_nvfp4 {
    uint8_t d[kQK_NVFP4 / kQK_NVFP4_SUB];
    uint8_t qs[kQK_NVFP4 / 2];
};
// Ternary weights (-1, 0, 1 times d). TQ1_0: five base-3 digits per byte of qs (elements
// 0..239), four per byte of qh (240..255); TQ2_0: four 2-bit codes per byte.
struct block_tq1_0 {
    uint8_t qs[(kQK_K - 4 * kQK_K / 64) / 5];
    uint8_t qh[kQK_K / 64];
    uint16_t d;
};
struct block_tq2_0 {
    uint8_t qs[kQK_K / 4];
    uint16_t d;
};

static_assert(sizeof(block_q4_0) == 18, "block_q4_0 size");
static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");
static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");
static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");
static_assert(sizeof(block_q8_1) == 36, "block_q8_1 size");
static_assert(sizeof(block_q2_K) == 84, "block_q2_K size");
static_assert(sizeof(block_q3_K) == 110, "block_q3_K size");
static_assert(sizeof(block_q4_K) == 144, "block_q4_K size");
static_assert(sizeof(block_q5_K) == 176, "block_q5_K size");
static_assert(sizeof(block_q6_K) == 210, "block_q6_K size");
static_assert(sizeof(block_q8_K) == 292, "block_q8_K size");
static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");
static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs size");
static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4 size");
static_assert(sizeof(block_nvfp4) == 36, "block_nvfp4 size");
static_assert(sizeof(block_tq1_0) == 54, "block_tq1_0 size");
static_assert(sizeof(block_tq2_0) == 66, "block_tq2_0 size");

// ---- scale unpacking -------------------------------------------------------------------------

// Q4_K / Q5_K: 6-bit scale and min of sub-block j (0..7), packed as ggml's get_scale_min_k4.
LS_HD inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
    if (j < 4) {
        *scale = q[j] & 63;
        *min = q[j + 4] & 63;
    } else {
        *scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// Q4_K / Q5_K: get_scale_min_k4 for all eight sub-blocks, a 32-bit word at a time: out[j] is the
// scale of sub-block j, out[8 + j] its min. For the CPU's SIMD kernels, which load the 16 bytes.
inline void unpack_scales_mins_k4(const uint8_t* q, uint8_t out[16]) {
    uint32_t w[3];
    std::memcpy(w, q, 12);
    const uint32_t packed[4] = {w[0] & 0x3f3f3f3fu, (w[2] & 0x0f0f0f0fu) | (((w[0] >> 6) & 0x03030303u) << 4),
                                w[1] & 0x3f3f3f3fu, ((w[2] >> 4) & 0x0f0f0f0fu) | (((w[1] >> 6) & 0x03030303u) << 4)};
    std::memcpy(out, packed, 16);
}

// Q3_K: 6-bit scale of group j (0..15), still biased by 32.
LS_HD inline int q3_K_scale(const uint8_t* scales, int j) {
    const int low = j < 8 ? (scales[j] & 0xF) : (scales[j - 8] >> 4);
    const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    return low | (high << 4);
}

// The 16 non-uniform levels of IQ4_NL / IQ4_XS. Packed into two integers rather than an array so
// the same code runs on the device without a __constant__ table.
LS_HD inline int iq4nl_value(int index) {
    // bytes (little end first): -127 -104 -83 -65 -49 -35 -22 -10 | 1 13 25 38 53 69 89 113
    const uint64_t low = 0xF6EADDCFBFAD9881ull;
    const uint64_t high = 0x7159453526190D01ull;
    const uint64_t word = index < 8 ? low : high;
    return static_cast<int8_t>(static_cast<uint8_t>(word >> (8 * (index & 7))));
}

// The 16 E2M1 values of MXFP4 doubled, so they are integers (0, 0.5, 1, 1.5, 2, 3, 4, 6 -> 0..12;
// bit 3 the sign, code 8 a negative zero that reads as 0), ggml's kvalues_mxfp4. Packed like
// iq4nl_value's table.
LS_HD inline int mxfp4_value(int index) {
    // bytes (little end first): 0 1 2 3 4 6 8 12 | 0 -1 -2 -3 -4 -6 -8 -12
    const uint64_t low = 0x0C08060403020100ull;
    const uint64_t high = 0xF4F8FAFCFDFEFF00ull;
    const uint64_t word = index < 8 ? low : high;
    return static_cast<int8_t>(static_cast<uint8_t>(word >> (8 * (index & 7))));
}

// Half the E8M0 scale 2^(e - 127), i.e. 2^(e - 128), to go with the doubled levels (ggml's
// GGML_E8M0_TO_FP32_HALF, bit for bit): e 0 and 1 give the subnormals 2^-128 and 2^-127, e 255
// (NaN in the OCP format) gives 2^127, as ggml does not treat it apart.
LS_HD inline float e8m0_to_fp32_half(uint8_t e) {
    return f32_from_bits(e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23);
}

// Half the UE4M3 scale (unsigned E4M3: 4 exponent bits with bias 7, 3 mantissa bits; exponent 0
// subnormal, man * 2^-9), to go with the doubled E2M1 levels: ggml's ggml_ue4m3_to_fp32, bit for
// bit. As there, 0x00 and 0x7F (E4M3's NaN) read as 0 and bit 7 is ignored otherwise.
LS_HD inline float ue4m3_to_fp32_half(uint8_t x) {
    if (x == 0 || x == 0x7F) return 0.0f;
    const uint32_t exp = (x >> 3) & 0xFu, man = x & 7u;
    if (exp == 0) return static_cast<float>(man) * 0.0009765625f;  // man * 2^-9, halved: exact
    return f32_from_bits(((exp + 119u) << 23) | (man << 20));       // (1 + man/8) * 2^(exp - 7), halved
}

// ---- per-block decoding (out receives the block's elements in order) ------------------------

LS_HD inline void dequantize_block_q4_0(const block_q4_0* b, float* out) {
    const float d = fp16_to_fp32(b->d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
        const int x0 = (b->qs[j] & 0x0F) - 8;
        const int x1 = (b->qs[j] >> 4) - 8;
        out[j] = x0 * d;
        out[j + kQK4_0 / 2] = x1 * d;
    }
}

LS_HD inline void dequantize_block_q4_1(const block_q4_1* b, float* out) {
    const float d = fp16_to_fp32(b->d);
    const float m = fp16_to_fp32(b->m);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
        const int x0 = b->qs[j] & 0x0F;
        const int x1 = b->qs[j] >> 4;
        out[j] = x0 * d + m;
        out[j + kQK4_1 / 2] = x1 * d + m;
    }
}

LS_HD inline uint32_t load_u32_le(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
           (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

LS_HD inline void dequantize_block_q5_0(const block_q5_0* b, float* out) {
    const float d = fp16_to_fp32(b->d);
    const uint32_t qh = load_u32_le(b->qh);
    for (int j = 0; j < kQK5_0 / 2; ++j) {
        const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10);
        const int h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
        const int x0 = ((b->qs[j] & 0x0F) | h0) - 16;
        const int x1 = ((b->qs[j] >> 4) | h1) - 16;
        out[j] = x0 * d;
        out[j + kQK5_0 / 2] = x1 * d;
    }
}

LS_HD inline void dequantize_block_q5_1(const block_q5_1* b, float* out) {
    const float d = fp16_to_fp32(b->d);
    const float m = fp16_to_fp32(b->m);
    const uint32_t qh = load_u32_le(b->qh);
    for (int j = 0; j < kQK5_1 / 2; ++j) {
        const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10);
        const int h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
        const int x0 = (b->qs[j] & 0x0F) | h0;
        const int x1 = (b->qs[j] >> 4) | h1;
        out[j] = x0 * d + m;
        out[j + kQK5_1 / 2] = x1 * d + m;
    }
}

LS_HD inline void dequantize_block_q8_0(const block_q8_0* b, float* out) {
    const float d = fp16_to_fp32(b->d);
    for (int j = 0; j < kQK8_0; ++j) out[j] = b->qs[j] * d;
}

LS_HD inline void dequantize_block_q2_K(const block_q2_K* b, float* out) {
    const float d = fp16_to_fp32(b->d);
    const float dmin = fp16_to_fp32(b->dmin);
    const uint8_t* q = b->qs;
    int is = 0;
    for (int half = 0; half < kQK_K; half += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int part = 0; part < 2; ++part) {  // two groups of 16 share one shift
                const uint8_t sc = b->scales[is++];
                const float dl = d * (sc & 0xF);
                const float ml = dmin * (sc >> 4);
                const uint8_t* qp = q + 16 * part;
                for (int l = 0; l < 16; ++l) *out++ = dl * ((qp[l] >> shift) & 3) - ml;
            }
        }
        q += 32;
    }
}

LS_HD inline void dequantize_block_q3_K(const block_q3_K* b, float* out) {
    const float d_all = fp16_to_fp32(b->d);
    const uint8_t* q = b->qs;
    uint8_t m = 1;
    int is = 0;
    for (int half = 0; half < kQK_K; half += 128) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int part = 0; part < 2; ++part) {
                const float dl = d_all * (q3_K_scale(b->scales, is++) - 32);
                const uint8_t* qp = q + 16 * part;
                const uint8_t* hp = b->hmask + 16 * part;
                for (int l = 0; l < 16; ++l)
                    *out++ = dl * (((qp[l] >> shift) & 3) - ((hp[l] & m) ? 0 : 4));
            }
            m = static_cast<uint8_t>(m << 1);
        }
        q += 32;
    }
}

LS_HD inline void dequantize_block_q4_K(const block_q4_K* b, float* out) {
    const float d = fp16_to_fp32(b->d);
    const float dmin = fp16_to_fp32(b->dmin);
    const uint8_t* q = b->qs;
    for (int is = 0; is < 8; is += 2) {
        uint8_t sc, m;
        get_scale_min_k4(is, b->scales, &sc, &m);
        const float d1 = d * sc;
        const float m1 = dmin * m;
        get_scale_min_k4(is + 1, b->scales, &sc, &m);
        const float d2 = d * sc;
        const float m2 = dmin * m;
        for (int l = 0; l < 32; ++l) *out++ = d1 * (q[l] & 0xF) - m1;
        for (int l = 0; l < 32; ++l) *out++ = d2 * (q[l] >> 4) - m2;
        q += 32;
    }
}

LS_HD inline void dequantize_block_q5_K(const block_q5_K* b, float* out) {
    const float d = fp16_to_fp32(b->d);
    const float dmin = fp16_to_fp32(b->dmin);
    const uint8_t* ql = b->qs;
    const uint8_t* qh = b->qh;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2) {
        uint8_t sc, m;
        get_scale_min_k4(is, b->scales, &sc, &m);
        const float d1 = d * sc;
        const float m1 = dmin * m;
        get_scale_min_k4(is + 1, b->scales, &sc, &m);
        const float d2 = d * sc;
        const float m2 = dmin * m;
        for (int l = 0; l < 32; ++l) *out++ = d1 * ((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; ++l) *out++ = d2 * ((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
        ql += 32;
        u1 = static_cast<uint8_t>(u1 << 2);
        u2 = static_cast<uint8_t>(u2 << 2);
    }
}

LS_HD inline void dequantize_block_q6_K(const block_q6_K* b, float* out) {
    const float d = fp16_to_fp32(b->d);
    const uint8_t* ql = b->ql;
    const uint8_t* qh = b->qh;
    const int8_t* sc = b->scales;
    for (int half = 0; half < kQK_K; half += 128) {
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            // (d * scale) * q: the second product can round, so the grouping is part of the format.
            out[l] = d * sc[is] * q1;
            out[l + 32] = d * sc[is + 2] * q2;
            out[l + 64] = d * sc[is + 4] * q3;
            out[l + 96] = d * sc[is + 6] * q4;
        }
        out += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

LS_HD inline void dequantize_block_q8_K(const block_q8_K* b, float* out) {
    for (int j = 0; j < kQK_K; ++j) out[j] = b->d * b->qs[j];
}

LS_HD inline void dequantize_block_iq4_nl(const block_iq4_nl* b, float* out) {
    const float d = fp16_to_fp32(b->d);
    for (int j = 0; j < kQK4_NL / 2; ++j) {
        out[j] = d * iq4nl_value(b->qs[j] & 0xF);
        out[j + kQK4_NL / 2] = d * iq4nl_value(b->qs[j] >> 4);
    }
}

LS_HD inline void dequantize_block_mxfp4(const block_mxfp4* b, float* out) {
    const float d = e8m0_to_fp32_half(b->e);
    for (int j = 0; j < kQK_MXFP4 / 2; ++j) {
        out[j] = mxfp4_value(b->qs[j] & 0xF) * d;
        out[j + kQK_MXFP4 / 2] = mxfp4_value(b->qs[j] >> 4) * d;
    }
}

LS_HD inline void dequantize_block_nvfp4(const block_nvfp4* b, float* out) {
    for (int s = 0; s < kQK_NVFP4 / kQK_NVFP4_SUB; ++s) {
        const float d = ue4m3_to_fp32_half(b->d[s]);
        for (int j = 0; j < kQK_NVFP4_SUB / 2; ++j) {
            const uint8_t q = b->qs[s * (kQK_NVFP4_SUB / 2) + j];
            out[s * kQK_NVFP4_SUB + j] = mxfp4_value(q & 0xF) * d;
            out[s * kQK_NVFP4_SUB + j + kQK_NVFP4_SUB / 2] = mxfp4_value(q >> 4) * d;
        }
    }
}

// The codes of a ternary block in element order: 0, 1 or 2 (TQ2_0 also 3), the weight being
// (code - 1) * d. A TQ1_0 byte holds base-3 digits as a fraction of 243: digit n is the top of
// (byte * 3^n mod 256) * 3 / 256, as ggml reads it.
LS_HD inline int tq1_0_digit(uint8_t byte, int n) {
    const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t q = static_cast<uint8_t>(byte * pow3[n]);
    return (q * 3) >> 8;
}
LS_HD inline void tq1_0_codes(const block_tq1_0* b, uint8_t* out) {
    for (int n = 0; n < 5; ++n)
        for (int m = 0; m < 32; ++m) out[n * 32 + m] = static_cast<uint8_t>(tq1_0_digit(b->qs[m], n));
    for (int n = 0; n < 5; ++n)
        for (int m = 0; m < 16; ++m) out[160 + n * 16 + m] = static_cast<uint8_t>(tq1_0_digit(b->qs[32 + m], n));
    for (int n = 0; n < 4; ++n)
        for (int j = 0; j < 4; ++j) out[240 + n * 4 + j] = static_cast<uint8_t>(tq1_0_digit(b->qh[j], n));
}
LS_HD inline void tq2_0_codes(const block_tq2_0* b, uint8_t* out) {
    for (int j = 0; j < kQK_K / 4; j += 32)
        for (int l = 0; l < 4; ++l)
            for (int m = 0; m < 32; ++m) out[j * 4 + l * 32 + m] = static_cast<uint8_t>((b->qs[j + m] >> (2 * l)) & 3);
}
LS_HD inline void dequantize_block_tq1_0(const block_tq1_0* b, float* out) {
    uint8_t codes[kQK_K];
    tq1_0_codes(b, codes);
    const float d = fp16_to_fp32(b->d);
    for (int j = 0; j < kQK_K; ++j) out[j] = static_cast<float>(codes[j] - 1) * d;
}
LS_HD inline void dequantize_block_tq2_0(const block_tq2_0* b, float* out) {
    uint8_t codes[kQK_K];
    tq2_0_codes(b, codes);
    const float d = fp16_to_fp32(b->d);
    for (int j = 0; j < kQK_K; ++j) out[j] = static_cast<float>(codes[j] - 1) * d;
}

// IQ4_XS: the scale of 32-element sub-block ib (6 bits, 4 in scales_l and 2 in scales_h) minus 32.
LS_HD inline int iq4_xs_scale(const block_iq4_xs& b, int ib) {
    return (((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4)) - 32;
}

LS_HD inline void dequantize_block_iq4_xs(const block_iq4_xs* b, float* out) {
    const float d = fp16_to_fp32(b->d);
    const uint8_t* qs = b->qs;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
        const float dl = d * iq4_xs_scale(*b, ib);
        for (int j = 0; j < 16; ++j) {
            out[j] = dl * iq4nl_value(qs[j] & 0xF);
            out[j + 16] = dl * iq4nl_value(qs[j] >> 4);
        }
        out += 32;
        qs += 16;
    }
}

// Plain types, one element per "block", so callers can treat every format alike.
LS_HD inline void dequantize_block_f32(const float* b, float* out) { out[0] = b[0]; }
LS_HD inline void dequantize_block_f16(const uint16_t* b, float* out) { out[0] = fp16_to_fp32(b[0]); }
LS_HD inline void dequantize_block_bf16(const uint16_t* b, float* out) { out[0] = bf16_to_fp32(b[0]); }

}  // namespace ls
