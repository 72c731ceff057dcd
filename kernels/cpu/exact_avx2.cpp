// Exact mode on AVX2 instructions (declared in vec_dot_avx2.h): f32 dot products in the one order
// of exact_order.h, the weights decoded to dequantize_row's floats, so each result equals the
// portable code's bit for bit. Compiled for AVX2, FMA and F16C by a target attribute (as
// vec_dot_avx2.cpp); the CPU backend calls these only on processors that have the instructions.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/common/quant_blocks.h"
#include "kernels/cpu/aligned_vector.h"
#include "kernels/cpu/avx2_common.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/vec_dot_avx2.h"

namespace ls {

using avx2::lane_sum;

// ---- Exact mode ----
// Every exact-mode f32 dot product sums in one order (exact_order.h): product i fused into lane
// i % 16 of one accumulator, in order; lane l + lane l + 8, then ((0+1)+(2+3))+((4+5)+(6+7)); the
// n % 16 leftovers fused into that sum in order. On AVX2 an output's sixteen lanes are two
// registers (lanes 0-7 and 8-15: elements 16m .. 16m + 7 and 16m + 8 .. 16m + 15). The kernels
// below keep the order, so they agree with each other and with the portable code bit for bit,
// whatever the batch size.

namespace {

// A Q4_K (or Q5_K: the same first 16 bytes) super-block's eight sub-block scales d * sc and mins
// dmin * m, as dequantize_block_q4_K computes them (the 6-bit values are exact in f32, so one
// rounded product each).
template <class Block>
LS_AVX2 inline void q4_K_scales(const Block& b, float* d1, float* m1) {
    alignas(16) uint8_t packed[16];
    unpack_scales_mins_k4(b.scales, packed);
    const __m128i bytes = _mm_load_si128(reinterpret_cast<const __m128i*>(packed));
    const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
    const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)));
    _mm256_store_ps(d1, _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b.d)), sc));
    _mm256_store_ps(m1, _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b.dmin)), mn));
}

// Eight decoded weights of a Q4_K sub-block, d1 * q - m1 (see dot_q4_K_f32_rows_t). `q` points
// at eight quant bytes; `high` takes their upper nibbles.
LS_AVX2 inline __m256 q4_K_weights8(const uint8_t* q, bool high, __m256 d1, __m256 m1) {
    const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
    const __m256i nib = high ? _mm256_srli_epi32(bytes, 4) : _mm256_and_si256(bytes, _mm256_set1_epi32(0x0F));
    return _mm256_fmsub_ps(d1, _mm256_cvtepi32_ps(nib), m1);
}

