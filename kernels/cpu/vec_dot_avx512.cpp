// Exact mode on AVX-512 (see vec_dot_avx512.h). Only these functions are compiled for AVX-512 (a
// target attribute, as in vec_dot_avx2.cpp); the CPU backend calls them only on processors that
// have the instructions.
#include "kernels/cpu/vec_dot_avx512.h"

// GCC 12's AVX-512 intrinsics start many results from _mm512_undefined_*(), which its
// -Wmaybe-uninitialized then reports at every use (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/aligned_vector.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/vec_dot_avx2.h"

namespace ls {

#define LS_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")))

bool avx512_kernels_usable() {
    static const bool yes = avx2_kernels_usable() && __builtin_cpu_supports("avx512f") &&
                            __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                            __builtin_cpu_supports("avx512vl");
    return yes;
}

bool avx512_vbmi_gfni_usable() {
    static const bool yes =
        avx512_kernels_usable() && __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("gfni");
    return yes;
}

namespace {

// An output's sixteen lanes summed in exact_order.h's order: the halves added, then the tree.
LS_AVX512 inline float lane_sum(__m512 acc) {
    alignas(32) float l[8];
    _mm256_store_ps(l, _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1)));
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// A Q4_K block's six-bit scales and mins as bytes (scales 0-7, then mins 0-7).
LS_AVX512 inline __m128i q4_K_scale_bytes(const block_q4_K& w) {
    alignas(16) uint8_t bytes[16];
    unpack_scales_mins_k4(w.scales, bytes);
    return _mm_load_si128(reinterpret_cast<const __m128i*>(bytes));
}

// A Q4_K (or Q5_K: their first 16 bytes are laid out alike) super-block's sub-block scales d * sc
// (out[0..7]) and mins dmin * m (out[8..15]), as dequantize_block_q4_K computes them: the 6-bit
// values are exact in f32, so one rounded product each. The block's first 16 bytes (d, dmin, the
// 12 packed bytes) are spread so that dword L holds the byte with value L's low bits in byte 0
// and, for sub-blocks 4-7, the byte with its two high bits in byte 1. (The shared unpack_scales_mins_k4 widened to floats here made a decoded token
// 1.07x slower.)
LS_AVX512 inline void q4_K_scales(const void* b, float* out) {
    constexpr unsigned kNone = 0x80;  // vpshufb writes zero
    constexpr auto at = [](unsigned low, unsigned high) {  // indices into the packed bytes
        return static_cast<int>((4 + low) | ((high == kNone ? kNone : 4 + high) << 8) | 0x80800000u);
    };
    const __m512i spread = _mm512_setr_epi32(at(0, kNone), at(1, kNone), at(2, kNone), at(3, kNone), at(8, 0), at(9, 1),
                                             at(10, 2), at(11, 3), at(4, kNone), at(5, kNone), at(6, kNone), at(7, kNone),
                                             at(8, 4), at(9, 5), at(10, 6), at(11, 7));
    // sc 0-3: s[j] & 63; sc 4-7: (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
    // m 0-3: s[j + 4] & 63; m 4-7: (s[j + 4] >> 4) | (s[j] >> 6) << 4.
    const __m512i shift = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4);
    const __m512i mask = _mm512_setr_epi32(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15);
    const __m128i head = _mm_loadu_si128(static_cast<const __m128i*>(b));
    const __m512i v = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(head), spread);
    const __m512i high = _mm512_and_si512(_mm512_srli_epi32(v, 10), _mm512_set1_epi32(0x30));
    const __m512i q = _mm512_ternarylogic_epi32(_mm512_srlv_epi32(v, shift), mask, high, 0xEA);  // (a & b) | c
    const __m512 d_dmin = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                                _mm512_zextps128_ps512(_mm_cvtph_ps(head)));
    _mm512_store_ps(out, _mm512_mul_ps(d_dmin, _mm512_cvtepi32_ps(q)));
}

// The sixteen weights a sub-block can have, d1 * q - m1 for q = 0 .. 15 (d1 * q is exact: d1 has
// at most 17 significant bits and q 4, so one fused multiply-subtract rounds as the scalar code's
// two steps do). A vpermps with the quants as indices then decodes sixteen weights at once; it
// reads only the low four bits of each index, so low nibbles need no mask.
LS_AVX512 inline __m512 q4_K_table(const float* scales, int j) {
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return _mm512_fmsub_ps(_mm512_set1_ps(scales[j]), iota, _mm512_set1_ps(scales[8 + j]));
}

// R Q4_K rows (row_stride blocks apart) dotted with x, each row its own accumulator, so that R
// independent chains hide the latency of the fused adds. Each 32 quant bytes hold sub-blocks 2c
// (low nibbles) and 2c + 1 (high nibbles); a lane meets elements 64c + l, + 16, + 32, + 48 in that
// order. The scales of block b + 1 are decoded while block b is computed (their loads and stores
// leave the way of the fused adds), and the next group's blocks (R rows further on) are fetched.
template <int R>
LS_AVX512 void dot_q4_K_f32_rows(int64_t n, const block_q4_K* w, int64_t row_stride, const float* x, float* out) {
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    alignas(64) float scales[2][R][16];
    const int64_t nb = n / kQK_K;
    for (int r = 0; r < R; ++r) q4_K_scales(&w[r * row_stride], scales[0][r]);
    for (int64_t b = 0; b < nb; ++b) {
        const int cur = b & 1;
        for (int r = 0; r < R; ++r) {
            const char* next = reinterpret_cast<const char*>(w + (R + r) * row_stride + b);
            _mm_prefetch(next, _MM_HINT_T0);
            _mm_prefetch(next + 64, _MM_HINT_T0);
            _mm_prefetch(next + sizeof(block_q4_K) - 1, _MM_HINT_T0);
            if (b + 1 < nb) q4_K_scales(&w[r * row_stride + b + 1], scales[cur ^ 1][r]);
        }
        const float* xb = x + b * kQK_K;
        for (int c = 0; c < 4; ++c) {
            const __m512 x0 = _mm512_loadu_ps(xb + 64 * c), x1 = _mm512_loadu_ps(xb + 64 * c + 16);
            const __m512 x2 = _mm512_loadu_ps(xb + 64 * c + 32), x3 = _mm512_loadu_ps(xb + 64 * c + 48);
            for (int r = 0; r < R; ++r) {
                const __m512 low = q4_K_table(scales[cur][r], 2 * c), high = q4_K_table(scales[cur][r], 2 * c + 1);
                const uint8_t* qs = w[r * row_stride + b].qs + 32 * c;
                const __m512i q0 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
                const __m512i q1 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16)));
                acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(q0, low), x0, acc[r]);
                acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(q1, low), x1, acc[r]);
                acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(q0, 4), high), x2, acc[r]);
                acc[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(q1, 4), high), x3, acc[r]);
            }
        }
    }
    for (int r = 0; r < R; ++r) out[r] = lane_sum(acc[r]);
}

// The other formats' decode kernels: a format gives a super-block's scales (once per block, the next
// block's while this one is computed), the quants of its 64-element chunk c (0-3) assembled
// (F::Quants), and from them the chunk's weights as four registers, elements 64c + 16g + l in
// register g, lane l: each exactly the float that dequantize_row gives, so that exact_rows' fused
// adds meet the elements in the exact order. kAhead<F>: exact_rows assembles chunk c + 1's quants
// before it sums chunk c, for every format with quants to assemble (Q8_0's F::Quants is empty: its
// bytes are read as they are converted).
template <class F>
constexpr bool kAhead = !std::is_empty_v<typename F::Quants>;

// Sixteen bytes; thirty-two bytes in both halves of a register.
LS_AVX512 inline __m128i bytes16(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
LS_AVX512 inline __m512i bytes32_twice(const void* p) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
}
// Sixteen signed bytes as floats.
LS_AVX512 inline __m512 int8_floats(const void* p) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes16(p))); }
// A chunk's 64 bytes (element e at byte e) with their 4-byte pieces transposed: 128-bit lane L,
// dword g = elements 16g + 4L .. 16g + 4L + 3, so that one in-lane byte shuffle (group_bytes)
// gives register g's sixteen elements one to a dword, where extracting a quarter of the chunk and
// widening it took two instructions.
LS_AVX512 inline __m512i transpose_pieces(__m512i q) {
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), q);
}
// Elements 16g .. 16g + 15 of a transposed chunk, element 16g + l in byte `at` (0 or 3) of dword
// l, the dword's other bytes zero.
LS_AVX512 inline __m512i group_bytes(__m512i t, int g, int at) {
    const int k = 4 * g, shift = 8 * at;
    const auto piece = [&](int j) { return static_cast<int>((0x80808080u & ~(0xFFu << shift)) | (static_cast<unsigned>(k + j) << shift)); };
    return _mm512_shuffle_epi8(t, _mm512_set4_epi32(piece(3), piece(2), piece(1), piece(0)));
}

