// Scalar emulation of ggml's x86 AVX2 / AVX-512 quantized dot products. Compiled with
// -ffp-contract=off: every vfmadd of the SIMD code is an explicit std::fma, nothing else fuses.
#include "kernels/cpu/vec_dot_x86.h"

#include <cmath>

#include "kernels/common/fp16.h"
#include "kernels/common/quant_blocks.h"
#include "kernels/cpu/ggml_order.h"
#include "kernels/cpu/vec_dot_avx2.h"
#include "kernels/cpu/vec_dot_avx512.h"

namespace ls {

namespace {

constexpr int kLanes = 8;  // f32 lanes of a 256-bit register



using ggml_order::hsum8;

// The int32 lanes of the SIMD kernels (maddubs / dpbusd, then madd with the scales): a 32-byte
// chunk of quants spans the eight lanes, four bytes each, so element e lands in lane (e % 32) / 4.
// The sums are exact integers; only this grouping reaches the float math.
template <int kGroup>
void chunk_lanes(const int8_t* q8, const int8_t* w, const int* scales, int n, int32_t lanes[kLanes]) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = 0;
    for (int e = 0; e < n; ++e) lanes[(e % 32) / 4] += scales[e / kGroup] * (w[e] * q8[e]);
}

// Quants of one 32-block as signed bytes, element order.
void unpack_q4_0(const block_q4_0& b, int8_t out[32]) {
    for (int j = 0; j < 16; ++j) {
        out[j] = static_cast<int8_t>((b.qs[j] & 0x0F) - 8);
        out[j + 16] = static_cast<int8_t>((b.qs[j] >> 4) - 8);
    }
}
void unpack_q4_1(const block_q4_1& b, int8_t out[32]) {
    for (int j = 0; j < 16; ++j) {
        out[j] = static_cast<int8_t>(b.qs[j] & 0x0F);
        out[j + 16] = static_cast<int8_t>(b.qs[j] >> 4);
    }
}
void unpack_q5_0(const block_q5_0& b, int8_t out[32]) {
    const uint32_t qh = load_u32_le(b.qh);
    for (int j = 0; j < 16; ++j) {
        out[j] = static_cast<int8_t>(((b.qs[j] & 0x0F) | (((qh >> j) & 1) << 4)) - 16);
        out[j + 16] = static_cast<int8_t>(((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
    }
}
void unpack_q5_1(const block_q5_1& b, int8_t out[32]) {
    const uint32_t qh = load_u32_le(b.qh);
    for (int j = 0; j < 16; ++j) {
        out[j] = static_cast<int8_t>((b.qs[j] & 0x0F) | (((qh >> j) & 1) << 4));
        out[j + 16] = static_cast<int8_t>((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
    }
}

// One 32-block: the eight lane sums of w . a (no scales).
void block_lanes(const int8_t w[32], const int8_t* a, int32_t lanes[kLanes]) {
    static const int kOne[1] = {1};
    chunk_lanes<32>(a, w, kOne, 32, lanes);
}

// ggml_vec_dot_{q4_0,q5_0,q8_0}_q8_0, AVX2 path: acc = fma(d, q, acc) per block.
template <typename Block, void (*kUnpack)(const Block&, int8_t*)>
float dot_q8_0_family(int64_t n, const Block* w, const block_q8_0* a) {
    float acc[kLanes] = {};
    int8_t q[32];
    int32_t lanes[kLanes];
    for (int64_t b = 0; b < n / 32; ++b) {
        kUnpack(w[b], q);
        block_lanes(q, a[b].qs, lanes);
        const float d = fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d);
        for (int l = 0; l < kLanes; ++l) acc[l] = std::fma(d, static_cast<float>(lanes[l]), acc[l]);
    }
    return hsum8(acc);
}

void unpack_q8_0(const block_q8_0& b, int8_t out[32]) {
    for (int j = 0; j < 32; ++j) out[j] = b.qs[j];
}

void unpack_iq4_nl(const block_iq4_nl& b, int8_t out[32]) {
    for (int j = 0; j < 16; ++j) {
        out[j] = static_cast<int8_t>(iq4nl_value(b.qs[j] & 0x0F));
        out[j + 16] = static_cast<int8_t>(iq4nl_value(b.qs[j] >> 4));
    }
}

void unpack_mxfp4(const block_mxfp4& b, int8_t out[32]) {
    for (int j = 0; j < 16; ++j) {
        out[j] = static_cast<int8_t>(mxfp4_value(b.qs[j] & 0x0F));
        out[j + 16] = static_cast<int8_t>(mxfp4_value(b.qs[j] >> 4));
    }
}

float scale_iq4_nl(const block_iq4_nl& b) { return fp16_to_fp32(b.d); }
float scale_mxfp4(const block_mxfp4& b) { return e8m0_to_fp32_half(b.e); }

// ggml_vec_dot_iq4_nl_q8_0 and ggml_vec_dot_mxfp4_q8_0, AVX2 path (AVX-512 builds take it too):
// blocks in pairs, the even one into one accumulator and the odd one into another, their lane sums
// added before the hsum; a last odd block is added in the C tail (GCC fuses its `sumf += d * sumi`).
template <typename Block, void (*kUnpack)(const Block&, int8_t*), float (*kScale)(const Block&)>
float dot_paired(int64_t n, const Block* w, const block_q8_0* a) {
    float acc[2][kLanes] = {};
    int8_t q[32];
    int32_t lanes[kLanes];
    const int64_t nb = n / 32;
    int64_t b = 0;
    for (; b + 1 < nb; b += 2)
        for (int k = 0; k < 2; ++k) {
            kUnpack(w[b + k], q);
            block_lanes(q, a[b + k].qs, lanes);
            const float d = fp16_to_fp32(a[b + k].d) * kScale(w[b + k]);
            for (int l = 0; l < kLanes; ++l) acc[k][l] = std::fma(d, static_cast<float>(lanes[l]), acc[k][l]);
        }
    float both[kLanes];
    for (int l = 0; l < kLanes; ++l) both[l] = acc[0][l] + acc[1][l];
    float sum = hsum8(both);
    for (; b < nb; ++b) {
        kUnpack(w[b], q);
        int32_t isum = 0;
        for (int e = 0; e < 32; ++e) isum += q[e] * a[b].qs[e];
        sum = std::fma(fp16_to_fp32(a[b].d) * kScale(w[b]), static_cast<float>(isum), sum);
    }
    return sum;
}

// ggml_vec_dot_nvfp4_q8_0, AVX2 path (AVX-512 builds take it too): one accumulator; a 64-element
// block meets two Q8_0 blocks, and each 32 elements' lanes 0-3 (its first sub-block) take that
// sub-block's scale times the activation's, lanes 4-7 the second's: acc = fma(s, lane, acc), the
// first 32 elements' FMA before the second's.
float dot_nvfp4(int64_t n, const block_nvfp4* w, const block_q8_0* a) {
    float acc[kLanes] = {};
    int8_t q[32];
    int32_t lanes[kLanes];
    for (int64_t b = 0; b < n / kQK_NVFP4; ++b)
        for (int half = 0; half < 2; ++half) {
            for (int k = 0; k < 2; ++k)
                for (int j = 0; j < 8; ++j) {
                    const uint8_t byte = w[b].qs[8 * (2 * half + k) + j];
                    q[16 * k + j] = static_cast<int8_t>(mxfp4_value(byte & 0x0F));
                    q[16 * k + j + 8] = static_cast<int8_t>(mxfp4_value(byte >> 4));
                }
            const block_q8_0& y = a[2 * b + half];
            block_lanes(q, y.qs, lanes);
            const float dy = fp16_to_fp32(y.d);
            const float s[2] = {ue4m3_to_fp32_half(w[b].d[2 * half]) * dy, ue4m3_to_fp32_half(w[b].d[2 * half + 1]) * dy};
            for (int l = 0; l < kLanes; ++l) acc[l] = std::fma(s[l / 4], static_cast<float>(lanes[l]), acc[l]);
        }
    return hsum8(acc);
}

// ggml_vec_dot_iq4_xs_q8_K, AVX2 path: per super-block the eight lanes of the eight 32-element
// sub-blocks times their 6-bit scales (minus 32), as exact integers; acc = fma(d_w * d_a, lane, acc).
float dot_iq4_xs(int64_t n, const block_iq4_xs* w, const block_q8_K* a) {
    float acc[kLanes] = {};
    int8_t q[kQK_K];
    int scales[kQK_K / 32];
    int32_t lanes[kLanes];
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        for (int ib = 0; ib < kQK_K / 32; ++ib) {
            const uint8_t* qs = w[b].qs + 16 * ib;
            for (int j = 0; j < 16; ++j) {
                q[32 * ib + j] = static_cast<int8_t>(iq4nl_value(qs[j] & 0x0F));
                q[32 * ib + j + 16] = static_cast<int8_t>(iq4nl_value(qs[j] >> 4));
            }
            scales[ib] = iq4_xs_scale(w[b], ib);
        }
        chunk_lanes<32>(a[b].qs, q, scales, kQK_K, lanes);
        const float d = fp16_to_fp32(w[b].d) * a[b].d;
        for (int l = 0; l < kLanes; ++l) acc[l] = std::fma(d, static_cast<float>(lanes[l]), acc[l]);
    }
    return hsum8(acc);
}

// ggml_vec_dot_tq1_0_q8_K / _tq2_0_q8_K, AVX2 path: the unsigned codes (0..2) times the
// activations in 16-bit lanes, element e in 32-bit lane (e % 32) / 4, and the -1 of every code
// taken off through the activation's bsums, bsum[m] from 16-bit lane m (so 32-bit lane l loses
// bsum[2l] + bsum[2l+1]); acc = fma(float(lane), d_a * d_w, acc).
template <typename Block, void (*kCodes)(const Block*, uint8_t*)>
float dot_ternary(int64_t n, const Block* w, const block_q8_K* a) {
    float acc[kLanes] = {};
    uint8_t codes[kQK_K];
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        kCodes(&w[b], codes);
        int32_t lanes[kLanes] = {};
        for (int e = 0; e < kQK_K; ++e) lanes[(e % 32) / 4] += codes[e] * a[b].qs[e];
        for (int l = 0; l < kLanes; ++l) lanes[l] -= a[b].bsums[2 * l] + a[b].bsums[2 * l + 1];
        const float d = a[b].d * fp16_to_fp32(w[b].d);
        for (int l = 0; l < kLanes; ++l) acc[l] = std::fma(static_cast<float>(lanes[l]), d, acc[l]);
    }
    return hsum8(acc);
}

// ggml_vec_dot_{q4_1,q5_1}_q8_1, AVX2 path. GCC fuses `summs += m * s` (C code, -O3 -march=native).
template <typename Block, void (*kUnpack)(const Block&, int8_t*)>
float dot_q8_1_family(int64_t n, const Block* w, const block_q8_1* a) {
    float acc[kLanes] = {};
    float summs = 0.0f;
    int8_t q[32];
    int32_t lanes[kLanes];
    for (int64_t b = 0; b < n / 32; ++b) {
        summs = std::fma(fp16_to_fp32(w[b].m), fp16_to_fp32(a[b].s), summs);
        kUnpack(w[b], q);
        block_lanes(q, a[b].qs, lanes);
        const float d = fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d);
        for (int l = 0; l < kLanes; ++l) acc[l] = std::fma(d, static_cast<float>(lanes[l]), acc[l]);
    }
    return hsum8(acc) + summs;
}

float dot_q2_K(int64_t n, const block_q2_K* w, const block_q8_K* a) {
    float acc[kLanes] = {};
    int8_t q[kQK_K];
    int scales[16];
    int32_t lanes[kLanes];
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = a[b].d * fp16_to_fp32(w[b].d);
        const float dmin = -a[b].d * fp16_to_fp32(w[b].dmin);
        // Mins first: madd of the 16 mins with the 16 bsums gives lane l = pair (2l, 2l+1).
        for (int l = 0; l < kLanes; ++l) {
            const int32_t m = (w[b].scales[2 * l] >> 4) * a[b].bsums[2 * l] + (w[b].scales[2 * l + 1] >> 4) * a[b].bsums[2 * l + 1];
            acc[l] = std::fma(dmin, static_cast<float>(m), acc[l]);
        }
        for (int half = 0; half < 2; ++half)
            for (int shift = 0; shift < 4; ++shift)
                for (int l = 0; l < 32; ++l)
                    q[128 * half + 32 * shift + l] = static_cast<int8_t>((w[b].qs[32 * half + l] >> (2 * shift)) & 3);
        for (int j = 0; j < 16; ++j) scales[j] = w[b].scales[j] & 0xF;
        chunk_lanes<16>(a[b].qs, q, scales, kQK_K, lanes);
        for (int l = 0; l < kLanes; ++l) acc[l] = std::fma(d, static_cast<float>(lanes[l]), acc[l]);
    }
    return hsum8(acc);
}

float dot_q3_K(int64_t n, const block_q3_K* w, const block_q8_K* a) {
    float acc[kLanes] = {};
    int8_t q[kQK_K];
    int scales[16];
    int32_t lanes[kLanes];
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = a[b].d * fp16_to_fp32(w[b].d);
        for (int half = 0; half < 2; ++half)
            for (int shift = 0; shift < 4; ++shift) {
                const int bit = 4 * half + shift;
                for (int l = 0; l < 32; ++l) {
                    const int low = (w[b].qs[32 * half + l] >> (2 * shift)) & 3;
                    const int high = ((w[b].hmask[l] >> bit) & 1) ? 0 : 4;
                    q[128 * half + 32 * shift + l] = static_cast<int8_t>(low - high);
                }
            }
        for (int j = 0; j < 16; ++j) scales[j] = q3_K_scale(w[b].scales, j) - 32;
        chunk_lanes<16>(a[b].qs, q, scales, kQK_K, lanes);
        for (int l = 0; l < kLanes; ++l) acc[l] = std::fma(d, static_cast<float>(lanes[l]), acc[l]);
    }
    return hsum8(acc);
}

