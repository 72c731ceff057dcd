// The f32 kernels of both math modes on AVX2 instructions: tiled f32 dot products (exact mode's
// fixed order, llama mode's tinyBLAS order), softmax's exponentials, SwiGLU, f16 rounding, and
// attention's products over the cache (values by columns, dot_blocks8). Split from
// vec_dot_avx2.cpp (the quantized dot products); the same rules: only these functions are compiled
// for AVX2, FMA and F16C, and each keeps the summation order of the portable code it replaces.
#include "kernels/cpu/vec_dot_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/common/fp16.h"
#include "kernels/cpu/avx2_common.h"
#include "kernels/cpu/exact_order.h"
#include "kernels/cpu/ggml_order.h"

namespace ls {

using avx2::hsum8;
using avx2::lane_sum;

// ggml_order::dot_tinyblas8: lane i fuses products i, i + 8, ... in order, then hsum8.
LS_AVX2 float dot_tinyblas8_avx2(const float* a, const float* b, int64_t k) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t l = 0; l < k; l += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + l), _mm256_loadu_ps(b + l), acc);
    return hsum8(acc);
}

namespace {

// hsum8 of four accumulators at once, lane by lane the same additions: a_i = v[4 + i] + v[i],
// then (a0 + a2) + (a1 + a3); the four sums in the order of the accumulators.
LS_AVX2 inline __m128 fold_halves(__m256 s) { return _mm_add_ps(_mm256_extractf128_ps(s, 1), _mm256_castps256_ps128(s)); }

LS_AVX2 inline __m128 hsum8_x4(__m256 s0, __m256 s1, __m256 s2, __m256 s3) {
    __m128 a0 = fold_halves(s0), a1 = fold_halves(s1), a2 = fold_halves(s2), a3 = fold_halves(s3);
    _MM_TRANSPOSE4_PS(a0, a1, a2, a3);  // now a_i holds lane i of the four folds
    return _mm_add_ps(_mm_add_ps(a0, a2), _mm_add_ps(a1, a3));
}

// Outputs (i, j) for rows i < RM (lda apart) and columns j < RN (ldb apart) into c[j * ldc + i].
template <int RM, int RN>
LS_AVX2 void tinyblas8_tile(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k, float* c, int64_t ldc) {
    __m256 acc[RN][RM];
    for (int j = 0; j < RN; ++j)
        for (int i = 0; i < RM; ++i) acc[j][i] = _mm256_setzero_ps();
    for (int64_t l = 0; l < k; l += 8) {
        __m256 bv[RN];
        for (int j = 0; j < RN; ++j) bv[j] = _mm256_loadu_ps(b + j * ldb + l);
        for (int i = 0; i < RM; ++i) {
            const __m256 av = _mm256_loadu_ps(a + i * lda + l);
            for (int j = 0; j < RN; ++j) acc[j][i] = _mm256_fmadd_ps(av, bv[j], acc[j][i]);
        }
    }
    for (int j = 0; j < RN; ++j) {
        if constexpr (RM == 4) {
            _mm_storeu_ps(c + j * ldc, hsum8_x4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]));
        } else {
            for (int i = 0; i < RM; ++i) c[j * ldc + i] = hsum8(acc[j][i]);
        }
    }
}

// Exact mode's dots for rows i < RM and columns j < RN, elements [l0, l1) (multiples of 16), lanes
// 8h .. 8h + 7 of each output: acc[j][i] runs on over elements 16m + 8h .. 16m + 8h + 7.
template <int RM, int RN>
LS_AVX2 inline void exact_half_pass(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t l0, int64_t l1, int h,
                                    __m256 (&running)[RN][RM]) {
    __m256 acc[RN][RM];
    for (int j = 0; j < RN; ++j)
        for (int i = 0; i < RM; ++i) acc[j][i] = running[j][i];
    for (int64_t l = l0 + 8 * h; l < l1; l += 16) {
        __m256 bv[RN];
        for (int j = 0; j < RN; ++j) bv[j] = _mm256_loadu_ps(b + j * ldb + l);
        for (int i = 0; i < RM; ++i) {
            const __m256 av = _mm256_loadu_ps(a + i * lda + l);
            for (int j = 0; j < RN; ++j) acc[j][i] = _mm256_fmadd_ps(av, bv[j], acc[j][i]);
        }
    }
    for (int j = 0; j < RN; ++j)
        for (int i = 0; i < RM; ++i) running[j][i] = acc[j][i];
}