// R Q4_K rows (row_stride blocks apart) dotted with x, each row its own two accumulators, so that
// 2R independent chains hide the latency of the fused adds. Each weight is d1 * q - m1 as
// dequantize_block_q4_K computes it (multiply, then subtract): d1 = d * sc has at most 11 + 6
// significant bits and q at most 4, so the product is exact in f32 and one fused multiply-subtract
// rounds exactly as the two steps do.
// The quants reach the float unit as fp16 denormals: the half whose bits are q is q * 2^-24
// exactly, so a block's nibbles are spread to 16-bit lanes once (a buffer in L1) and each eight
// weights are one memory-operand conversion, with d1 * 2^24 (exact) as the multiplier: the product
// is the same real number, so the same bits. That keeps the chain from the weight bytes to the
// fused add short, which is what the decode loop waits on.
// While a group of rows is computed, the next group's blocks (R rows further on) are prefetched:
// the hardware prefetcher alone does not keep up with rows this short.
template <int R>
LS_AVX2 void dot_q4_K_f32_rows_t(int64_t n, const block_q4_K* w, int64_t row_stride, const float* x, float* out) {
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi16(0x0F);
    const __m256 two24 = _mm256_set1_ps(16777216.0f);
    alignas(32) uint16_t q[R][kQK_K];  // quants of the current block, in element order
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        alignas(32) float d1[R][8], m1[R][8];
        for (int r = 0; r < R; ++r) {
            const block_q4_K* wb = w + r * row_stride + b;
            const char* next = reinterpret_cast<const char*>(wb + R * row_stride);
            _mm_prefetch(next, _MM_HINT_T0);
            _mm_prefetch(next + 64, _MM_HINT_T0);
            _mm_prefetch(next + 128, _MM_HINT_T0);
            q4_K_scales(*wb, d1[r], m1[r]);
            _mm256_store_ps(d1[r], _mm256_mul_ps(_mm256_load_ps(d1[r]), two24));
            for (int i = 0; i < 8; ++i) {  // 16 quant bytes: low nibbles of sub-block 2 (i / 2), high of the next
                const __m256i bytes = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb->qs + 16 * i)));
                uint16_t* dst = q[r] + 64 * (i / 2) + 16 * (i % 2);
                _mm256_store_si256(reinterpret_cast<__m256i*>(dst), _mm256_and_si256(bytes, low4));
                _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 32), _mm256_srli_epi16(bytes, 4));
            }
        }
        const float* xb = x + b * kQK_K;
        for (int j = 0; j < 8; ++j) {
            __m256 d[R], m[R];
            for (int r = 0; r < R; ++r) d[r] = _mm256_broadcast_ss(&d1[r][j]), m[r] = _mm256_broadcast_ss(&m1[r][j]);
            for (int k = 0; k < 4; ++k) {  // elements 32 j + 8 k: lanes 0-7 for even k, 8-15 for odd
                const __m256 xv = _mm256_loadu_ps(xb + 32 * j + 8 * k);
                for (int r = 0; r < R; ++r) {
                    const __m256 qv = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(q[r] + 32 * j + 8 * k)));
                    acc[r][k & 1] = _mm256_fmadd_ps(_mm256_fmsub_ps(d[r], qv, m[r]), xv, acc[r][k & 1]);
                }
            }
        }
    }
    for (int r = 0; r < R; ++r) out[r] = lane_sum(acc[r][0], acc[r][1]);
}

// R weight rows (f32, at wr[r]) against C activation columns (x_stride apart) over n16 elements
// (a multiple of 16), lanes 8h .. 8h + 7 of each output: the elements 16m + 8h .. 16m + 8h + 7.
// The two halves are independent chains, so each is one pass with R x C registers, as many as
// eight lanes an output would need. acc[(r * acc_stride + c) * 16 + 8h ..] holds the running lanes
// of output (r, c), loaded and stored around the pass, which leaves every chain's order untouched.
template <int R, int C>
LS_AVX2 void exact_tile(const float* const* wr, const float* x, int64_t x_stride, int64_t n16, int h, float* acc,
                        int64_t acc_stride) {
    __m256 a[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) a[r][c] = _mm256_loadu_ps(acc + (r * acc_stride + c) * 16 + 8 * h);
    for (int64_t k = 8 * h; k < n16; k += 16) {
        __m256 xv[C];
        for (int c = 0; c < C; ++c) xv[c] = _mm256_loadu_ps(x + c * x_stride + k);
        for (int r = 0; r < R; ++r) {
            const __m256 wv = _mm256_loadu_ps(wr[r] + k);
            for (int c = 0; c < C; ++c) a[r][c] = _mm256_fmadd_ps(wv, xv[c], a[r][c]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) _mm256_storeu_ps(acc + (r * acc_stride + c) * 16 + 8 * h, a[r][c]);
}

// All the rows (in groups of four) against C columns, both halves: the columns' chunk of x is read
// from L2 once and stays in L1 while every row group uses it.
template <int C>
LS_AVX2 void exact_column_block(const float* const* wr, int rows, const float* x, int64_t x_stride, int64_t T,
                                int64_t n16, float* acc) {
    for (int g = 0; g < rows; g += 4) {
        float* a = acc + g * T * 16;
        for (int h = 0; h < 2; ++h) switch (std::min(rows - g, 4)) {
                case 4: exact_tile<4, C>(wr + g, x, x_stride, n16, h, a, T); break;
                case 3: exact_tile<3, C>(wr + g, x, x_stride, n16, h, a, T); break;
                case 2: exact_tile<2, C>(wr + g, x, x_stride, n16, h, a, T); break;
                default: exact_tile<1, C>(wr + g, x, x_stride, n16, h, a, T); break;
            }
    }
}

LS_AVX2 void exact_tiles(const float* const* wr, int rows, const float* x, int64_t x_stride, int64_t T, int64_t n16,
                         float* acc) {
    int64_t t = 0;
    for (; t + 3 <= T; t += 3) exact_column_block<3>(wr, rows, x + t * x_stride, x_stride, T, n16, acc + t * 16);
    if (T - t == 2) exact_column_block<2>(wr, rows, x + t * x_stride, x_stride, T, n16, acc + t * 16);
    if (T - t == 1) exact_column_block<1>(wr, rows, x + t * x_stride, x_stride, T, n16, acc + t * 16);
}

}  // namespace

LS_AVX2 float dot_f32_exact_avx2(const float* a, const float* b, int64_t n) {
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), lo);
        hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), hi);
    }
    float sum = lane_sum(lo, hi);
    for (; i < n; ++i) sum = __builtin_fmaf(a[i], b[i], sum);
    return sum;
}