// Q4_K / Q5_K quants: low nibbles of 32 bytes are elements 64j .. 64j+31, high nibbles the next 32.
template <typename Block>
void unpack_k4(const Block& blk, const uint8_t* qh, int8_t q[kQK_K], int scales[8], int mins[8]) {
    for (int j = 0; j < kQK_K / 64; ++j)
        for (int l = 0; l < 32; ++l) {
            int lo = blk.qs[32 * j + l] & 0xF, hi = blk.qs[32 * j + l] >> 4;
            if (qh != nullptr) {
                lo |= ((qh[l] >> (2 * j)) & 1) << 4;
                hi |= ((qh[l] >> (2 * j + 1)) & 1) << 4;
            }
            q[64 * j + l] = static_cast<int8_t>(lo);
            q[64 * j + 32 + l] = static_cast<int8_t>(hi);
        }
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        get_scale_min_k4(j, blk.scales, &sc, &m);
        scales[j] = sc;
        mins[j] = m;
    }
}

// madd of the 8 mins with the pairwise (hadd) bsums: lane k = sub-blocks 2k and 2k+1.
void min_lanes_k4(const block_q8_K& a, const int mins[8], int32_t out[4]) {
    for (int k = 0; k < 4; ++k)
        out[k] = mins[2 * k] * (a.bsums[4 * k] + a.bsums[4 * k + 1]) + mins[2 * k + 1] * (a.bsums[4 * k + 2] + a.bsums[4 * k + 3]);
}