// lane_sum of four outputs at once (t = lo + hi, then ((t0 + t1) + (t2 + t3)) + ((t4 + t5) + (t6 +
// t7)), hadd's pairs in that order), the four sums in the order of the outputs.
LS_AVX2 inline __m128 lane_sum_x4(const __m256* lo, const __m256* hi) {
    const __m256 t0 = _mm256_add_ps(lo[0], hi[0]), t1 = _mm256_add_ps(lo[1], hi[1]);
    const __m256 t2 = _mm256_add_ps(lo[2], hi[2]), t3 = _mm256_add_ps(lo[3], hi[3]);
    const __m256 q = _mm256_hadd_ps(_mm256_hadd_ps(t0, t1), _mm256_hadd_ps(t2, t3));
    return _mm_add_ps(_mm256_castps256_ps128(q), _mm256_extractf128_ps(q, 1));
}

template <int RM, int RN>
LS_AVX2 void exact_dot_tile(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k, float* c, int64_t ldc) {
    const int64_t k16 = k - k % 16;
    __m256 lo[RN][RM], hi[RN][RM];
    for (int j = 0; j < RN; ++j)
        for (int i = 0; i < RM; ++i) lo[j][i] = hi[j][i] = _mm256_setzero_ps();
    // The two halves of each chunk of k in turn: the chunk's rows (at most 14 KiB) stay in L1
    // for the second.
    constexpr int64_t kChunk = 512;
    for (int64_t l0 = 0; l0 < k16; l0 += kChunk) {
        exact_half_pass<RM, RN>(a, lda, b, ldb, l0, std::min(k16, l0 + kChunk), 0, lo);
        exact_half_pass<RM, RN>(a, lda, b, ldb, l0, std::min(k16, l0 + kChunk), 1, hi);
    }
    for (int j = 0; j < RN; ++j) {
        float* out = c + j * ldc;
        if constexpr (RM == 4) {
            _mm_storeu_ps(out, lane_sum_x4(lo[j], hi[j]));
        } else {
            for (int i = 0; i < RM; ++i) out[i] = lane_sum(lo[j][i], hi[j][i]);
        }
        for (int i = 0; i < RM; ++i)
            for (int64_t l = k16; l < k; ++l) out[i] = __builtin_fmaf(a[i * lda + l], b[j * ldb + l], out[i]);
    }
}

// The tiles of one kind over a block of outputs c[j * ldc + i] (i < m, j < n): rows in blocks
// that stay in L1 (64 rows of 64 floats: 16 KiB) while every group of three columns runs over
// them, four rows to a tile. Each output is computed whole by one tile, so the blocking does not
// change its bits.
template <template <int, int> class Tile, int RN>
LS_AVX2 void tile_rows(const float* a, int64_t lda, int64_t m, const float* b, int64_t ldb, int64_t k, float* c, int64_t ldc) {
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) Tile<4, RN>::run(a + i * lda, lda, b, ldb, k, c + i, ldc);
    switch (m - i) {
        case 3: Tile<3, RN>::run(a + i * lda, lda, b, ldb, k, c + i, ldc); break;
        case 2: Tile<2, RN>::run(a + i * lda, lda, b, ldb, k, c + i, ldc); break;
        case 1: Tile<1, RN>::run(a + i * lda, lda, b, ldb, k, c + i, ldc); break;
        default: break;
    }
}