// Instructions of VBMI and GFNI, written out: exact_rows is one template for every AVX-512
// processor, and their intrinsics would need its target attribute to name both extensions. Only
// the kernels exact_decode_rows_avx512 runs where avx512_vbmi_gfni_usable use them.
// vgf2p8affineqb: each byte of x times the 8x8 bit matrix of its qword in `matrix` (output bit k the
// parity of the input bits byte 7 - k of the matrix selects), then bits 5-7 complemented.
LS_AVX512 inline __m512i affine_bytes_not567(__m512i x, __m512i matrix) {
    __m512i r;
    asm("vgf2p8affineqb $0xE0, %2, %1, %0" : "=v"(r) : "v"(x), "v"(matrix));
    return r;
}
// vpermb, zero-masking: byte i = table[index byte i mod 64], 0 where mask bit i is clear.
LS_AVX512 inline __m512i permute_bytes_masked(__m512i table, __m512i index, __mmask64 mask) {
    __m512i r;
    asm("vpermb %1, %2, %0%{%3%}%{z%}" : "=v"(r) : "v"(table), "v"(index), "Yk"(mask));
    return r;
}

// Q5_K: d1 * q - m1 with q = the low or high nibble of qs plus sixteen for its bit in qh, as Q6_K's
// weights are made: q 2^24 (q in the top byte of its dword) converted to float, times d1 2^-24 less
// m1 in one fused multiply-subtract. d1 2^-24 and q 2^24 are exact, so their product is d1 q, exact
// too (d1 = d * sc has at most 17 significant bits and q five), and the one rounding is
// dequantize_block_q5_K's. kVbmi: each register's quants one masked vpermb of the chunk's bytes, not
// a share of transpose_pieces and a group_bytes.
template <bool kVbmi>
struct Q5KExactT {
    static constexpr int kBytes = sizeof(block_q5_K);
    using Quants = __m512i;
    LS_AVX512 static void scales(const char* b, float* out) {  // d1 2^-24 (exact: d1 >= 2^-24 or 0), then m1
        q4_K_scales(b, out);
        _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_loadu_ps(out), _mm256_set1_ps(0x1p-24f)));
    }
    LS_AVX512 static inline __attribute__((always_inline)) Quants quants(const char* b, int c) {
        const block_q5_K& blk = *reinterpret_cast<const block_q5_K*>(b);
        // Bytes 0-31: sub-block 2c's nibbles (the low ones of qs[32c ..]), 32-63: 2c + 1's (high).
        const __m512i shift = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
        const __m512i nibbles = _mm512_srlv_epi64(bytes32_twice(blk.qs + 32 * c), shift);
        // Their fifth bits, bit 2c (2c + 1) of qh[l], rotated to bit 4 of the same byte.
        const long long low = (4 - 2 * c) & 63, high = (3 - 2 * c) & 63;
        const __m512i fifth =
            _mm512_rolv_epi64(bytes32_twice(blk.qh), _mm512_setr_epi64(low, low, low, low, high, high, high, high));
        const __m512i mixed = _mm512_ternarylogic_epi64(nibbles, fifth, _mm512_set1_epi8(0x10), 0xD8);  // c ? b : a
        const __m512i q = _mm512_and_si512(mixed, _mm512_set1_epi8(0x1F));
        return kVbmi ? q : transpose_pieces(q);
    }
    LS_AVX512 static inline __attribute__((always_inline)) void weights(const char*, Quants q, const float* s, int c,
                                                                        __m512 (&w)[4]) {
        for (int g = 0; g < 4; ++g) {
            const int j = 2 * c + g / 2;  // the sub-block
            __m512i top;  // q 2^24
            if constexpr (kVbmi) {
                const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                const __m512i index = _mm512_slli_epi32(_mm512_add_epi32(iota, _mm512_set1_epi32(16 * g)), 24);
                top = permute_bytes_masked(q, index, 0x8888888888888888ull);
            } else {
                top = group_bytes(q, g, 3);
            }
            w[g] = _mm512_fmsub_ps(_mm512_set1_ps(s[j]), _mm512_cvtepi32_ps(top), _mm512_set1_ps(s[8 + j]));
        }
    }
};
using Q5KExact = Q5KExactT<false>;
using Q5KExactVbmi = Q5KExactT<true>;

// Q6_K: (d * sc) * (q - 32), each of the sixteen 16-element groups its own scale; q's low four
// bits from ql, the high two from qh. Chunks 0 and 1 are the first 128 elements (ql[0..64),
// qh[0..32)), 2 and 3 the second; in each half, elements 0-63 take ql's low nibbles and qh's bits
// 0-1 (elements 0-31) or 2-3 (32-63), elements 64-127 ql's high nibbles and qh's bits 4-5, 6-7.
// Each weight is the float of the integer (q - 32) 2^24 (q - 32 in its top byte) times the scale
// s 2^-24 (s = d sc): both exact (s 2^-24 >= 2^-48 is a normal float), so the one rounded product
// is dequantize_row's, infinite and NaN scales included.
struct Q6KExact {
    static constexpr int kBytes = sizeof(block_q6_K);
    LS_AVX512 static void scales(const char* b, float* out) {
        const block_q6_K& blk = *reinterpret_cast<const block_q6_K*>(b);
        const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes16(blk.scales)));
        _mm512_store_ps(out, _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(blk.d) * 0x1p-24f), sc));
    }
    using Quants = __m512i;
    LS_AVX512 static inline __attribute__((always_inline)) Quants quants(const char* b, int c) {
        const block_q6_K& blk = *reinterpret_cast<const block_q6_K*>(b);
        const int half = c / 2;
        const __m512i low = _mm512_loadu_si512(blk.ql + 64 * half);
        const __m512i high = bytes32_twice(blk.qh + 32 * half);
        __m512i nibbles, bits;  // bits: the two high bits of each quant at bits 4-5 of its byte
        if (c % 2 == 0) {
            nibbles = low;
            bits = _mm512_sllv_epi64(high, _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2));
        } else {
            nibbles = _mm512_srli_epi16(low, 4);
            bits = _mm512_srlv_epi64(high, _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2));
        }
        bits = _mm512_and_si512(bits, _mm512_set1_epi8(0x30));
        const __m512i quants = _mm512_ternarylogic_epi64(nibbles, _mm512_set1_epi8(0x0F), bits, 0xEA);  // (a & b) | c
        return transpose_pieces(_mm512_sub_epi8(quants, _mm512_set1_epi8(32)));
    }
    LS_AVX512 static inline __attribute__((always_inline)) void weights(const char*, Quants t, const float* s, int c,
                                                                        __m512 (&w)[4]) {
        for (int g = 0; g < 4; ++g) {
            const __m512i top = group_bytes(t, g, 3);  // (q - 32) 2^24
            w[g] = _mm512_mul_ps(_mm512_set1_ps(s[4 * c + g]), _mm512_cvtepi32_ps(top));
        }
    }
};

// The bit matrix that makes a byte of qh the top four bits of q - 32 for its field f (bits 2f and
// 2f + 1, q's bits 4 and 5): the field's low bit to bit 4, its high bit to bits 5-7, which
// affine_bytes_not567 complements: q - 32 is q with bit 5 flipped, as a signed 6-bit number, and
// bits 6-7 extend its sign.
constexpr long long high_bits_matrix(int f) {
    uint64_t m = (uint64_t{1} << (2 * f)) << 8 * (7 - 4);
    for (int k = 5; k < 8; ++k) m |= (uint64_t{1} << (2 * f + 1)) << 8 * (7 - k);
    return static_cast<long long>(m);
}