float dot_q4_K(int64_t n, const block_q4_K* w, const block_q8_K* a) {
    float acc[kLanes] = {};
    float acc_m[4] = {};
    int8_t q[kQK_K];
    int scales[8], mins[8];
    int32_t lanes[kLanes], mlanes[4];
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = a[b].d * fp16_to_fp32(w[b].d);
        const float dmin = -a[b].d * fp16_to_fp32(w[b].dmin);
        unpack_k4(w[b], nullptr, q, scales, mins);
        min_lanes_k4(a[b], mins, mlanes);
        for (int k = 0; k < 4; ++k) acc_m[k] = std::fma(dmin, static_cast<float>(mlanes[k]), acc_m[k]);
        chunk_lanes<32>(a[b].qs, q, scales, kQK_K, lanes);
        for (int l = 0; l < kLanes; ++l) acc[l] = std::fma(d, static_cast<float>(lanes[l]), acc[l]);
    }
    // _mm_movehl_ps then _mm_add_ss(movehdup): (m0 + m2) + (m1 + m3).
    const float m02 = acc_m[0] + acc_m[2];
    const float m13 = acc_m[1] + acc_m[3];
    return hsum8(acc) + (m02 + m13);
}

float dot_q5_K(int64_t n, const block_q5_K* w, const block_q8_K* a) {
    float acc[kLanes] = {};
    float summs = 0.0f;
    int8_t q[kQK_K];
    int scales[8], mins[8];
    int32_t lanes[kLanes], mlanes[4];
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = a[b].d * fp16_to_fp32(w[b].d);
        const float dmin = -a[b].d * fp16_to_fp32(w[b].dmin);
        unpack_k4(w[b], w[b].qh, q, scales, mins);
        min_lanes_k4(a[b], mins, mlanes);
        const int32_t min_sum = mlanes[0] + mlanes[1] + mlanes[2] + mlanes[3];
        // C code `summs += dmin * int`: GCC fuses it.
        summs = std::fma(dmin, static_cast<float>(min_sum), summs);
        chunk_lanes<32>(a[b].qs, q, scales, kQK_K, lanes);
        for (int l = 0; l < kLanes; ++l) acc[l] = std::fma(d, static_cast<float>(lanes[l]), acc[l]);
    }
    return hsum8(acc) + summs;
}