LS_AVX2 void dequantize_q4_K_avx2(const block_q4_K* w, float* out, int64_t n_blocks) {
    for (int64_t b = 0; b < n_blocks; ++b, out += kQK_K) {
        alignas(32) float d1[8], m1[8];
        q4_K_scales(w[b], d1, m1);
        for (int j = 0; j < 8; ++j)
            for (int k = 0; k < 4; ++k)
                _mm256_storeu_ps(out + 32 * j + 8 * k, q4_K_weights8(w[b].qs + 32 * (j / 2) + 8 * k, j & 1,
                                                                     _mm256_set1_ps(d1[j]), _mm256_set1_ps(m1[j])));
    }
}

void dot_q4_K_f32_avx2_rows(int64_t n, const block_q4_K* w, int64_t row_stride_blocks, int count, const float* x,
                            float* out) {
    for (; count >= 4; count -= 4, w += 4 * row_stride_blocks, out += 4)
        dot_q4_K_f32_rows_t<4>(n, w, row_stride_blocks, x, out);
    if (count == 3) dot_q4_K_f32_rows_t<3>(n, w, row_stride_blocks, x, out);
    if (count == 2) dot_q4_K_f32_rows_t<2>(n, w, row_stride_blocks, x, out);
    if (count == 1) dot_q4_K_f32_rows_t<1>(n, w, row_stride_blocks, x, out);
}

float dot_q4_K_f32_avx2(int64_t n, const block_q4_K* w, const float* x) {
    float out = 0;
    dot_q4_K_f32_rows_t<1>(n, w, 0, x, &out);
    return out;
}

namespace {

// The other formats' decode (Q5_K, Q6_K, Q8_0). A format unpacks a super-block (eight Q8_0 blocks)
// into halves h, one per element, and each sixteen elements' scale times 2^24 (and offset), so
// that the weight dequantize_row computes is one rounded operation on them:
//   Q5_K: fmsub(2^24 d1, h, m1) with h = q * 2^-24 (q < 32), d1 * q - m1: d1 * q is exact (d1 has
//         at most 11 + 6 significant bits), so one rounding as in the two steps, as for Q4_K;
//   Q6_K: 2^24 s * h with h = (q - 32) * 2^-24 and s = d * sc (exact in f32: at most 11 + 8
//         significant bits), the product s * (q - 32);
//   Q8_0: 2^24 d * h with h = q * 2^-24, the product q * d.
// The halves whose bits are q (or, signed, the sign bit and |q|) are those values exactly (fp16
// denormals), and F16C converts eight from memory at once, so each eight weights take one
// conversion and one multiply (or fused multiply-subtract) into the fused adds, as
// dot_q4_K_f32_rows_t does. The products' operands keep the scalar code's signs, so a zero weight
// is the same zero and an infinite scale gives the same infinities and NaN.
struct ExactUnpacked {
    alignas(32) uint16_t h[kQK_K];
    alignas(32) float scale[16];
    alignas(32) float offset[16];  // Q5_K only
};

// Thirty-two unsigned bytes as halves h[0 .. 32).
LS_AVX2 inline void store_halves(uint16_t* h, __m256i bytes) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(h), _mm256_cvtepu8_epi16(_mm256_castsi256_si128(bytes)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(h + 16), _mm256_cvtepu8_epi16(_mm256_extracti128_si256(bytes, 1)));
}