// Q6_K as Q6KExact, the same weights (the same q - 32 times the same scale), in fewer
// instructions: one affine byte transform gives each quant's high bits already as q - 32 wants
// them (no shift, mask and subtraction), and one masked byte permutation a register puts each
// (q - 32) in the top byte of its dword (no transposition and shuffle). 1.15x as fast in L2
// (bench_exact_matmul's AVX-512 and AVX-512 BW lines: 29.8 and 25.9 billion weights a second).
struct Q6KExactVbmi : Q6KExact {
    LS_AVX512 static inline __attribute__((always_inline)) Quants quants(const char* b, int c) {
        const block_q6_K& blk = *reinterpret_cast<const block_q6_K*>(b);
        const int half = c / 2, f = 2 * (c % 2);  // elements 0-31 of the chunk take qh's field f, 32-63 f + 1
        const __m512i low = _mm512_loadu_si512(blk.ql + 64 * half);
        const __m512i nibbles = c % 2 == 0 ? low : _mm512_srli_epi16(low, 4);
        const long long m0 = high_bits_matrix(f), m1 = high_bits_matrix(f + 1);
        const __m512i high = affine_bytes_not567(bytes32_twice(blk.qh + 32 * half),
                                                 _mm512_setr_epi64(m0, m0, m0, m0, m1, m1, m1, m1));
        return _mm512_ternarylogic_epi64(nibbles, _mm512_set1_epi8(0x0F), high, 0xEA);  // (a & b) | c: q - 32
    }
    LS_AVX512 static inline __attribute__((always_inline)) void weights(const char*, Quants q, const float* s, int c,
                                                                        __m512 (&w)[4]) {
        const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        for (int g = 0; g < 4; ++g) {
            // Element 16g + l in the top byte of dword l: (q - 32) 2^24.
            const __m512i index = _mm512_slli_epi32(_mm512_add_epi32(iota, _mm512_set1_epi32(16 * g)), 24);
            const __m512i top = permute_bytes_masked(q, index, 0x8888888888888888ull);
            w[g] = _mm512_mul_ps(_mm512_set1_ps(s[4 * c + g]), _mm512_cvtepi32_ps(top));
        }
    }
};

// Q8_0: q * d, eight blocks of 32 to a super-block of 256 (q * d is exact: d has at most 11
// significant bits and q 8).
struct Q80Exact {
    static constexpr int kBytes = 8 * sizeof(block_q8_0);
    LS_AVX512 static void scales(const char* b, float* out) {
        const block_q8_0* blk = reinterpret_cast<const block_q8_0*>(b);
        for (int j = 0; j < 8; ++j) out[j] = _cvtsh_ss(blk[j].d);
    }
    struct Quants {};  // read as the weights are made
    LS_AVX512 static inline __attribute__((always_inline)) Quants quants(const char*, int) { return {}; }
    LS_AVX512 static inline __attribute__((always_inline)) void weights(const char* b, Quants, const float* s, int c,
                                                                        __m512 (&w)[4]) {
        const block_q8_0* blk = reinterpret_cast<const block_q8_0*>(b);
        for (int g = 0; g < 4; ++g) {
            const int j = 2 * c + g / 2;
            w[g] = _mm512_mul_ps(int8_floats(blk[j].qs + 16 * (g % 2)), _mm512_set1_ps(s[j]));
        }
    }
};

// R rows of format F (row_bytes apart) dotted with x, as dot_q4_K_f32_rows: each row its own
// accumulator, the next block's scales decoded and the next group's blocks fetched meanwhile. A
// format gives a chunk's quants (F::quants: its bytes loaded and assembled) apart from their
// weights (F::weights), so that each chunk's quants are assembled while the chunk before is
// summed (kAhead<F>): the two chains' instructions interleave where, one after the other, each
// chunk's float work waited on its own assembly. Q6_K's kernels ran 1.10x (VBMI/GFNI) and 1.15x
// (F/BW) as fast thus in L2 (bench_exact_matmul, builds alternating, 2026-12-02); Q5_K's as fast
// (its VBMI kernel 0.97x with six rows, 1.00x with four), and both faster streaming from memory.
template <class F, int R>
LS_AVX512 void exact_rows(int64_t n, const char* w, uint64_t row_bytes, const float* x, float* out) {
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    alignas(64) float scales[2][R][16];
    const int64_t nb = n / kQK_K;
    typename F::Quants ahead[R];
    for (int r = 0; r < R; ++r) {
        F::scales(w + r * row_bytes, scales[0][r]);
        if constexpr (kAhead<F>) ahead[r] = F::quants(w + r * row_bytes, 0);
    }
    for (int64_t b = 0; b < nb; ++b) {
        const int cur = b & 1;
        for (int r = 0; r < R; ++r) {
            // One register for the row's next block, each line an offset from it (GCC otherwise
            // kept 30 pointers, spilling them to vector registers: 1.04x as fast in L2 thus).
            const char* next = w + (R + r) * row_bytes + b * F::kBytes;
            asm("" : "+r"(next));
            for (int off = 0; off < F::kBytes; off += 64) _mm_prefetch(next + off, _MM_HINT_T0);
            _mm_prefetch(next + F::kBytes - 1, _MM_HINT_T0);
            if (b + 1 < nb) F::scales(w + r * row_bytes + (b + 1) * F::kBytes, scales[cur ^ 1][r]);
        }
        const float* xb = x + b * kQK_K;
        // The chunk after the last is the last block's first again: read, not summed.
        const int64_t b_next = b + 1 < nb ? b + 1 : b;
        // Unrolled whole (GCC leaves these loops rolled otherwise: Q5_K's kernel then ran 0.67x
        // as fast in bench_exact_matmul, Q6_K's 0.88x).
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
            const __m512 x0 = _mm512_loadu_ps(xb + 64 * c), x1 = _mm512_loadu_ps(xb + 64 * c + 16);
            const __m512 x2 = _mm512_loadu_ps(xb + 64 * c + 32), x3 = _mm512_loadu_ps(xb + 64 * c + 48);
            typename F::Quants next[R];
            if constexpr (kAhead<F>)
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r)
                    next[r] = F::quants(w + r * row_bytes + (c < 3 ? b : b_next) * F::kBytes, (c + 1) % 4);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                const char* block = w + r * row_bytes + b * F::kBytes;
                __m512 wv[4];
                F::weights(block, kAhead<F> ? ahead[r] : F::quants(block, c), scales[cur][r], c, wv);
                acc[r] = _mm512_fmadd_ps(wv[0], x0, acc[r]);
                acc[r] = _mm512_fmadd_ps(wv[1], x1, acc[r]);
                acc[r] = _mm512_fmadd_ps(wv[2], x2, acc[r]);
                acc[r] = _mm512_fmadd_ps(wv[3], x3, acc[r]);
                if constexpr (kAhead<F>) ahead[r] = next[r];
            }
        }
    }
    for (int r = 0; r < R; ++r) out[r] = lane_sum(acc[r]);
}

template <class F>
LS_AVX512 void exact_rows_all(int64_t n, const char* w, uint64_t row_bytes, int count, const float* x, float* out) {
    constexpr int R = kAhead<F> ? kExactDecodeRowsAhead : kExactDecodeRows512;
    static_assert(R <= 6, "the tail below takes up to five rows");
    for (; count >= R; count -= R, w += R * row_bytes, out += R) exact_rows<F, R>(n, w, row_bytes, x, out);
    switch (count) {
        case 5: exact_rows<F, 5>(n, w, row_bytes, x, out); break;
        case 4: exact_rows<F, 4>(n, w, row_bytes, x, out); break;
        case 3: exact_rows<F, 3>(n, w, row_bytes, x, out); break;
        case 2: exact_rows<F, 2>(n, w, row_bytes, x, out); break;
        case 1: exact_rows<F, 1>(n, w, row_bytes, x, out); break;
        default: break;
    }
}

// dequantize_row of n_super super-blocks of format F, through the same chunks.
template <class F>
LS_AVX512 void dequantize_exact(const char* w, float* out, int64_t n_super) {
    alignas(64) float s[16];
    for (int64_t b = 0; b < n_super; ++b, w += F::kBytes, out += kQK_K) {
        F::scales(w, s);
        for (int c = 0; c < 4; ++c) {
            __m512 wv[4];
            F::weights(w, F::quants(w, c), s, c, wv);
            for (int g = 0; g < 4; ++g) _mm512_storeu_ps(out + 64 * c + 16 * g, wv[g]);
        }
    }
}

