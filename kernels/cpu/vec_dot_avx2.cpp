// The quantized dot products of llama mode on AVX2 instructions: the same integer lanes and the
// same float steps as the scalar emulation in vec_dot_x86.cpp (ggml's AVX2 kernels), so the
// results are identical bit for bit, at the speed of the instructions. Only these functions are
// compiled for AVX2, FMA and F16C (a target attribute, not a flag for the file, so that the inline
// helpers they share with the rest of the program stay baseline code); vec_dot_row_x86 calls them
// only on processors that have the instructions.
#include "kernels/cpu/vec_dot_avx2.h"

#include <immintrin.h>

#include <cstring>

#include "kernels/common/fp16.h"
#include "kernels/common/quant_blocks.h"
#include "kernels/cpu/ggml_order.h"

namespace ls {
namespace {

#define LS_AVX2 __attribute__((target("avx2,fma,f16c")))

// hsum_float_8 of the register, in the emulation's order.
LS_AVX2 float hsum8(__m256 acc) {
    alignas(32) float v[8];
    _mm256_store_ps(v, acc);
    return ggml_order::hsum8(v);
}

}  // namespace

bool avx2_kernels_usable() {
    static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    return yes;
}

// Exact mode: a Q4_K row decoded as dequantize_block_q4_K decodes it (d * scale * q - dmin * min,
// multiplied and subtracted separately) and dotted with x in the order of the CPU backend's
// dot_f32 (group g of eight products added unfused into accumulator g % 4, the accumulators added
// lane by lane, then ((0+1)+(2+3)) + ((4+5)+(6+7))), so the result equals dequantize_row followed
// by dot_f32, without the decoded row in memory. A super-block is 32 groups, so group k of each
// 32-quant half goes to accumulator k.
LS_AVX2 float dot_q4_K_f32_avx2(int64_t n, const block_q4_K* w, const float* x) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i low4 = _mm256_set1_epi32(0x0F);
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = _cvtsh_ss(w[b].d), dmin = _cvtsh_ss(w[b].dmin);
        const uint8_t* q = w[b].qs;
        for (int is = 0; is < 8; is += 2, q += 32) {
            uint8_t sc, m;
            get_scale_min_k4(is, w[b].scales, &sc, &m);
            const __m256 d1 = _mm256_set1_ps(d * sc), m1 = _mm256_set1_ps(dmin * m);
            get_scale_min_k4(is + 1, w[b].scales, &sc, &m);
            const __m256 d2 = _mm256_set1_ps(d * sc), m2 = _mm256_set1_ps(dmin * m);
            for (int half = 0; half < 2; ++half)
                for (int k = 0; k < 4; ++k, x += 8) {
                    const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 8 * k)));
                    const __m256i nib = half == 0 ? _mm256_and_si256(bytes, low4) : _mm256_srli_epi32(bytes, 4);
                    const __m256 v = _mm256_sub_ps(_mm256_mul_ps(half == 0 ? d1 : d2, _mm256_cvtepi32_ps(nib)), half == 0 ? m1 : m2);
                    acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(v, _mm256_loadu_ps(x)));
                }
        }
    }
    const __m256 lanes = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    alignas(32) float l[8];
    _mm256_store_ps(l, lanes);
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// q4_K . q8_K: per super-block, lane l of the int32 sums collects bytes 4l..4l+3 of every 32-byte
// chunk of quants (maddubs pairs bytes, madd pairs those with the sub-block's scale); then
// acc = fma(d, float(lanes), acc), and four min lanes fma(-dmin * d_a, mins . bsums, acc_m).
// Up to four activation rows share each weight block's unpacking; each output follows exactly the
// steps of one row alone.
template <int C>
LS_AVX2 void dot_q4_K_avx2_rows(int64_t n, const block_q4_K* w, const block_q8_K* a, int64_t a_stride_blocks,
                                 float* out, int64_t out_stride) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc[C];
    __m128 acc_m[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps(), acc_m[c] = _mm_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        _mm_prefetch(reinterpret_cast<const char*>(w + b + 4), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(w + b + 4) + 64, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(w + b + 4) + 128, _MM_HINT_T0);
        // The 6-bit scales and mins, unpacked to eight bytes each.
        uint32_t packed[4];
        std::memcpy(packed, w[b].scales, 12);
        packed[3] = ((packed[2] >> 4) & 0x0f0f0f0fu) | (((packed[1] >> 6) & 0x03030303u) << 4);
        const uint32_t mins_lo = packed[1] & 0x3f3f3f3fu;
        packed[1] = (packed[2] & 0x0f0f0f0fu) | (((packed[0] >> 6) & 0x03030303u) << 4);
        packed[2] = mins_lo;
        packed[0] &= 0x3f3f3f3fu;
        const __m256i scales_mins = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(packed)));
        const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
        const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(scales_mins));
        // Sub-block scale 2j (low nibbles) and 2j+1 (high nibbles), each in all 16 int16 lanes.
        __m256i sc[8];
        for (int j = 0; j < 8; ++j)
            sc[j] = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * j)));
        const float wd = _cvtsh_ss(w[b].d), wdmin = _cvtsh_ss(w[b].dmin);
        __m256i q[8];
        for (int j = 0; j < 4; ++j) {
            const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * j));
            q[2 * j] = _mm256_and_si256(bits, low4);
            q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
        }
        for (int c = 0; c < C; ++c) {
            const block_q8_K& ab = a[c * a_stride_blocks + b];
            const float d = ab.d * wd;
            const float dmin = -ab.d * wdmin;
            // Lane k: mn[2k] * (bsums 4k, 4k+1) + mn[2k+1] * (bsums 4k+2, 4k+3), exact integers.
            const __m128i bsums = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.bsums)),
                                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.bsums + 8)));
            acc_m[c] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(_mm_madd_epi16(mins, bsums)), acc_m[c]);
            __m256i sumi = _mm256_setzero_si256();
            for (int j = 0; j < 4; ++j) {
                const __m256i a_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 64 * j));
                const __m256i a_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 64 * j + 32));
                const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(q[2 * j], a_lo), sc[2 * j]);
                const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(q[2 * j + 1], a_hi), sc[2 * j + 1]);
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
            }
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) {
        alignas(16) float m[4];
        _mm_store_ps(m, acc_m[c]);
        out[c * out_stride] = hsum8(acc[c]) + ((m[0] + m[2]) + (m[1] + m[3]));
    }
}