template <template <int, int> class Tile>
LS_AVX2 void tiled_dots(const float* a, int64_t lda, int64_t m, const float* b, int64_t ldb, int64_t n, int64_t k, float* c,
                        int64_t ldc) {
    const int64_t rows_per_block = std::max<int64_t>(4, (int64_t{16} << 10) / (4 * std::max<int64_t>(k, 1)) / 4 * 4);
    for (int64_t i0 = 0; i0 < m; i0 += rows_per_block) {
        const int64_t mb = std::min(rows_per_block, m - i0);
        int64_t j = 0;
        for (; j + 3 <= n; j += 3) tile_rows<Tile, 3>(a + i0 * lda, lda, mb, b + j * ldb, ldb, k, c + j * ldc + i0, ldc);
        if (n - j == 2) tile_rows<Tile, 2>(a + i0 * lda, lda, mb, b + j * ldb, ldb, k, c + j * ldc + i0, ldc);
        if (n - j == 1) tile_rows<Tile, 1>(a + i0 * lda, lda, mb, b + j * ldb, ldb, k, c + j * ldc + i0, ldc);
    }
}

template <int RM, int RN>
struct TinyblasTile {
    static LS_AVX2 void run(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k, float* c, int64_t ldc) {
        tinyblas8_tile<RM, RN>(a, lda, b, ldb, k, c, ldc);
    }
};

template <int RM, int RN>
struct ExactTile {
    static LS_AVX2 void run(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k, float* c, int64_t ldc) {
        exact_dot_tile<RM, RN>(a, lda, b, ldb, k, c, ldc);
    }
};

}  // namespace

LS_AVX2 void exact_dots_avx2(const float* a, int64_t lda, int64_t m, const float* b, int64_t ldb, int64_t n, int64_t k,
                             float* c, int64_t ldc) {
    tiled_dots<ExactTile>(a, lda, m, b, ldb, n, k, c, ldc);
}

LS_AVX2 void tinyblas8_avx2(const float* a, int64_t lda, int64_t m, const float* b, int64_t ldb, int64_t n, int64_t k,
                            float* c, int64_t ldc) {
    tiled_dots<TinyblasTile>(a, lda, m, b, ldb, n, k, c, ldc);
}

namespace {

// ggml_order::v_expf_avx2 (ggml's 256-bit ggml_v_expf) on eight lanes, step for step.
LS_AVX2 inline __m256 v_expf8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    const __m256 small = _mm256_fmadd_ps(j, k, k);
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 c = _mm256_cmp_ps(an, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    if (_mm256_movemask_ps(c) == 0) return small;
    const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                       _mm256_set1_epi32(static_cast<int>(0x82000000u)));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256 d = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 mid = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
    return _mm256_blendv_ps(_mm256_blendv_ps(small, mid, c), _mm256_mul_ps(s1, s1), d);
}

// ggml_v_expf16 (kernels/common/v_expf.h: exact mode's and ggml's 512-bit form) on eight lanes:
// j * 2^n is one multiply by 2^n where that is a normal float; lanes beyond (|n| in (125, 192])
// take the scalar function.
LS_AVX2 inline __m256 v_expf16_8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 edge = _mm256_andnot_ps(big, _mm256_cmp_ps(an, _mm256_set1_ps(125.0f), _CMP_GT_OQ));
    if (_mm256_movemask_ps(edge) != 0) {
        alignas(32) float v[8];
        _mm256_store_ps(v, x);
        for (float& f : v) f = ggml_v_expf16(f);
        return _mm256_load_ps(v);
    }
    // n is an integer here (or NaN, or beyond 192): 2^n from its exponent bits.
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 scaled = _mm256_mul_ps(j, _mm256_castsi256_ps(e));
    const __m256 alt = _mm256_and_ps(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_NLE_UQ), _mm256_set1_ps(INFINITY));
    return _mm256_blendv_ps(scaled, alt, big);
}

}  // namespace