// The lane sums (lane_sum's order) of sixteen outputs at once, whose lanes are the registers
// a[0 .. 16), as one register: output o in lane o. Each step adds the same pairs as lane_sum, for
// all sixteen outputs at once: the halves (lanes l and l + 8) of outputs o and o + 8 side by side,
// then adjacent pairs twice within 128-bit blocks, then the two half-trees; about two shuffles per
// output where lane_sum's form takes six.
LS_AVX512 inline __m512 lane_sums16(const __m512 (&a)[16]) {
    __m512 h[8], p[4], q[2];
    // h[k] = [s(k) | s(k + 8)], s(o) = o's lanes 0-7 + lanes 8-15.
    for (int k = 0; k < 8; ++k)
        h[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[k], a[k + 8], 0x44), _mm512_shuffle_f32x4(a[k], a[k + 8], 0xee));
    // p[j]: block 0 (s0+s1, s2+s3) of outputs 2j and 2j + 1, block 1 their (s4+s5, s6+s7), blocks
    // 2 and 3 the same for outputs 2j + 8 and 2j + 9.
    for (int j = 0; j < 4; ++j)
        p[j] = _mm512_add_ps(_mm512_shuffle_ps(h[2 * j], h[2 * j + 1], 0x88), _mm512_shuffle_ps(h[2 * j], h[2 * j + 1], 0xdd));
    // q[i]: block 0 the left half-trees ((s0+s1)+(s2+s3)) of outputs 4i .. 4i + 3, block 1 their
    // right half-trees, blocks 2 and 3 the same for outputs 4i + 8 ...
    for (int i = 0; i < 2; ++i)
        q[i] = _mm512_add_ps(_mm512_shuffle_ps(p[2 * i], p[2 * i + 1], 0x88), _mm512_shuffle_ps(p[2 * i], p[2 * i + 1], 0xdd));
    // The two half-trees of every output added, blocks ordered 0-3, 4-7, 8-11, 12-15.
    const __m512i left = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    const __m512i right = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    return _mm512_add_ps(_mm512_permutex2var_ps(q[0], left, q[1]), _mm512_permutex2var_ps(q[0], right, q[1]));
}

// The accumulator panel of a prompt matmul holds the running lanes of every output, a column's
// rows side by side: output (r, c) at (c * kAccColumn + r * 16).
constexpr int64_t kAccColumn = kExactMatmulRows512 * 16;

// R weight rows (f32, at wr[r]) against C activation columns (x_stride apart) over n16 elements
// (a multiple of 16): the running lanes of output (r, c) are loaded from and stored to the
// accumulator panel around the chunk, which leaves every chain's order untouched.
template <int R, int C>
LS_AVX512 void exact_tile(const float* const* wr, const float* x, int64_t x_stride, int64_t n16, float* acc, bool first) {
    __m512 a[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) a[r][c] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc + c * kAccColumn + r * 16);
    for (int64_t k = 0; k < n16; k += 16) {
        __m512 xv[C];
        for (int c = 0; c < C; ++c) xv[c] = _mm512_loadu_ps(x + c * x_stride + k);
        for (int r = 0; r < R; ++r) {
            const __m512 wv = _mm512_loadu_ps(wr[r] + k);
            for (int c = 0; c < C; ++c) a[r][c] = _mm512_fmadd_ps(wv, xv[c], a[r][c]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) _mm512_store_ps(acc + c * kAccColumn + r * 16, a[r][c]);
}

// The weight bytes the next chunk will decode (`rows` ranges of `bytes`, row_bytes apart), fetched
// a few lines after each column block (issued all at once at the start of the chunk, the same
// fetches left exact prompts up to 2% slower in three rounds), into L1 (fetched into L2 only, they
// left prompts 1.02-1.03x slower).
struct NextChunk {
    const char* first;
    uint64_t row_bytes, bytes;
    int rows;
    int row = 0;         // the cursor: row, and byte offset in it
    uint64_t offset = 0;
    int64_t lines() const { return static_cast<int64_t>((bytes + 63) / 64) * rows; }
    void fetch(int64_t n) {
        for (; n > 0 && row < rows; --n) {
            _mm_prefetch(first + row * row_bytes + offset, _MM_HINT_T0);
            offset += 64;
            if (offset >= bytes) offset = 0, ++row;
        }
    }
};

struct TileArgs {
    const float* const* wr;
    int rows;
    int64_t x_stride, T, n16;
    bool first;
    NextChunk* next;
};

// Every row (in groups of four) against C columns: the columns' chunk of x stays in L1 while all
// the rows use it.
template <int C>
LS_AVX512 void exact_column_block(const TileArgs& t, const float* x, float* acc) {
    for (int g = 0; g < t.rows; g += 4) {
        float* a = acc + g * 16;
        switch (std::min(t.rows - g, 4)) {
            case 4: exact_tile<4, C>(t.wr + g, x, t.x_stride, t.n16, a, t.first); break;
            case 3: exact_tile<3, C>(t.wr + g, x, t.x_stride, t.n16, a, t.first); break;
            case 2: exact_tile<2, C>(t.wr + g, x, t.x_stride, t.n16, a, t.first); break;
            default: exact_tile<1, C>(t.wr + g, x, t.x_stride, t.n16, a, t.first); break;
        }
    }
}

LS_AVX512 void exact_tiles(const TileArgs& t, const float* x, float* acc) {
    constexpr int C = 6;  // 4 x 6 accumulators, the six columns and a weight row: 31 of the 32 registers
    int64_t c0 = 0;
    const int64_t blocks = (t.T + C - 1) / C;
    const int64_t lines = (t.next->lines() + blocks - 1) / blocks;
    for (; c0 + C <= t.T; c0 += C) {
        exact_column_block<C>(t, x + c0 * t.x_stride, acc + c0 * kAccColumn);
        t.next->fetch(lines);
    }
    const float* xc = x + c0 * t.x_stride;
    float* ac = acc + c0 * kAccColumn;
    switch (t.T - c0) {
        case 5: exact_column_block<5>(t, xc, ac); break;
        case 4: exact_column_block<4>(t, xc, ac); break;
        case 3: exact_column_block<3>(t, xc, ac); break;
        case 2: exact_column_block<2>(t, xc, ac); break;
        case 1: exact_column_block<1>(t, xc, ac); break;
        default: break;
    }
    t.next->fetch(lines);
}

// The finished lanes of rows x T outputs (acc, as exact_tile leaves them) summed, sixteen rows of a
// column at a time: y[t * y_stride + r].
LS_AVX512 void store_lane_sums(const float* acc, int rows, int64_t T, float* y, int64_t y_stride) {
    for (int64_t t = 0; t < T; ++t)
        for (int r0 = 0; r0 < rows; r0 += 16) {
            const int n = std::min(rows - r0, 16);
            __m512 a[16];
            for (int i = 0; i < 16; ++i) a[i] = i < n ? _mm512_load_ps(acc + t * kAccColumn + (r0 + i) * 16) : _mm512_setzero_ps();
            _mm512_mask_storeu_ps(y + t * y_stride + r0, static_cast<__mmask16>((1u << n) - 1), lane_sums16(a));
        }
}

// P f32 rows (a + r * a_stride) against one b over n16 elements, one register each.
template <int P>
LS_AVX512 void dot_rows(const float* a, int64_t a_stride, const float* b, int64_t n16, __m512* acc) {
    for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
    for (int64_t k = 0; k < n16; k += 16) {
        const __m512 bv = _mm512_loadu_ps(b + k);
        for (int p = 0; p < P; ++p) acc[p] = _mm512_fmadd_ps(_mm512_loadu_ps(a + p * a_stride + k), bv, acc[p]);
    }
}

}  // namespace

void dot_q4_K_f32_avx512_rows(int64_t n, const block_q4_K* w, int64_t row_stride_blocks, int count, const float* x,
                              float* out) {
    constexpr int R = kExactDecodeRows512;
    static_assert(R <= 6, "the tail below takes up to five rows");
    for (; count >= R; count -= R, w += R * row_stride_blocks, out += R) dot_q4_K_f32_rows<R>(n, w, row_stride_blocks, x, out);
    switch (count) {
        case 5: dot_q4_K_f32_rows<5>(n, w, row_stride_blocks, x, out); break;
        case 4: dot_q4_K_f32_rows<4>(n, w, row_stride_blocks, x, out); break;
        case 3: dot_q4_K_f32_rows<3>(n, w, row_stride_blocks, x, out); break;
        case 2: dot_q4_K_f32_rows<2>(n, w, row_stride_blocks, x, out); break;
        case 1: dot_q4_K_f32_rows<1>(n, w, row_stride_blocks, x, out); break;
        default: break;
    }
}

bool exact_decode_avx512_has(GgmlType type, int64_t n) {
    return n > 0 && n % kQK_K == 0 &&
           (type == GgmlType::Q4_K || type == GgmlType::Q5_K || type == GgmlType::Q6_K || type == GgmlType::Q8_0);
}

bool exact_decode_rows_avx512(GgmlType type, int64_t n, const void* w, uint64_t row_bytes, int count, const float* x,
                              float* out) {
    if (exact_decode_avx512_has(type, n) && avx512_vbmi_gfni_usable() &&
        (type == GgmlType::Q5_K || type == GgmlType::Q6_K)) {
        const char* rows = static_cast<const char*>(w);
        if (type == GgmlType::Q5_K) exact_rows_all<Q5KExactVbmi>(n, rows, row_bytes, count, x, out);
        else exact_rows_all<Q6KExactVbmi>(n, rows, row_bytes, count, x, out);
        return true;
    }
    return exact_decode_rows_avx512_bw(type, n, w, row_bytes, count, x, out);
}