// The build's kernel takes the quants unsigned (0..63) and removes the -32 offset afterwards from
// the bsums: lane l loses 32 * (bsum[2l] * sc[2l] + bsum[2l+1] * sc[2l+1]). That regroups the
// integers per lane (a different grouping from subtracting 32 per element), so it shows in the floats.
float dot_q6_K(int64_t n, const block_q6_K* w, const block_q8_K* a) {
    float acc[kLanes] = {};
    int8_t q[kQK_K];
    int scales[16];
    int32_t lanes[kLanes];
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = a[b].d * fp16_to_fp32(w[b].d);
        const uint8_t* ql = w[b].ql;
        const uint8_t* qh = w[b].qh;
        for (int half = 0; half < 2; ++half) {
            int8_t* out = q + 128 * half;
            for (int l = 0; l < 32; ++l) {
                out[l] = static_cast<int8_t>((ql[l] & 0xF) | ((qh[l] & 3) << 4));
                out[l + 32] = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
                out[l + 64] = static_cast<int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                out[l + 96] = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
            }
            ql += 64;
            qh += 32;
        }
        for (int j = 0; j < 16; ++j) scales[j] = w[b].scales[j];
        chunk_lanes<16>(a[b].qs, q, scales, kQK_K, lanes);
        for (int l = 0; l < kLanes; ++l) {
            const int32_t offset = a[b].bsums[2 * l] * scales[2 * l] + a[b].bsums[2 * l + 1] * scales[2 * l + 1];
            lanes[l] -= offset * 32;
            acc[l] = std::fma(d, static_cast<float>(lanes[l]), acc[l]);
        }
    }
    return hsum8(acc);
}

}  // namespace