// Thirty-two signed bytes v as halves of v * 2^-24: |v| (128 for -128) in the low byte, the sign in
// bit 15. The qwords are ordered 0, 2, 1, 3 first, so that the in-lane unpacks give bytes 0-15,
// then 16-31.
LS_AVX2 inline void store_signed_halves(uint16_t* h, __m256i v) {
    const __m256i p = _mm256_permute4x64_epi64(v, 0xD8);
    const __m256i mag = _mm256_abs_epi8(p), sign = _mm256_and_si256(p, _mm256_set1_epi8(static_cast<char>(0x80)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(h), _mm256_unpacklo_epi8(mag, sign));
    _mm256_store_si256(reinterpret_cast<__m256i*>(h + 16), _mm256_unpackhi_epi8(mag, sign));
}

// Elements 64c + l (l < 32): the low nibble of qs[32c + l] and bit 2c of qh[l]; 64c + 32 + l: the
// high nibble and bit 2c + 1. Each sub-block of 32 has its d1 and m1.
struct Q5KUnpack {
    static constexpr int kBytes = sizeof(block_q5_K);
    static constexpr bool kOffset = true;
    LS_AVX2 static void unpack(const char* p, ExactUnpacked& out) {
        const block_q5_K& b = *reinterpret_cast<const block_q5_K*>(p);
        alignas(32) float d1[8], m1[8];
        q4_K_scales(b, d1, m1);
        const __m256 two24 = _mm256_set1_ps(16777216.0f);
        const __m256i first = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3), second = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
        const __m256 d = _mm256_load_ps(d1), m = _mm256_load_ps(m1);
        _mm256_store_ps(out.scale, _mm256_mul_ps(_mm256_permutevar8x32_ps(d, first), two24));
        _mm256_store_ps(out.scale + 8, _mm256_mul_ps(_mm256_permutevar8x32_ps(d, second), two24));
        _mm256_store_ps(out.offset, _mm256_permutevar8x32_ps(m, first));
        _mm256_store_ps(out.offset + 8, _mm256_permutevar8x32_ps(m, second));
        const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
        __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));  // bits 2c, 2c + 1 at 0, 1
        for (int c = 0; c < 4; ++c, h = _mm256_srli_epi16(h, 2)) {
            const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(qs, low4), _mm256_and_si256(_mm256_slli_epi16(h, 4), bit4));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qs, 4), low4),
                                               _mm256_and_si256(_mm256_slli_epi16(h, 3), bit4));
            store_halves(out.h + 64 * c, lo);
            store_halves(out.h + 64 * c + 32, hi);
        }
    }
};

// Elements 128i + 32k + l (l < 32) of half i: the low (k = 0, 1) or high (2, 3) nibble of
// ql[64i + 32 (k % 2) + l] and bits 2k, 2k + 1 of qh[32i + l]; group g's scale d * sc[g].
struct Q6KUnpack {
    static constexpr int kBytes = sizeof(block_q6_K);
    static constexpr bool kOffset = false;
    LS_AVX2 static void unpack(const char* p, ExactUnpacked& out) {
        const block_q6_K& b = *reinterpret_cast<const block_q6_K*>(p);
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b.d));
        for (int i = 0; i < 2; ++i) {
            const __m128i sc = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales + 8 * i));
            const __m256 s = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
            _mm256_store_ps(out.scale + 8 * i, _mm256_mul_ps(s, _mm256_set1_ps(16777216.0f)));
        }
        const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30), bias = _mm256_set1_epi8(32);
        for (int i = 0; i < 2; ++i) {
            const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * i));
            const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * i + 32));
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * i));
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
                _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, bits45)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45))};
            for (int k = 0; k < 4; ++k) store_signed_halves(out.h + 128 * i + 32 * k, _mm256_sub_epi8(q[k], bias));
        }
    }
};

// Eight blocks of 32, block j's quants and d.
struct Q80Unpack {
    static constexpr int kBytes = 8 * sizeof(block_q8_0);
    static constexpr bool kOffset = false;
    LS_AVX2 static void unpack(const char* p, ExactUnpacked& out) {
        const block_q8_0* b = reinterpret_cast<const block_q8_0*>(p);
        for (int j = 0; j < 8; ++j) {
            out.scale[2 * j] = out.scale[2 * j + 1] = _cvtsh_ss(b[j].d) * 16777216.0f;
            store_signed_halves(out.h + 32 * j, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[j].qs)));
        }
    }
};