LS_AVX2 double exp_blocks_avx2(float* x, int64_t n, float max, int lanes, double sum) {
    const __m256 m = _mm256_set1_ps(max);
    if (lanes == 8) {
        for (int64_t j = 0; j + 8 <= n; j += 8) {
            const __m256 v = v_expf8(_mm256_sub_ps(_mm256_loadu_ps(x + j), m));
            _mm256_storeu_ps(x + j, v);
            sum += hsum8(v);
        }
        return sum;
    }
    for (int64_t j = 0; j + 16 <= n; j += 16) {
        const __m256 lo = v_expf16_8(_mm256_sub_ps(_mm256_loadu_ps(x + j), m));
        const __m256 hi = v_expf16_8(_mm256_sub_ps(_mm256_loadu_ps(x + j + 8), m));
        _mm256_storeu_ps(x + j, lo);
        _mm256_storeu_ps(x + j + 8, hi);
        sum += hsum8(_mm256_add_ps(hi, lo));  // reduce_add16: the halves added, then hsum8's steps
    }
    return sum;
}

LS_AVX2 float scale_and_max_avx2(const float* in, float scale, float* out, int64_t n, float max) {
    const __m256 s = _mm256_set1_ps(scale);
    __m256 m = _mm256_set1_ps(max);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(in + j), s);
        _mm256_storeu_ps(out + j, v);
        m = _mm256_max_ps(v, m);  // v > m ? v : m, as std::max(m, v): a NaN value is passed over
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, m);
    for (float l : lanes) max = std::max(max, l);
    for (; j < n; ++j) max = std::max(max, out[j] = in[j] * scale);
    return max;
}

LS_AVX2 void swiglu_row_avx2_vec(const float* x, const float* g, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 xv = _mm256_loadu_ps(x + i);
        const __m256 e = v_expf8(_mm256_sub_ps(_mm256_setzero_ps(), xv));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(xv, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_loadu_ps(g + i)));
    }
    for (; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i])) * g[i];
}

LS_AVX2 void swiglu_exact_avx2(const float* x, const float* g, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 xv = _mm256_loadu_ps(x + i);
        const __m256 e = v_expf16_8(_mm256_sub_ps(_mm256_setzero_ps(), xv));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(xv, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_loadu_ps(g + i)));
    }
    for (; i < n; ++i) y[i] = x[i] / (1.0f + ggml_v_expf16(0.0f - x[i])) * g[i];
}

LS_AVX2 int64_t round_f16_row_avx2(const float* x, float* y, int64_t n) {
    const int64_t n8 = n & ~int64_t(7);
    for (int64_t i = 0; i < n8; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
    return n8;
}

// ggml_order::dot_blocks<8>: four accumulators over blocks of 32, x0 += x2, x1 += x3, x0 += x1, hadd8.
LS_AVX2 float dot_blocks8_avx2(const float* a, const float* b, int64_t np) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = 0; i < np; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    s0 = _mm256_add_ps(s0, s2);
    s1 = _mm256_add_ps(s1, s3);
    s0 = _mm256_add_ps(s0, s1);
    alignas(32) float v[8];
    _mm256_store_ps(v, s0);
    return ggml_order::hadd8(v);
}