bool vec_dot_row_x86(GgmlType weight_type, int64_t n, const void* w, const void* act, float* out) {
#if defined(LS_HAVE_VEC_DOT_AVX2)
    // The same results on AVX-512 or AVX2 instructions where the processor has them
    // (vec_dot_avx512.cpp, vec_dot_avx2.cpp).
    if (weight_type == GgmlType::Q4_K && avx512_kernels_usable() && n > 0 && n % kQK_K == 0) {
        *out = dot_q4_K_avx512(n, static_cast<const block_q4_K*>(w), static_cast<const block_q8_K*>(act));
        return true;
    }
    if (avx2_kernels_usable() && n > 0 && n % kQK_K == 0) {
        if (weight_type == GgmlType::Q4_K) {
            *out = dot_q4_K_avx2(n, static_cast<const block_q4_K*>(w), static_cast<const block_q8_K*>(act));
            return true;
        }
        if (weight_type == GgmlType::Q6_K) {
            *out = dot_q6_K_avx2(n, static_cast<const block_q6_K*>(w), static_cast<const block_q8_K*>(act));
            return true;
        }
        if (weight_type == GgmlType::IQ4_XS) {
            *out = dot_iq4_xs_avx2(n, static_cast<const block_iq4_xs*>(w), static_cast<const block_q8_K*>(act));
            return true;
        }
        if (weight_type == GgmlType::Q5_K) {
            *out = dot_q5_K_avx2(n, static_cast<const block_q5_K*>(w), static_cast<const block_q8_K*>(act));
            return true;
        }
    }
    if (avx2_kernels_usable() && n > 0 && n % 32 == 0 &&
        (weight_type == GgmlType::Q4_0 || weight_type == GgmlType::Q5_0 || weight_type == GgmlType::Q8_0 ||
         weight_type == GgmlType::IQ4_NL || weight_type == GgmlType::MXFP4)) {
        const bool paired = weight_type == GgmlType::IQ4_NL || weight_type == GgmlType::MXFP4;
        *out = dot_q8_0_family_avx2(weight_type, n, w, static_cast<const block_q8_0*>(act), paired);
        return true;
    }
    if (avx2_kernels_usable() && n > 0 && n % kQK_NVFP4 == 0 && weight_type == GgmlType::NVFP4) {
        *out = dot_nvfp4_avx2(n, static_cast<const block_nvfp4*>(w), static_cast<const block_q8_0*>(act));
        return true;
    }
    if (avx2_kernels_usable() && n > 0 && n % 32 == 0 && (weight_type == GgmlType::Q4_1 || weight_type == GgmlType::Q5_1)) {
        *out = dot_q8_1_family_avx2(weight_type, n, w, static_cast<const block_q8_1*>(act));
        return true;
    }
#endif
    return vec_dot_row_x86_emulated(weight_type, n, w, act, out);
}