bool exact_decode_rows_avx512_bw(GgmlType type, int64_t n, const void* w, uint64_t row_bytes, int count, const float* x,
                                 float* out) {
    if (!exact_decode_avx512_has(type, n)) return false;
    const char* rows = static_cast<const char*>(w);
    switch (type) {
        case GgmlType::Q4_K:
            dot_q4_K_f32_avx512_rows(n, static_cast<const block_q4_K*>(w),
                                     static_cast<int64_t>(row_bytes / sizeof(block_q4_K)), count, x, out);
            return true;
        case GgmlType::Q5_K: exact_rows_all<Q5KExact>(n, rows, row_bytes, count, x, out); return true;
        case GgmlType::Q6_K: exact_rows_all<Q6KExact>(n, rows, row_bytes, count, x, out); return true;
        case GgmlType::Q8_0: exact_rows_all<Q80Exact>(n, rows, row_bytes, count, x, out); return true;
        default: return false;
    }
}

LS_AVX512 bool dequantize_avx512(GgmlType type, const void* src, float* dst, int64_t n) {
    const char* w = static_cast<const char*>(src);
    if (n <= 0) return false;
    switch (type) {
        case GgmlType::Q4_K:
            if (n % kQK_K != 0) return false;
            dequantize_q4_K_avx512(static_cast<const block_q4_K*>(src), dst, n / kQK_K);
            return true;
        case GgmlType::Q5_K:
            if (n % kQK_K != 0) return false;
            dequantize_exact<Q5KExact>(w, dst, n / kQK_K);
            return true;
        case GgmlType::Q6_K:
            if (n % kQK_K != 0) return false;
            dequantize_exact<Q6KExact>(w, dst, n / kQK_K);
            return true;
        case GgmlType::Q8_0: {  // q * d, exact, block by block
            if (n % kQK8_0 != 0) return false;
            const block_q8_0* b = static_cast<const block_q8_0*>(src);
            for (int64_t i = 0; i < n / kQK8_0; ++i, dst += kQK8_0) {
                const __m512 d = _mm512_set1_ps(_cvtsh_ss(b[i].d));
                for (int g = 0; g < 2; ++g) _mm512_storeu_ps(dst + 16 * g, _mm512_mul_ps(int8_floats(b[i].qs + 16 * g), d));
            }
            return true;
        }
        default: return false;
    }
}

LS_AVX512 void dequantize_q4_K_avx512(const block_q4_K* w, float* out, int64_t n_blocks) {
    for (int64_t b = 0; b < n_blocks; ++b, out += kQK_K) {
        alignas(64) float scales[16];
        q4_K_scales(&w[b], scales);
        for (int c = 0; c < 4; ++c) {
            const __m512 low = q4_K_table(scales, 2 * c), high = q4_K_table(scales, 2 * c + 1);
            for (int h = 0; h < 2; ++h) {
                const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs + 32 * c + 16 * h)));
                _mm512_storeu_ps(out + 64 * c + 16 * h, _mm512_permutexvar_ps(q, low));
                _mm512_storeu_ps(out + 64 * c + 32 + 16 * h, _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), high));
            }
        }
    }
}

LS_AVX512 void matmul_exact_avx512(GgmlType type, const void* w, uint64_t row_bytes, int rows, int64_t K,
                                   const float* x, int64_t T, float* y, int64_t y_stride) {
    // 1024 elements a chunk (a whole number of blocks of every format): the rows' decoded chunk
    // (128 KB) stays in L2 and six columns of it (24 KB) in L1; longer chunks load and store the
    // running lanes less often.
    constexpr int64_t kChunk = 1024;
    // The decoded rows lie 1040 floats apart: 4 KB apart, the same element of every row would fall
    // in one L1 set (1.03-1.05x slower prompts, with the panel on a cache line either way).
    constexpr int64_t kPanelStride = kChunk + 16;
    thread_local AlignedVector<float> panel, acc;
    panel.resize(kExactMatmulRows512 * kPanelStride);
    acc.resize(static_cast<size_t>(kExactMatmulRows512 * T * 16));
    const uint32_t block_elems = ggml_type_traits(type)->block_elems;
    const uint32_t block_bytes = ggml_type_traits(type)->block_bytes;
    const int64_t K16 = K - K % 16;
    for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
        const int64_t len = std::min(kChunk, K - k0);
        const bool last = k0 + len == K;
        // The weights come from memory once per prompt: the next chunk of these rows (after the
        // last, the first of the next rows) is fetched while this one's columns are computed.
        NextChunk next{static_cast<const char*>(w) + (last ? rows * row_bytes : (k0 + len) / block_elems * block_bytes),
                       row_bytes, static_cast<uint64_t>(std::min(kChunk, K - (last ? 0 : k0 + len)) / block_elems * block_bytes),
                       rows};
        const float* wr[kExactMatmulRows512] = {};
        chunk_rows_f32(type, w, row_bytes, rows, k0, len, panel.data(), kPanelStride, dequantize_avx512, wr);
        const int64_t n16 = std::min(len, K16 - k0);
        exact_tiles(TileArgs{wr, rows, K, T, n16, k0 == 0, &next}, x + k0, acc.data());
        if (!last) continue;
        store_lane_sums(acc.data(), rows, T, y, y_stride);
        // A length that is not a multiple of 16: each output's leftovers fused after its lanes, in order.
        for (int r = 0; r < rows && n16 < len; ++r)
            for (int64_t t = 0; t < T; ++t) {
                float& sum = y[t * y_stride + r];
                for (int64_t i = n16; i < len; ++i) sum = __builtin_fmaf(wr[r][i], x[t * K + k0 + i], sum);
            }
    }
}

LS_AVX512 void dot_f32_exact_avx512_rows(const float* a, int64_t a_stride, int count, const float* b, int64_t n,
                                         float* out) {
    const int64_t n16 = n - n % 16;
    __m512 acc[8];
    for (int r0 = 0; r0 < count; r0 += 8) {
        const int rows = std::min(count - r0, 8);
        const float* ar = a + r0 * a_stride;
        switch (rows) {
            case 8: dot_rows<8>(ar, a_stride, b, n16, acc); break;
            case 7: dot_rows<7>(ar, a_stride, b, n16, acc); break;
            case 6: dot_rows<6>(ar, a_stride, b, n16, acc); break;
            case 5: dot_rows<5>(ar, a_stride, b, n16, acc); break;
            case 4: dot_rows<4>(ar, a_stride, b, n16, acc); break;
            case 3: dot_rows<3>(ar, a_stride, b, n16, acc); break;
            case 2: dot_rows<2>(ar, a_stride, b, n16, acc); break;
            default: dot_rows<1>(ar, a_stride, b, n16, acc); break;
        }
        for (int r = 0; r < rows; ++r) {
            float sum = lane_sum(acc[r]);
            for (int64_t i = n16; i < n; ++i) sum = __builtin_fmaf(ar[r * a_stride + i], b[i], sum);
            out[r0 + r] = sum;
        }
    }
}

float dot_f32_exact_avx512(const float* a, const float* b, int64_t n) {
    float out = 0;
    dot_f32_exact_avx512_rows(a, 0, 1, b, n, &out);
    return out;
}

// ---- Llama mode
// q4_K . q8_K as ggml's AVX2 kernel computes it: per super-block, lane l (of 8) of the int32 sums
// collects bytes 4l .. 4l + 3 of every 32-quant chunk times the chunk's scale; then
// acc = fma(d_a * d, float(lanes), acc), and four min lanes fma(-d_a * dmin, mins . bsums, acc_m).
// Here a register holds a chunk pair (the 32 quant bytes give the low nibbles, elements 64c ..
// 64c + 31, in the low half and the high nibbles in the high half, so the activations are one
// contiguous load): its lanes 0-7 are chunk 2c's lanes, 8-15 chunk 2c + 1's, added at the end.
// The integer sums are exact (|2 * 15 * 128| fits the 16-bit pairs), so the lanes are the same
// integers and the float steps the same bits.