LS_AVX2 void exact_columns_avx2(const float* v, int64_t v_stride, int64_t hd, const float* p, int64_t n, float* out) {
    // Cell j < n16 lands in lane j % 16 of its output: for sixteen outputs (two vectors) and one
    // half of the lanes at a time, the eight lanes' running sums are sixteen registers; cells
    // j = 16 m + 8 h + l in order of m.
    const int64_t n16 = n - n % 16;
    thread_local std::vector<float> lanes;  // [l][d]: the 16 lanes of every output
    lanes.resize(static_cast<size_t>(16 * hd));
    for (int64_t d0 = 0; d0 < hd; d0 += 16) {
        const bool two = d0 + 8 < hd;
        for (int h = 0; h < 2; ++h) {
            __m256 acc[8][2];
            for (int l = 0; l < 8; ++l) acc[l][0] = acc[l][1] = _mm256_setzero_ps();
            for (int64_t j0 = 8 * h; j0 < n16; j0 += 16) {
                for (int l = 0; l < 8; ++l) {
                    const float* row = v + (j0 + l) * v_stride + d0;
                    const __m256 pj = _mm256_broadcast_ss(p + j0 + l);
                    acc[l][0] = _mm256_fmadd_ps(_mm256_loadu_ps(row), pj, acc[l][0]);
                    if (two) acc[l][1] = _mm256_fmadd_ps(_mm256_loadu_ps(row + 8), pj, acc[l][1]);
                }
            }
            for (int l = 0; l < 8; ++l) {
                _mm256_storeu_ps(&lanes[(8 * h + l) * hd + d0], acc[l][0]);
                if (two) _mm256_storeu_ps(&lanes[(8 * h + l) * hd + d0 + 8], acc[l][1]);
            }
        }
    }
    // exact_lane_sum lane by lane (t_l = lane l + lane l + 8, then ((t0 + t1) + (t2 + t3)) + ((t4 +
    // t5) + (t6 + t7))), eight outputs at a time; then the leftover cells fused in order.
    for (int64_t d = 0; d < hd; d += 8) {
        __m256 t[8];
        for (int l = 0; l < 8; ++l) t[l] = _mm256_add_ps(_mm256_loadu_ps(&lanes[l * hd + d]), _mm256_loadu_ps(&lanes[(l + 8) * hd + d]));
        __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(t[0], t[1]), _mm256_add_ps(t[2], t[3])),
                                   _mm256_add_ps(_mm256_add_ps(t[4], t[5]), _mm256_add_ps(t[6], t[7])));
        for (int64_t j = n16; j < n; ++j) sum = _mm256_fmadd_ps(_mm256_loadu_ps(v + j * v_stride + d), _mm256_broadcast_ss(p + j), sum);
        _mm256_storeu_ps(out + d, sum);
    }
}

// dot_blocks8_avx2's sums before hadd8 for two rows against one vector (each of b's blocks loaded
// once for both): four accumulators a row, x0 += x2, x1 += x3, x0 += x1.
LS_AVX2 inline void dot_blocks8_folded2(const float* a0, const float* a1, const float* b, int64_t np, __m256& y0, __m256& y1) {
    __m256 s[2][4];
    for (int r = 0; r < 2; ++r)
        for (int k = 0; k < 4; ++k) s[r][k] = _mm256_setzero_ps();
    for (int64_t i = 0; i < np; i += 32) {
        for (int k = 0; k < 4; ++k) {
            const __m256 bv = _mm256_loadu_ps(b + i + 8 * k);
            s[0][k] = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + i + 8 * k), bv, s[0][k]);
            s[1][k] = _mm256_fmadd_ps(_mm256_loadu_ps(a1 + i + 8 * k), bv, s[1][k]);
        }
    }
    y0 = _mm256_add_ps(_mm256_add_ps(s[0][0], s[0][2]), _mm256_add_ps(s[0][1], s[0][3]));
    y1 = _mm256_add_ps(_mm256_add_ps(s[1][0], s[1][2]), _mm256_add_ps(s[1][1], s[1][3]));
}

// hadd8 of four registers at once, lane by lane hadd8's additions (t_i = y_i + y_(4+i), then
// (t0 + t1) + (t2 + t3)); the four sums in the order of the registers.
LS_AVX2 inline __m128 hadd8_x4(__m256 y0, __m256 y1, __m256 y2, __m256 y3) {
    const __m128 t0 = fold_halves(y0), t1 = fold_halves(y1), t2 = fold_halves(y2), t3 = fold_halves(y3);
    return _mm_hadd_ps(_mm_hadd_ps(t0, t1), _mm_hadd_ps(t2, t3));
}

LS_AVX2 void dot_blocks8_rows_avx2(const float* a, int64_t a_stride, int64_t count, const float* b, int64_t np,
                                   float* out) {
    int64_t r = 0;
    for (; r + 4 <= count; r += 4) {
        __m256 y0, y1, y2, y3;
        dot_blocks8_folded2(a + r * a_stride, a + (r + 1) * a_stride, b, np, y0, y1);
        dot_blocks8_folded2(a + (r + 2) * a_stride, a + (r + 3) * a_stride, b, np, y2, y3);
        _mm_storeu_ps(out + r, hadd8_x4(y0, y1, y2, y3));
    }
    for (; r < count; ++r) out[r] = dot_blocks8_avx2(a + r * a_stride, b, np);
}