bool vec_dot_row_x86_emulated(GgmlType weight_type, int64_t n, const void* w, const void* act, float* out) {
    uint64_t row_bytes = 0;
    if (n <= 0 || !ggml_row_bytes(weight_type, n, &row_bytes)) return false;
    switch (weight_type) {
        case GgmlType::Q4_0:
            *out = dot_q8_0_family<block_q4_0, unpack_q4_0>(n, static_cast<const block_q4_0*>(w), static_cast<const block_q8_0*>(act));
            return true;
        case GgmlType::Q5_0:
            *out = dot_q8_0_family<block_q5_0, unpack_q5_0>(n, static_cast<const block_q5_0*>(w), static_cast<const block_q8_0*>(act));
            return true;
        case GgmlType::Q8_0:
            *out = dot_q8_0_family<block_q8_0, unpack_q8_0>(n, static_cast<const block_q8_0*>(w), static_cast<const block_q8_0*>(act));
            return true;
        case GgmlType::Q4_1:
            *out = dot_q8_1_family<block_q4_1, unpack_q4_1>(n, static_cast<const block_q4_1*>(w), static_cast<const block_q8_1*>(act));
            return true;
        case GgmlType::Q5_1:
            *out = dot_q8_1_family<block_q5_1, unpack_q5_1>(n, static_cast<const block_q5_1*>(w), static_cast<const block_q8_1*>(act));
            return true;
        case GgmlType::Q2_K:
            *out = dot_q2_K(n, static_cast<const block_q2_K*>(w), static_cast<const block_q8_K*>(act));
            return true;
        case GgmlType::Q3_K:
            *out = dot_q3_K(n, static_cast<const block_q3_K*>(w), static_cast<const block_q8_K*>(act));
            return true;
        case GgmlType::Q4_K:
            *out = dot_q4_K(n, static_cast<const block_q4_K*>(w), static_cast<const block_q8_K*>(act));
            return true;
        case GgmlType::Q5_K:
            *out = dot_q5_K(n, static_cast<const block_q5_K*>(w), static_cast<const block_q8_K*>(act));
            return true;
        case GgmlType::Q6_K:
            *out = dot_q6_K(n, static_cast<const block_q6_K*>(w), static_cast<const block_q8_K*>(act));
            return true;
        case GgmlType::IQ4_NL:
            *out = dot_paired<block_iq4_nl, unpack_iq4_nl, scale_iq4_nl>(n, static_cast<const block_iq4_nl*>(w),
                                                                         static_cast<const block_q8_0*>(act));
            return true;
        case GgmlType::MXFP4:
            *out = dot_paired<block_mxfp4, unpack_mxfp4, scale_mxfp4>(n, static_cast<const block_mxfp4*>(w),
                                                                      static_cast<const block_q8_0*>(act));
            return true;
        case GgmlType::NVFP4:
            *out = dot_nvfp4(n, static_cast<const block_nvfp4*>(w), static_cast<const block_q8_0*>(act));
            return true;
        case GgmlType::IQ4_XS:
            *out = dot_iq4_xs(n, static_cast<const block_iq4_xs*>(w), static_cast<const block_q8_K*>(act));
            return true;
        case GgmlType::TQ1_0:
            *out = dot_ternary<block_tq1_0, tq1_0_codes>(n, static_cast<const block_tq1_0*>(w), static_cast<const block_q8_K*>(act));
            return true;
        case GgmlType::TQ2_0:
            *out = dot_ternary<block_tq2_0, tq2_0_codes>(n, static_cast<const block_tq2_0*>(w), static_cast<const block_q8_K*>(act));
            return true;
        default: return false;
    }
}