float dot_q4_K_avx2(int64_t n, const block_q4_K* w, const block_q8_K* a) {
    float out = 0;
    dot_q4_K_avx2_rows<1>(n, w, a, 0, &out, 0);
    return out;
}

void dot_q4_K_avx2_rows(int64_t n, const block_q4_K* w, const block_q8_K* a, int64_t a_stride_blocks, int count,
                        float* out, int64_t out_stride) {
    for (; count >= 4; count -= 4, a += 4 * a_stride_blocks, out += 4 * out_stride)
        dot_q4_K_avx2_rows<4>(n, w, a, a_stride_blocks, out, out_stride);
    if (count == 3) dot_q4_K_avx2_rows<3>(n, w, a, a_stride_blocks, out, out_stride);
    if (count == 2) dot_q4_K_avx2_rows<2>(n, w, a, a_stride_blocks, out, out_stride);
    if (count == 1) dot_q4_K_avx2_rows<1>(n, w, a, a_stride_blocks, out, out_stride);
}

// q6_K . q8_K: the unsigned 6-bit quants (0..63) dotted as q4_K's, each 16 bytes with their own
// scale; lane l then loses 32 * (bsums . scales) of groups 2l and 2l+1 (the -32 offset of the
// quants), and acc = fma(d, float(lanes), acc).
LS_AVX2 float dot_q6_K_avx2(int64_t n, const block_q6_K* w, const block_q8_K* a) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = a[b].d * _cvtsh_ss(w[b].d);
        const int8_t* sc = w[b].scales;
        const int16_t* bs = a[b].bsums;
        __m256i sumi = _mm256_setzero_si256();
        for (int half = 0; half < 2; ++half) {
            const uint8_t* ql = w[b].ql + 64 * half;
            const __m256i lo_a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
            const __m256i lo_b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh + 32 * half));
            // The four 32-byte chunks of this half: low nibbles of ql[0..31] and ql[32..63], then
            // their high nibbles, each with its two bits of qh at bits 4 and 5.
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(lo_a, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
                _mm256_or_si256(_mm256_and_si256(lo_b, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo_a, 4), low4), _mm256_and_si256(qh, bits45)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo_b, 4), low4),
                                _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45)),
            };
            for (int c = 0; c < 4; ++c) {
                const int chunk = 4 * half + c;
                const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs + 32 * chunk));
                const __m256i scales = _mm256_setr_m128i(_mm_set1_epi16(sc[2 * chunk]), _mm_set1_epi16(sc[2 * chunk + 1]));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], q8), scales));
            }
        }
        alignas(32) int32_t offsets[8];
        for (int l = 0; l < 8; ++l) offsets[l] = 32 * (bs[2 * l] * sc[2 * l] + bs[2 * l + 1] * sc[2 * l + 1]);
        sumi = _mm256_sub_epi32(sumi, _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum8(acc);
}

}  // namespace ls
