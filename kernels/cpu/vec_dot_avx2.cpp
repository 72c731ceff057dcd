// The quantized dot products of llama mode on AVX2 instructions: the same integer lanes and the
// same float steps as the scalar emulation in vec_dot_x86.cpp (ggml's AVX2 kernels), so the
// results are identical bit for bit, at the speed of the instructions. Only these functions are
// compiled for AVX2, FMA and F16C (a target attribute, not a flag for the file, so that the inline
// helpers they share with the rest of the program stay baseline code); vec_dot_row_x86 calls them
// only on processors that have the instructions.
#include "kernels/cpu/vec_dot_avx2.h"

#include <immintrin.h>

#include "kernels/common/fp16.h"
#include "kernels/common/quant_blocks.h"

namespace ls {
namespace {

// hsum_float_8, as the emulation's: (v[i] + v[4+i]), then (0+2) + (1+3).
#define LS_AVX2 __attribute__((target("avx2,fma,f16c")))

LS_AVX2 float hsum8(__m256 acc) {
    alignas(32) float v[8];
    _mm256_store_ps(v, acc);
    float r[4];
    for (int i = 0; i < 4; ++i) r[i] = v[4 + i] + v[i];
    return (r[0] + r[2]) + (r[1] + r[3]);
}

}  // namespace

// q4_K . q8_K: per super-block, lane l of the int32 sums collects bytes 4l..4l+3 of every 32-byte
// chunk of quants (maddubs pairs bytes, madd pairs those with the sub-block's scale); then
// acc = fma(d, float(lanes), acc), and four min lanes fma(-dmin * d_a, mins . bsums, acc_m).
LS_AVX2 float dot_q4_K_avx2(int64_t n, const block_q4_K* w, const block_q8_K* a) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = a[b].d * fp16_to_fp32(w[b].d);
        const float dmin = -a[b].d * fp16_to_fp32(w[b].dmin);
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) get_scale_min_k4(j, w[b].scales, &sc[j], &mn[j]);
        const int16_t* bs = a[b].bsums;
        const __m128i mins = _mm_setr_epi32(mn[0] * (bs[0] + bs[1]) + mn[1] * (bs[2] + bs[3]),
                                            mn[2] * (bs[4] + bs[5]) + mn[3] * (bs[6] + bs[7]),
                                            mn[4] * (bs[8] + bs[9]) + mn[5] * (bs[10] + bs[11]),
                                            mn[6] * (bs[12] + bs[13]) + mn[7] * (bs[14] + bs[15]));
        acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mins), acc_m);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
            const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * j));
            const __m256i q_lo = _mm256_and_si256(bits, low4);
            const __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
            const __m256i a_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs + 64 * j));
            const __m256i a_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs + 64 * j + 32));
            const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(q_lo, a_lo), _mm256_set1_epi16(sc[2 * j]));
            const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(q_hi, a_hi), _mm256_set1_epi16(sc[2 * j + 1]));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    alignas(16) float m[4];
    _mm_store_ps(m, acc_m);
    return hsum8(acc) + ((m[0] + m[2]) + (m[1] + m[3]));
}

}  // namespace ls