bool iq_panel_takes(GgmlType weight_type, int64_t n, int64_t rows, int64_t columns) {
    return weight_type == GgmlType::IQ4_XS && n > 0 && n % kQK_K == 0 && rows % 8 == 0 && columns >= 8;
}

bool dot_iq_panel(GgmlType weight_type, int64_t n, const void* w, const void* act, float* out) {
#if defined(LS_HAVE_VEC_DOT_AVX2)
    if (avx2_kernels_usable() && weight_type == GgmlType::IQ4_XS && n > 0 && n % kQK_K == 0) {
        *out = dot_iq4_xs_panel_avx2(n, static_cast<const block_iq4_xs*>(w), static_cast<const block_q8_K*>(act));
        return true;
    }
#endif
    return dot_iq_panel_emulated(weight_type, n, w, act, out);
}

bool dot_iq_panel_emulated(GgmlType weight_type, int64_t n, const void* w, const void* act, float* out) {
    if (weight_type != GgmlType::IQ4_XS || n <= 0 || n % kQK_K != 0) return false;
    const auto* x = static_cast<const block_iq4_xs*>(w);
    const auto* a = static_cast<const block_q8_K*>(act);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        int32_t s = 0;
        for (int ib = 0; ib < kQK_K / 32; ++ib) {
            const uint8_t* qs = x[b].qs + 16 * ib;
            const int8_t* q8 = a[b].qs + 32 * ib;
            int32_t part = 0;
            for (int j = 0; j < 16; ++j)
                part += iq4nl_value(qs[j] & 0x0F) * q8[j] + iq4nl_value(qs[j] >> 4) * q8[j + 16];
            s += iq4_xs_scale(x[b], ib) * part;
        }
        sum = std::fma(static_cast<float>(s), fp16_to_fp32(x[b].d) * a[b].d, sum);
    }
    *out = sum;
    return true;
}

// tinyBLAS_Q0_AVX (gemm, gemm4xN and gemmMx4 alike) keeps one 8-lane f32 accumulator per output,
// adds fma(d_w * d_a, float(lane), acc) block by block and ends with the same hsum. The float
// steps are those of the AVX2 vec_dot, so the Q8_0 family kernel serves both.
bool dot_q0_tinyblas(GgmlType weight_type, int64_t n, const void* w, const void* act, float* out) {
    uint64_t row_bytes = 0;
    if (n <= 0 || !ggml_row_bytes(weight_type, n, &row_bytes)) return false;
#if defined(LS_HAVE_VEC_DOT_AVX2)
    if (avx2_kernels_usable() && (weight_type == GgmlType::Q4_0 || weight_type == GgmlType::Q5_0 ||
                                  weight_type == GgmlType::Q8_0 || weight_type == GgmlType::IQ4_NL)) {
        *out = dot_q8_0_family_avx2(weight_type, n, w, static_cast<const block_q8_0*>(act), false);
        return true;
    }
#endif
    return dot_q0_tinyblas_emulated(weight_type, n, w, act, out);
}

bool dot_q0_tinyblas_emulated(GgmlType weight_type, int64_t n, const void* w, const void* act, float* out) {
    uint64_t row_bytes = 0;
    if (n <= 0 || !ggml_row_bytes(weight_type, n, &row_bytes)) return false;
    const block_q8_0* a = static_cast<const block_q8_0*>(act);
    switch (weight_type) {
        case GgmlType::Q4_0: *out = dot_q8_0_family<block_q4_0, unpack_q4_0>(n, static_cast<const block_q4_0*>(w), a); return true;
        case GgmlType::Q5_0: *out = dot_q8_0_family<block_q5_0, unpack_q5_0>(n, static_cast<const block_q5_0*>(w), a); return true;
        case GgmlType::Q8_0: *out = dot_q8_0_family<block_q8_0, unpack_q8_0>(n, static_cast<const block_q8_0*>(w), a); return true;
        case GgmlType::IQ4_NL:
            *out = dot_q8_0_family<block_iq4_nl, unpack_iq4_nl>(n, static_cast<const block_iq4_nl*>(w), a);
            return true;
        default: return false;
    }
}

}  // namespace ls