namespace {

struct alignas(64) Q4KUnpacked512 {
    __m512i q[4];   // chunk pair c: low nibbles of qs[32c ..] then their high nibbles
    __m512i sc[4];  // the pair's two scales, each in sixteen 16-bit lanes
    __m128i mins;   // the eight mins as 16-bit lanes
    float d, dmin;
};

// Chunk pair c's scales in 16-bit lanes (sixteen of scale 2c, then sixteen of 2c + 1) from the
// scale bytes broadcast to every 128-bit lane.
LS_AVX512 inline __m512i q4_K_pair_scales(__m512i scale_bytes, int c) {
    const __m512i pick = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(0xFF00 | (2 * c))),
                                            _mm256_set1_epi16(static_cast<int16_t>(0xFF00 | (2 * c + 1))), 1);
    return _mm512_shuffle_epi8(scale_bytes, pick);  // index 0xFF writes zero: the high bytes
}

// Chunk pair c's quants: the 32 bytes' low nibbles, then their high nibbles.
LS_AVX512 inline __m512i q4_K_pair_quants(const block_q4_K& w, int c) {
    const __m512i bytes = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * c)));
    // The high half shifted by four; the neighbour's bits that come in are masked off.
    return _mm512_and_si512(_mm512_srlv_epi64(bytes, _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4)), _mm512_set1_epi8(0x0F));
}

LS_AVX512 inline __attribute__((always_inline)) void unpack_q4_K(const block_q4_K& w, Q4KUnpacked512* u) {
    const __m128i scale_bytes = q4_K_scale_bytes(w);
    u->mins = _mm_cvtepu8_epi16(_mm_srli_si128(scale_bytes, 8));
    const __m512i broadcast = _mm512_broadcast_i32x4(scale_bytes);
    for (int c = 0; c < 4; ++c) {
        u->sc[c] = q4_K_pair_scales(broadcast, c);
        u->q[c] = q4_K_pair_quants(w, c);
    }
    u->d = _cvtsh_ss(w.d);
    u->dmin = _cvtsh_ss(w.dmin);
}

LS_AVX512 inline __m512i q4_K_pair_sum(const Q4KUnpacked512& u, int c, const block_q8_K& ab) {
    const __m512i av = _mm512_loadu_si512(ab.qs + 64 * c);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u.q[c], av), u.sc[c]);
}

LS_AVX512 inline float q4_K_result(__m256 acc, __m128 acc_m) {
    alignas(32) float v[8];
    alignas(16) float m[4];
    _mm256_store_ps(v, acc);
    _mm_store_ps(m, acc_m);
    const float h[4] = {v[4] + v[0], v[5] + v[1], v[6] + v[2], v[7] + v[3]};  // hsum_float_8
    return ((h[0] + h[2]) + (h[1] + h[3])) + ((m[0] + m[2]) + (m[1] + m[3]));
}

// C (up to four) activation rows against an unpacked weight row, block by block, the accumulators
// in registers. The float steps of the four columns share registers lane for lane: the main lanes
// two columns to a register (8 + 8), the min lanes all four (4 x 4), each lane's fused add the one
// ggml does for that column.
template <int C>
LS_AVX512 void dot_q4_K_unpacked(int64_t nb, const Q4KUnpacked512* u, const block_q8_K* a, int64_t a_stride_blocks,
                                 const Q8KColumnBlock* columns, float* out, int64_t out_stride) {
    __m512 acc01 = _mm512_setzero_ps(), acc23 = _mm512_setzero_ps(), acc_m = _mm512_setzero_ps();
    const __m512i spread01 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i spread23 = _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m512i spread4 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    for (int64_t b = 0; b < nb; ++b) {
        __m512i sumi[4];
        for (int c = 0; c < 4; ++c) sumi[c] = _mm512_setzero_si512();
        for (int p = 0; p < 4; ++p)
            for (int c = 0; c < C; ++c) {
                sumi[c] = _mm512_add_epi32(sumi[c], q4_K_pair_sum(u[b], p, a[c * a_stride_blocks + b]));
                // Kept a running sum: the compiler would otherwise regroup these exact integer adds
                // into a tree whose live products spill to the stack.
                asm("" : "+v"(sumi[c]));
            }
        const Q8KColumnBlock& col = columns[b];
        // Lane k of column c: mn[2k] * (bsums 4k, 4k+1) + mn[2k+1] * (bsums 4k+2, 4k+3), times
        // -d_a * dmin.
        const __m512i mins = _mm512_madd_epi16(_mm512_broadcast_i32x4(u[b].mins), _mm512_loadu_si512(col.bsum_pairs));
        const __m128 da = _mm_load_ps(col.d);
        const __m128 dmin = _mm_mul_ps(_mm_xor_ps(da, _mm_set1_ps(-0.0f)), _mm_set1_ps(u[b].dmin));
        acc_m = _mm512_fmadd_ps(_mm512_permutexvar_ps(spread4, _mm512_zextps128_ps512(dmin)), _mm512_cvtepi32_ps(mins), acc_m);
        // Each column's eight lanes: its chunk-pair lanes 0-7 plus 8-15, times d_a * d.
        const __m512 d = _mm512_zextps128_ps512(_mm_mul_ps(da, _mm_set1_ps(u[b].d)));
        const __m512i lanes01 = _mm512_add_epi32(_mm512_shuffle_i64x2(sumi[0], sumi[1], 0x44), _mm512_shuffle_i64x2(sumi[0], sumi[1], 0xEE));
        acc01 = _mm512_fmadd_ps(_mm512_permutexvar_ps(spread01, d), _mm512_cvtepi32_ps(lanes01), acc01);
        if (C > 2) {
            const __m512i lanes23 = _mm512_add_epi32(_mm512_shuffle_i64x2(sumi[2], sumi[3], 0x44), _mm512_shuffle_i64x2(sumi[2], sumi[3], 0xEE));
            acc23 = _mm512_fmadd_ps(_mm512_permutexvar_ps(spread23, d), _mm512_cvtepi32_ps(lanes23), acc23);
        }
    }
    alignas(64) float m[16];
    _mm512_store_ps(m, acc_m);
    for (int c = 0; c < C; ++c) {
        const __m512 acc = c < 2 ? acc01 : acc23;
        const __m256 lanes = c % 2 == 0 ? _mm512_castps512_ps256(acc) : _mm512_extractf32x8_ps(acc, 1);
        out[c * out_stride] = q4_K_result(lanes, _mm_load_ps(m + 4 * c));
    }
}

// ggml_v_expf on sixteen lanes (ggml_order::v_expf, lane by lane).
LS_AVX512 inline __m512 v_expf16(__m512 x) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512 res = _mm512_scalef_ps(j, n);
    if (big == 0) return res;
    const __mmask16 negative = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
    const __m512 alt = _mm512_mask_blend_ps(negative, _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(big, res, alt);
}

// _mm512_reduce_add_ps in ggml_order::reduce_add16's order.
LS_AVX512 inline float reduce_add16(__m512 v) {
    const __m256 t3 = _mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v));
    const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    alignas(16) float t[4];
    _mm_store_ps(t, t6);
    return (t[0] + t[2]) + (t[1] + t[3]);
}

}  // namespace

LS_AVX512 float dot_q4_K_avx512(int64_t n, const block_q4_K* w, const block_q8_K* a) {
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        // 32 blocks (4.6 KB) ahead, into the next rows of the tensor, as the AVX2 kernel does.
        const char* ahead = reinterpret_cast<const char*>(w + b + 32);
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + 64, _MM_HINT_T0);
        _mm_prefetch(ahead + 128, _MM_HINT_T0);
        const __m128i scale_bytes = q4_K_scale_bytes(w[b]);
        const __m512i broadcast = _mm512_broadcast_i32x4(scale_bytes);
        __m512i sumi = _mm512_setzero_si512();
        for (int c = 0; c < 4; ++c) {
            const __m512i products = _mm512_maddubs_epi16(q4_K_pair_quants(w[b], c), _mm512_loadu_si512(a[b].qs + 64 * c));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(products, q4_K_pair_scales(broadcast, c)));
        }
        // Lane k of the mins: mn[2k] * (bsums 4k, 4k+1) + mn[2k+1] * (bsums 4k+2, 4k+3).
        const __m128i bsums = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a[b].bsums)),
                                             _mm_loadu_si128(reinterpret_cast<const __m128i*>(a[b].bsums + 8)));
        const __m128i mins = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(scale_bytes, 8)), bsums);
        acc_m = _mm_fmadd_ps(_mm_set1_ps(-a[b].d * _cvtsh_ss(w[b].dmin)), _mm_cvtepi32_ps(mins), acc_m);
        const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[b].d * _cvtsh_ss(w[b].d)), _mm256_cvtepi32_ps(lanes), acc);
    }
    return q4_K_result(acc, acc_m);
}