LS_AVX2 void dot_blocks8_columns_avx2(const float* v, int64_t v_stride, int64_t hd, const float* p, int64_t n, float* out) {
    // Cell j's product lands in slot j % 32 of its output: accumulator (j % 32) / 8, lane j % 8.
    // For sixteen outputs (two vectors, one lane per output) and one accumulator k at a time, the
    // eight lanes' running sums are sixteen registers; cells j = 32 m + 8 k + l in order of m.
    thread_local std::vector<float> slots;  // [k][l][d]: the 32 sums of every output
    slots.resize(static_cast<size_t>(32 * hd));
    for (int64_t d0 = 0; d0 < hd; d0 += 16) {
        const bool two = d0 + 8 < hd;
        for (int k = 0; k < 4; ++k) {
            __m256 acc[8][2];
            for (int l = 0; l < 8; ++l) acc[l][0] = acc[l][1] = _mm256_setzero_ps();
            for (int64_t j0 = 8 * k; j0 < n; j0 += 32) {
                const int lanes = static_cast<int>(std::min<int64_t>(8, n - j0));
                for (int l = 0; l < lanes; ++l) {
                    const float* row = v + (j0 + l) * v_stride + d0;
                    const __m256 pj = _mm256_broadcast_ss(p + j0 + l);
                    acc[l][0] = _mm256_fmadd_ps(_mm256_loadu_ps(row), pj, acc[l][0]);
                    if (two) acc[l][1] = _mm256_fmadd_ps(_mm256_loadu_ps(row + 8), pj, acc[l][1]);
                }
            }
            for (int l = 0; l < 8; ++l) {
                _mm256_storeu_ps(&slots[(8 * k + l) * hd + d0], acc[l][0]);
                if (two) _mm256_storeu_ps(&slots[(8 * k + l) * hd + d0 + 8], acc[l][1]);
            }
        }
    }
    // dot_blocks' folds (x0 += x2, x1 += x3, x0 += x1) and hadd8 (t_i = y_i + y_(4+i), then
    // (t0 + t1) + (t2 + t3)), lane by lane, eight outputs at a time.
    for (int64_t d = 0; d < hd; d += 8) {
        __m256 y[8];
        for (int l = 0; l < 8; ++l) {
            const float* s = &slots[l * hd + d];  // accumulator k's lane l is s[8 k hd]
            y[l] = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(s), _mm256_loadu_ps(s + 16 * hd)),
                                 _mm256_add_ps(_mm256_loadu_ps(s + 8 * hd), _mm256_loadu_ps(s + 24 * hd)));
        }
        __m256 t[4];
        for (int i = 0; i < 4; ++i) t[i] = _mm256_add_ps(y[i], y[4 + i]);
        _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_add_ps(t[0], t[1]), _mm256_add_ps(t[2], t[3])));
    }
}

LS_AVX2 void delta_net_step_avx2(float* s, const float* q, const float* k, const float* v, float decay, float beta,
                                 float scale, int64_t S, float* delta, float* out) {
    const __m256 d = _mm256_set1_ps(decay);
    for (int64_t i = 0; i < S * S; i += 8) _mm256_storeu_ps(s + i, _mm256_mul_ps(_mm256_loadu_ps(s + i), d));
    for (int64_t j = 0; j < S; ++j) delta[j] = (v[j] - dot_blocks8_avx2(s + j * S, k, S)) * beta;
    for (int64_t j = 0; j < S; ++j) {
        float* row = s + j * S;
        const __m256 dj = _mm256_set1_ps(delta[j]);
        for (int64_t i = 0; i < S; i += 8)
            _mm256_storeu_ps(row + i, _mm256_fmadd_ps(_mm256_loadu_ps(k + i), dj, _mm256_loadu_ps(row + i)));
    }
    for (int64_t j = 0; j < S; ++j) out[j] = dot_blocks8_avx2(s + j * S, q, S) * scale;
}

}  // namespace ls