// Elements 16g + 8i .. 16g + 8i + 7 of an unpacked super-block.
template <class F>
LS_AVX2 inline __m256 unpacked_weights8(const ExactUnpacked& b, int g, int i) {
    const __m256 h = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(b.h + 16 * g + 8 * i)));
    if constexpr (F::kOffset) return _mm256_fmsub_ps(_mm256_broadcast_ss(&b.scale[g]), h, _mm256_broadcast_ss(&b.offset[g]));
    return _mm256_mul_ps(_mm256_broadcast_ss(&b.scale[g]), h);
}

// R rows of format F (row_bytes apart) dotted with x, each row two accumulators (lanes 0-7 and
// 8-15), as dot_q4_K_f32_rows_t: a group's super-blocks unpacked, then decoded eight weights at a
// time into the fused adds; the next group's blocks are fetched meanwhile.
template <class F, int R>
LS_AVX2 void exact_rows_t(int64_t n, const char* w, uint64_t row_bytes, const float* x, float* out) {
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    ExactUnpacked blk[R];
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        for (int r = 0; r < R; ++r) {
            const char* wb = w + r * row_bytes + b * F::kBytes;
            for (int off = 0; off < F::kBytes; off += 64) _mm_prefetch(wb + R * row_bytes + off, _MM_HINT_T0);
            _mm_prefetch(wb + R * row_bytes + F::kBytes - 1, _MM_HINT_T0);
            F::unpack(wb, blk[r]);
        }
        const float* xb = x + b * kQK_K;
        for (int g = 0; g < 16; ++g) {
            const __m256 x0 = _mm256_loadu_ps(xb + 16 * g), x1 = _mm256_loadu_ps(xb + 16 * g + 8);
            for (int r = 0; r < R; ++r) {
                acc[r][0] = _mm256_fmadd_ps(unpacked_weights8<F>(blk[r], g, 0), x0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(unpacked_weights8<F>(blk[r], g, 1), x1, acc[r][1]);
            }
        }
    }
    for (int r = 0; r < R; ++r) out[r] = lane_sum(acc[r][0], acc[r][1]);
}

template <class F>
LS_AVX2 void exact_rows_all(int64_t n, const char* w, uint64_t row_bytes, int count, const float* x, float* out) {
    for (; count >= 4; count -= 4, w += 4 * row_bytes, out += 4) exact_rows_t<F, 4>(n, w, row_bytes, x, out);
    if (count == 3) exact_rows_t<F, 3>(n, w, row_bytes, x, out);
    if (count == 2) exact_rows_t<F, 2>(n, w, row_bytes, x, out);
    if (count == 1) exact_rows_t<F, 1>(n, w, row_bytes, x, out);
}

// dequantize_row of n_super super-blocks of format F, through the same unpacking.
template <class F>
LS_AVX2 void dequantize_unpacked(const char* w, float* out, int64_t n_super) {
    ExactUnpacked blk;
    for (int64_t b = 0; b < n_super; ++b, w += F::kBytes, out += kQK_K) {
        F::unpack(w, blk);
        for (int g = 0; g < 16; ++g)
            for (int i = 0; i < 2; ++i) _mm256_storeu_ps(out + 16 * g + 8 * i, unpacked_weights8<F>(blk, g, i));
    }
}

}  // namespace

bool exact_decode_avx2_has(GgmlType type, int64_t n) {
    return n % kQK_K == 0 && (type == GgmlType::Q4_K || type == GgmlType::Q5_K || type == GgmlType::Q6_K ||
                              type == GgmlType::Q8_0);
}