void q8_K_column_blocks(const block_q8_K* a, int64_t a_stride_blocks, int64_t T, int64_t nb, Q8KColumnBlock* out) {
    for (int64_t g = 0; g < (T + 3) / 4; ++g)
        for (int64_t b = 0; b < nb; ++b) {
            Q8KColumnBlock& col = out[g * nb + b];
            for (int c = 0; c < 4; ++c) {
                const int64_t t = 4 * g + c;
                const block_q8_K* ab = t < T ? &a[t * a_stride_blocks + b] : nullptr;
                col.d[c] = ab != nullptr ? ab->d : 0.0f;
                for (int k = 0; k < 8; ++k)
                    col.bsum_pairs[c][k] = ab != nullptr ? static_cast<int16_t>(ab->bsums[2 * k] + ab->bsums[2 * k + 1]) : 0;
            }
        }
}

LS_AVX512 void dot_q4_K_avx512_rows(int64_t n, const block_q4_K* w, uint64_t row_bytes, int rows, const block_q8_K* a,
                                    int64_t a_stride_blocks, const Q8KColumnBlock* columns, int count, float* out,
                                    int64_t out_stride) {
    // The rows unpacked once (n / 256 blocks of 576 bytes each: L2 for the model sizes we meet).
    thread_local std::vector<Q4KUnpacked512> unpacked;
    const int64_t nb = n / kQK_K;
    if (static_cast<int64_t>(unpacked.size()) < rows * nb) unpacked.resize(static_cast<size_t>(rows * nb));
    auto row = [&](int r) { return reinterpret_cast<const block_q4_K*>(reinterpret_cast<const char*>(w) + r * row_bytes); };
    for (int r = 0; r < rows; ++r)
        for (int64_t b = 0; b < nb; ++b) unpack_q4_K(row(r)[b], &unpacked[r * nb + b]);
    // The next rows (the rows of a weight tensor follow each other) come from memory while these
    // meet every column.
    for (uint64_t off = 0; off < rows * row_bytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(row(rows)) + off, _MM_HINT_T1);
    // Four columns at a time against every row: the columns' blocks stay in L1 meanwhile.
    for (int c0 = 0; c0 < count; c0 += 4, a += 4 * a_stride_blocks, columns += nb, out += 4 * out_stride)
        for (int r = 0; r < rows; ++r) {
            const Q4KUnpacked512* u = unpacked.data() + r * nb;
            switch (std::min(count - c0, 4)) {
                case 4: dot_q4_K_unpacked<4>(nb, u, a, a_stride_blocks, columns, out + r, out_stride); break;
                case 3: dot_q4_K_unpacked<3>(nb, u, a, a_stride_blocks, columns, out + r, out_stride); break;
                case 2: dot_q4_K_unpacked<2>(nb, u, a, a_stride_blocks, columns, out + r, out_stride); break;
                default: dot_q4_K_unpacked<1>(nb, u, a, a_stride_blocks, columns, out + r, out_stride); break;
            }
        }
}

LS_AVX512 float dot_tinyblas16_avx512(const float* a, const float* b, int64_t k) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t l = 0; l < k; l += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + l), _mm512_loadu_ps(b + l), acc);
    return reduce_add16(acc);
}

LS_AVX512 float dot_blocks16_avx512(const float* a, const float* b, int64_t np) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = 0; i < np; i += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
    }
    s0 = _mm512_add_ps(s0, s2);
    s1 = _mm512_add_ps(s1, s3);
    return reduce_add16(_mm512_add_ps(s0, s1));
}

LS_AVX512 double exp_row_avx512(float* row, int64_t n, float max) {
    double sum = 0.0;
    const __m512 m = _mm512_set1_ps(max);
    for (int64_t j = 0; j < n; j += 16) {
        // Past n the block is padded with zeros.
        const __mmask16 in = n - j >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - j)) - 1);
        const __m512 v = _mm512_maskz_mov_ps(in, v_expf16(_mm512_sub_ps(_mm512_maskz_loadu_ps(in, row + j), m)));
        _mm512_mask_storeu_ps(row + j, in, v);
        sum += reduce_add16(v);
    }
    return sum;
}

namespace {

// v_silu(x) * g on sixteen lanes.
LS_AVX512 inline __m512 silu_mul16(__m512 x, __m512 g) {
    const __m512 e = v_expf16(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), g);
}

}  // namespace

LS_AVX512 void swiglu_row_avx512(const float* x, const float* g, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 15 < n; i += 16) _mm512_storeu_ps(y + i, silu_mul16(_mm512_loadu_ps(x + i), _mm512_loadu_ps(g + i)));
    for (; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i])) * g[i];
}

LS_AVX512 void swiglu_exact_avx512(const float* x, const float* g, float* y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 in = n - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, in, silu_mul16(_mm512_maskz_loadu_ps(in, x + i), _mm512_maskz_loadu_ps(in, g + i)));
    }
}

namespace {

// reduce_add16 of sixteen outputs at once, whose lanes are the registers a[0 .. 16), as one
// register: output o in lane o. The same additions as reduce_add16 for each: the 256-bit halves,
// then the 128-bit halves, then (t0 + t2) + (t1 + t3).
LS_AVX512 inline __m512 reduce_adds16(const __m512 (&a)[16]) {
    // h[k] = [t3(k) | t3(k + 8)], t3(o) = o's lanes 0-7 + lanes 8-15.
    __m512 h[8], t[4], s[2];
    for (int k = 0; k < 8; ++k)
        h[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[k], a[k + 8], 0x44), _mm512_shuffle_f32x4(a[k], a[k + 8], 0xee));
    // t[m]: the 128-bit halves of t3 added, blocks [t6(2m), t6(2m + 8), t6(2m + 1), t6(2m + 9)].
    for (int m = 0; m < 4; ++m)
        t[m] = _mm512_add_ps(_mm512_shuffle_f32x4(h[2 * m], h[2 * m + 1], 0x88), _mm512_shuffle_f32x4(h[2 * m], h[2 * m + 1], 0xdd));
    // s[i], each block: t6[0] + t6[2] and t6[1] + t6[3] of t[2i]'s block, then of t[2i + 1]'s.
    for (int i = 0; i < 2; ++i)
        s[i] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0x44), _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0xee));
    // Block b, lane q: the sum of t[q]'s block b; then every output to its lane.
    const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(s[0], s[1], 0x88), _mm512_shuffle_ps(s[0], s[1], 0xdd));
    const __m512i order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    return _mm512_permutexvar_ps(order, f);
}

// Outputs (i, j), i < RM rows (lda apart), j < RN columns (ldb apart), over k16 elements (a
// multiple of 16) in sixteen lanes: element l of a dot into lane l % 16, in order. The lanes of
// the RM x RN outputs are then summed all at once by `Sum` (reduce_adds16: tinyBLAS's order;
// lane_sums16: exact mode's) into c[j * ldc + i].
template <int RM, int RN, bool kTinyblas>
LS_AVX512 void lanes_tile(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k16, float* c, int64_t ldc) {
    static_assert(RM * RN <= 16);
    __m512 acc[16];
    for (int o = 0; o < 16; ++o) acc[o] = _mm512_setzero_ps();
    for (int64_t l = 0; l < k16; l += 16) {
        __m512 bv[RN];
        for (int j = 0; j < RN; ++j) bv[j] = _mm512_loadu_ps(b + j * ldb + l);
        for (int i = 0; i < RM; ++i) {
            const __m512 av = _mm512_loadu_ps(a + i * lda + l);
            for (int j = 0; j < RN; ++j) acc[j * RM + i] = _mm512_fmadd_ps(av, bv[j], acc[j * RM + i]);
        }
    }
    const __m512 sums = kTinyblas ? reduce_adds16(acc) : lane_sums16(acc);
    if constexpr (RM == 4) {
        if constexpr (RN > 0) _mm_storeu_ps(c, _mm512_castps512_ps128(sums));
        if constexpr (RN > 1) _mm_storeu_ps(c + ldc, _mm512_extractf32x4_ps(sums, 1));
        if constexpr (RN > 2) _mm_storeu_ps(c + 2 * ldc, _mm512_extractf32x4_ps(sums, 2));
        if constexpr (RN > 3) _mm_storeu_ps(c + 3 * ldc, _mm512_extractf32x4_ps(sums, 3));
    } else {
        alignas(64) float out[16];
        _mm512_store_ps(out, sums);
        for (int j = 0; j < RN; ++j)
            for (int i = 0; i < RM; ++i) c[j * ldc + i] = out[j * RM + i];
    }
}

