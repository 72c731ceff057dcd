// Both math modes' kernels on AVX-512 instructions. Exact mode: an output's sixteen lanes
// (exact_order.h) are one register, so each result equals the portable exact_dot_f32 of the
// dequantized row, bit for bit. Llama mode: ggml's integer sums, twice as wide as its AVX2 kernels
// (exact, so grouped any way), then its float steps on the same lanes, so each result equals the
// scalar emulation (vec_dot_x86.h, ggml_order.h) bit for bit. Callers check the processor first.
#pragma once

#include <cstdint>

#include "kernels/common/ggml_type.h"
#include "kernels/common/quant_blocks.h"

namespace ls {

// Whether the processor has AVX-512 F, BW, DQ and VL besides what avx2_kernels_usable asks.
bool avx512_kernels_usable();
// Whether it also has AVX-512 VBMI and GFNI, which exact_decode_rows_avx512's Q5_K and Q6_K
// kernels take where they find them.
bool avx512_vbmi_gfni_usable();

// `count` Q4_K rows (row_stride_blocks blocks apart) against one x: out[i] is row i's dot. Rows
// go kExactDecodeRows512 at a time (as many independent chains: eight measured 0.85x the speed of
// five or six in a decoded token, four 0.97x).
constexpr int kExactDecodeRows512 = 6;
// Q5_K's and Q6_K's exact decode four rows at a time (each chunk's quants assembled while the one
// before is summed, so each row holds two chunks): Q6_K's as fast in L2 as six, 1.08x as fast
// streaming from memory (two threads, 2 GiB of an 8B file's rows in the page cache, builds
// alternating); Q5_K's (its weights made as Q6_K's since be019a2) 1.08-1.22x as fast as six in L2.
constexpr int kExactDecodeRowsAhead = 4;
void dot_q4_K_f32_avx512_rows(int64_t n, const block_q4_K* w, int64_t row_stride_blocks, int count, const float* x,
                              float* out);
// dequantize_row for Q4_K on AVX-512, same bits.
void dequantize_q4_K_avx512(const block_q4_K* w, float* out, int64_t n_blocks);
// Whether exact_decode_rows_avx512 takes rows of this format and length: Q4_K, Q5_K, Q6_K and
// Q8_0 rows of whole 256-element super-blocks.
bool exact_decode_avx512_has(GgmlType type, int64_t n);
// `count` rows of such a format (row_bytes apart) against one x: out[i] is exactly exact_dot_f32 of
// row i as dequantize_row gives it, kExactDecodeRows512 rows at a time (Q5_K and Q6_K
// kExactDecodeRowsAhead). False (nothing written) for other formats and lengths.
bool exact_decode_rows_avx512(GgmlType type, int64_t n, const void* w, uint64_t row_bytes, int count, const float* x,
                              float* out);
// The same on AVX-512 F/BW/DQ/VL alone, as processors without VBMI and GFNI run it: the same bits.
bool exact_decode_rows_avx512_bw(GgmlType type, int64_t n, const void* w, uint64_t row_bytes, int count,
                                 const float* x, float* out);
// dequantize_row for Q4_K, Q5_K, Q6_K (whole super-blocks) and Q8_0 on AVX-512, the same bits;
// false for other formats.
bool dequantize_avx512(GgmlType type, const void* src, float* dst, int64_t n);
// Up to kExactMatmulRows512 weight rows (any format dequantize_row knows, row_bytes apart) against
// T activation columns of K floats: y[t * y_stride + r] = exact_dot_f32(row r, column t). Each
// weight chunk is decoded once for all the columns.
constexpr int kExactMatmulRows512 = 32;
void matmul_exact_avx512(GgmlType type, const void* w, uint64_t row_bytes, int rows, int64_t K, const float* x,
                         int64_t T, float* y, int64_t y_stride);
// exact_dot_f32 of `count` rows a + i * a_stride with one b (n elements each): out[i].
void dot_f32_exact_avx512_rows(const float* a, int64_t a_stride, int count, const float* b, int64_t n, float* out);
float dot_f32_exact_avx512(const float* a, const float* b, int64_t n);
// A decode call's attention values, sixteen columns of V at a time (n rows of at least 16 floats,
// v_stride apart): out[d] = exact_dot_f32(column d, p) for d < 16, each cell's row added into
// the lanes of all sixteen outputs.
void exact_columns_avx512(const float* v, int64_t v_stride, const float* p, int64_t n, float* out);

// ---- Llama mode

// ggml's AVX2 q4_K . q8_K (dot_q4_K_avx2) bit for bit, 64 quants to an instruction.
float dot_q4_K_avx512(int64_t n, const block_q4_K* w, const block_q8_K* a);
// One block of four Q8_K activation columns as the prompt kernel reads them: the columns' bsums
// added in pairs (16-bit, as _mm_hadd_epi16 gives them) and their scales; columns past the last are
// zeros.
struct alignas(16) Q8KColumnBlock {
    int16_t bsum_pairs[4][8];
    float d[4];
};
// For T columns (a_stride_blocks blocks apart) of nb blocks: out[g * nb + b] is block b of columns
// 4g .. 4g + 3.
void q8_K_column_blocks(const block_q8_K* a, int64_t a_stride_blocks, int64_t T, int64_t nb, Q8KColumnBlock* out);
// `rows` q4_K rows (row_bytes apart) against `count` activation rows (a_stride_blocks blocks apart;
// `columns` from q8_K_column_blocks of the same rows): out[i * out_stride + r] is exactly ggml's
// AVX2 q4_K . q8_K (dot_q4_K_avx2) of weight row r and activation row i, 64 quants to an instruction, with each weight block unpacked once for all
// of them, each four activation rows used by every weight row while they are in L1, and the float
// steps of four columns done together.
void dot_q4_K_avx512_rows(int64_t n, const block_q4_K* w, uint64_t row_bytes, int rows, const block_q8_K* a,
                          int64_t a_stride_blocks, const Q8KColumnBlock* columns, int count, float* out,
                          int64_t out_stride);
// ggml_order::dot_tinyblas (k a multiple of 16) and ggml_order::dot_blocks<16> (np a multiple of 64).
float dot_tinyblas16_avx512(const float* a, const float* b, int64_t k);
float dot_blocks16_avx512(const float* a, const float* b, int64_t np);
// Blocks of dots, the attention's products of a prompt: c[j * ldc + i] is the dot of row i < m
// (a + i * lda) and column j < n (b + j * ldb) over k elements, computed in tiles of 4 x 4 outputs
// whose lanes are summed sixteen at a time. tinyblas16_avx512: dot_tinyblas16_avx512's bits (k a
// multiple of 16); exact_dots_avx512: dot_f32_exact_avx512's (any k).
void tinyblas16_avx512(const float* a, int64_t lda, int64_t m, const float* b, int64_t ldb, int64_t n, int64_t k, float* c,
                       int64_t ldc);
void exact_dots_avx512(const float* a, int64_t lda, int64_t m, const float* b, int64_t ldb, int64_t n, int64_t k, float* c,
                       int64_t ldc);
// A decode call's scores in vec_dot_f16's 16-lane order (ggml_order::dot_blocks<16>, np a multiple
// of 64): out[i] = dot_blocks16_avx512(a + i * a_stride, b, np) for i < count, sixteen rows' lanes
// summed at once.
void dot_blocks16_rows_avx512(const float* a, int64_t a_stride, int64_t count, const float* b, int64_t np, float* out);
// Its values: out[d] = dot_blocks<16>(column d, p) for d < 16, both zero-padded to a multiple of
// 64 cells (the padding adds nothing), V's n rows v_stride apart as for exact_columns_avx512.
void dot_blocks16_columns_avx512(const float* v, int64_t v_stride, const float* p, int64_t n, float* out);
// Softmax's exponentials as ggml's AVX-512 build computes them (and exact mode, on every
// processor): row[j] = v_expf(row[j] - max) for j < n, returning the sum of reduce_add16 over
// blocks of 16 (zeros past n) in double.
double exp_row_avx512(float* row, int64_t n, float max);
// ggml_order::swiglu_row on AVX-512 (v_silu sixteen at a time, libm expf for the leftovers).
void swiglu_row_avx512(const float* x, const float* g, float* y, int64_t n);
// Exact mode's swiglu: y[i] = x[i] / (1 + v_expf(0 - x[i])) * g[i] for every i, sixteen at a time.
void swiglu_exact_avx512(const float* x, const float* g, float* y, int64_t n);

}  // namespace ls