bool exact_decode_rows_avx2(GgmlType type, int64_t n, const void* w, uint64_t row_bytes, int count, const float* x,
                            float* out) {
    if (!exact_decode_avx2_has(type, n)) return false;
    const char* rows = static_cast<const char*>(w);
    switch (type) {
        case GgmlType::Q4_K:
            dot_q4_K_f32_avx2_rows(n, static_cast<const block_q4_K*>(w), static_cast<int64_t>(row_bytes / sizeof(block_q4_K)),
                                   count, x, out);
            return true;
        case GgmlType::Q5_K: exact_rows_all<Q5KUnpack>(n, rows, row_bytes, count, x, out); return true;
        case GgmlType::Q6_K: exact_rows_all<Q6KUnpack>(n, rows, row_bytes, count, x, out); return true;
        case GgmlType::Q8_0: exact_rows_all<Q80Unpack>(n, rows, row_bytes, count, x, out); return true;
        default: return false;
    }
}

LS_AVX2 bool dequantize_avx2(GgmlType type, const void* src, float* dst, int64_t n) {
    const char* w = static_cast<const char*>(src);
    switch (type) {
        case GgmlType::Q4_K:
            if (n % kQK_K != 0) return false;
            dequantize_q4_K_avx2(static_cast<const block_q4_K*>(src), dst, n / kQK_K);
            return true;
        case GgmlType::Q5_K:
            if (n % kQK_K != 0) return false;
            dequantize_unpacked<Q5KUnpack>(w, dst, n / kQK_K);
            return true;
        case GgmlType::Q6_K:
            if (n % kQK_K != 0) return false;
            dequantize_unpacked<Q6KUnpack>(w, dst, n / kQK_K);
            return true;
        case GgmlType::Q8_0: {  // q * d, exact, block by block
            if (n % kQK8_0 != 0) return false;
            const block_q8_0* b = static_cast<const block_q8_0*>(src);
            for (int64_t i = 0; i < n / kQK8_0; ++i, dst += kQK8_0) {
                const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[i].d));
                for (int g = 0; g < 4; ++g) {
                    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * g));
                    _mm256_storeu_ps(dst + 8 * g, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
                }
            }
            return true;
        }
        default: return false;
    }
}

LS_AVX2 void matmul_exact_avx2(GgmlType type, const void* w, uint64_t row_bytes, int rows, int64_t K, const float* x,
                               int64_t T, float* y, int64_t y_stride) {
    constexpr int64_t kChunk = 256;  // a whole number of blocks of every format; L1-sized panels
    thread_local AlignedVector<float> panel, acc;
    panel.resize(kExactMatmulRows * kChunk);
    acc.assign(static_cast<size_t>(rows * T * 16), 0.0f);
    const uint32_t block_elems = ggml_type_traits(type)->block_elems;
    const uint32_t block_bytes = ggml_type_traits(type)->block_bytes;
    const int64_t K16 = K - K % 16;
    const uint64_t chunk_bytes = kChunk / block_elems * block_bytes;
    for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
        const int64_t len = std::min(kChunk, K - k0);
        // The weights come from memory once per prompt: the next chunk of these rows (after the
        // last, the first of the next rows) is fetched while this one's columns are computed.
        for (int r = 0; r < rows; ++r) {
            const char* next = static_cast<const char*>(w) +
                               (k0 + len < K ? r * row_bytes + (k0 + kChunk) / block_elems * block_bytes : (rows + r) * row_bytes);
            for (uint64_t off = 0; off < chunk_bytes; off += 64) _mm_prefetch(next + off, _MM_HINT_T0);
        }
        const float* wr[kExactMatmulRows] = {};
        chunk_rows_f32(type, w, row_bytes, rows, k0, len, panel.data(), kChunk, dequantize_avx2, wr);
        const int64_t n16 = std::min(len, K16 - k0);
        exact_tiles(wr, rows, x + k0, K, T, n16, acc.data());
        if (k0 + len < K) continue;
        // The last chunk: the lanes of each output, then its leftovers in order.
        for (int r = 0; r < rows; ++r)
            for (int64_t t = 0; t < T; ++t) {
                const float* a = acc.data() + (r * T + t) * 16;
                float sum = lane_sum(_mm256_loadu_ps(a), _mm256_loadu_ps(a + 8));
                for (int64_t i = n16; i < len; ++i) sum = __builtin_fmaf(wr[r][i], x[t * K + k0 + i], sum);
                y[t * y_stride + r] = sum;
            }
    }
}

}  // namespace ls