template <int RN, bool kTinyblas>
LS_AVX512 void lanes_tile_rows(const float* a, int64_t lda, int64_t m, const float* b, int64_t ldb, int64_t k16, float* c,
                               int64_t ldc) {
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) lanes_tile<4, RN, kTinyblas>(a + i * lda, lda, b, ldb, k16, c + i, ldc);
    switch (m - i) {
        case 3: lanes_tile<3, RN, kTinyblas>(a + i * lda, lda, b, ldb, k16, c + i, ldc); break;
        case 2: lanes_tile<2, RN, kTinyblas>(a + i * lda, lda, b, ldb, k16, c + i, ldc); break;
        case 1: lanes_tile<1, RN, kTinyblas>(a + i * lda, lda, b, ldb, k16, c + i, ldc); break;
        default: break;
    }
}

// Every output of an m x n block, rows in blocks that stay in L1 (16 KiB) while every group of
// four columns runs over them. Each output is computed whole by one tile, so the blocking does
// not change its bits.
template <bool kTinyblas>
LS_AVX512 void lanes_dots(const float* a, int64_t lda, int64_t m, const float* b, int64_t ldb, int64_t n, int64_t k16,
                          float* c, int64_t ldc) {
    const int64_t rows_per_block = std::max<int64_t>(4, (int64_t{16} << 10) / (4 * std::max<int64_t>(k16, 1)) / 4 * 4);
    for (int64_t i0 = 0; i0 < m; i0 += rows_per_block) {
        const int64_t mb = std::min(rows_per_block, m - i0);
        const float* ab = a + i0 * lda;
        int64_t j = 0;
        for (; j + 4 <= n; j += 4) lanes_tile_rows<4, kTinyblas>(ab, lda, mb, b + j * ldb, ldb, k16, c + j * ldc + i0, ldc);
        switch (n - j) {
            case 3: lanes_tile_rows<3, kTinyblas>(ab, lda, mb, b + j * ldb, ldb, k16, c + j * ldc + i0, ldc); break;
            case 2: lanes_tile_rows<2, kTinyblas>(ab, lda, mb, b + j * ldb, ldb, k16, c + j * ldc + i0, ldc); break;
            case 1: lanes_tile_rows<1, kTinyblas>(ab, lda, mb, b + j * ldb, ldb, k16, c + j * ldc + i0, ldc); break;
            default: break;
        }
    }
}

}  // namespace

LS_AVX512 void tinyblas16_avx512(const float* a, int64_t lda, int64_t m, const float* b, int64_t ldb, int64_t n, int64_t k,
                                 float* c, int64_t ldc) {
    lanes_dots<true>(a, lda, m, b, ldb, n, k, c, ldc);
}

LS_AVX512 void exact_dots_avx512(const float* a, int64_t lda, int64_t m, const float* b, int64_t ldb, int64_t n, int64_t k,
                                 float* c, int64_t ldc) {
    const int64_t k16 = k - k % 16;
    lanes_dots<false>(a, lda, m, b, ldb, n, k16, c, ldc);
    if (k16 == k) return;
    for (int64_t j = 0; j < n; ++j)  // the leftovers fused after the lanes' sum, in order
        for (int64_t i = 0; i < m; ++i) {
            float& out = c[j * ldc + i];
            for (int64_t l = k16; l < k; ++l) out = __builtin_fmaf(a[i * lda + l], b[j * ldb + l], out);
        }
}

LS_AVX512 void dot_blocks16_rows_avx512(const float* a, int64_t a_stride, int64_t count, const float* b, int64_t np,
                                        float* out) {
    for (int64_t r0 = 0; r0 < count; r0 += 16) {
        const int n = static_cast<int>(std::min<int64_t>(16, count - r0));
        __m512 acc[16];
        for (int i = 0; i < 16; ++i) {
            acc[i] = _mm512_setzero_ps();
            if (i >= n) continue;
            const float* ar = a + (r0 + i) * a_stride;
            __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
            for (int64_t l = 0; l < np; l += 64) {
                s0 = _mm512_fmadd_ps(_mm512_loadu_ps(ar + l), _mm512_loadu_ps(b + l), s0);
                s1 = _mm512_fmadd_ps(_mm512_loadu_ps(ar + l + 16), _mm512_loadu_ps(b + l + 16), s1);
                s2 = _mm512_fmadd_ps(_mm512_loadu_ps(ar + l + 32), _mm512_loadu_ps(b + l + 32), s2);
                s3 = _mm512_fmadd_ps(_mm512_loadu_ps(ar + l + 48), _mm512_loadu_ps(b + l + 48), s3);
            }
            acc[i] = _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3));
        }
        _mm512_mask_storeu_ps(out + r0, static_cast<__mmask16>((1u << n) - 1), reduce_adds16(acc));
    }
}

namespace {

// Sixteen outputs' lanes held the other way round: l[k] holds lane k of every output (output d
// in lane d). reduce_add16 of each output is then one vertical tree: lanes k + 8 and k, then
// k + 4 and k, then (0 + 2) + (1 + 3).
LS_AVX512 inline __m512 reduce_add16_vertical(const __m512 (&l)[16]) {
    __m512 u[8], w[4];
    for (int i = 0; i < 8; ++i) u[i] = _mm512_add_ps(l[8 + i], l[i]);
    for (int i = 0; i < 4; ++i) w[i] = _mm512_add_ps(u[4 + i], u[i]);
    return _mm512_add_ps(_mm512_add_ps(w[0], w[2]), _mm512_add_ps(w[1], w[3]));
}

}  // namespace

LS_AVX512 void dot_blocks16_columns_avx512(const float* v, int64_t v_stride, const float* p, int64_t n, float* out) {
    // Lane l of chain k of output d takes the cells j = 64 b + 16 k + l, in order of b: a pass per
    // chain, its sixteen lanes in registers (sixteen outputs to each), then the chains combined.
    alignas(64) float chains[4][16][16];
    for (int k = 0; k < 4; ++k) {
        __m512 r[16];
        for (int l = 0; l < 16; ++l) r[l] = _mm512_setzero_ps();
        for (int64_t j0 = 16 * k; j0 < n; j0 += 64) {
            const int64_t lanes = std::min<int64_t>(16, n - j0);
            if (lanes == 16) {
                for (int l = 0; l < 16; ++l)
                    r[l] = _mm512_fmadd_ps(_mm512_set1_ps(p[j0 + l]), _mm512_loadu_ps(v + (j0 + l) * v_stride), r[l]);
            } else {  // past n the cells are padding: zeros that add nothing to sums that are never -0
                for (int l = 0; l < lanes; ++l)
                    r[l] = _mm512_fmadd_ps(_mm512_set1_ps(p[j0 + l]), _mm512_loadu_ps(v + (j0 + l) * v_stride), r[l]);
            }
        }
        for (int l = 0; l < 16; ++l) _mm512_store_ps(chains[k][l], r[l]);
    }
    __m512 lanes[16];
    for (int l = 0; l < 16; ++l)  // dot_blocks16's (s0 + s2) + (s1 + s3)
        lanes[l] = _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(chains[0][l]), _mm512_load_ps(chains[2][l])),
                                 _mm512_add_ps(_mm512_load_ps(chains[1][l]), _mm512_load_ps(chains[3][l])));
    _mm512_storeu_ps(out, reduce_add16_vertical(lanes));
}

LS_AVX512 void exact_columns_avx512(const float* v, int64_t v_stride, const float* p, int64_t n, float* out) {
    // Lane l of output d takes the cells j = l, l + 16, ... in order: sixteen registers, output d
    // in lane d of each; then exact_order's fold, vertically, and the leftovers fused in order.
    __m512 r[16];
    for (int l = 0; l < 16; ++l) r[l] = _mm512_setzero_ps();
    const int64_t n16 = n - n % 16;
    for (int64_t j0 = 0; j0 < n16; j0 += 16)
        for (int l = 0; l < 16; ++l)
            r[l] = _mm512_fmadd_ps(_mm512_set1_ps(p[j0 + l]), _mm512_loadu_ps(v + (j0 + l) * v_stride), r[l]);
    __m512 h[8];
    for (int l = 0; l < 8; ++l) h[l] = _mm512_add_ps(r[l], r[l + 8]);
    __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(h[0], h[1]), _mm512_add_ps(h[2], h[3])),
                               _mm512_add_ps(_mm512_add_ps(h[4], h[5]), _mm512_add_ps(h[6], h[7])));
    for (int64_t j = n16; j < n; ++j) sum = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_loadu_ps(v + j * v_stride), sum);
    _mm512_storeu_ps(out, sum);
}

}  // namespace ls
