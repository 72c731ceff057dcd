// Quantized dot products of llama mode on AVX2+FMA+F16C instructions, bit-identical to the scalar
// emulation of ggml's kernels (vec_dot_x86.h). Callers check the processor first.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/ggml_type.h"
#include "kernels/common/quant_blocks.h"

namespace ls {

// Whether the processor has AVX2, FMA and F16C.
bool avx2_kernels_usable();

float dot_q4_K_avx2(int64_t n, const block_q4_K* w, const block_q8_K* a);
// quantize_row_q8_K_ref on AVX2: the same bytes for any input, NaN and infinity included.
void quantize_row_q8_K_avx2(const float* x, block_q8_K* y, int64_t n);

// Exact mode, in the one order of exact_order.h, so each equals the portable exact_dot_f32 of the
// dequantized row, bit for bit.
float dot_f32_exact_avx2(const float* a, const float* b, int64_t n);
// A Q4_K row decoded in registers and dotted with f32 x.
float dot_q4_K_f32_avx2(int64_t n, const block_q4_K* w, const float* x);
// `count` Q4_K rows (row_stride_blocks blocks apart) against one x: out[i] is row i's dot.
void dot_q4_K_f32_avx2_rows(int64_t n, const block_q4_K* w, int64_t row_stride_blocks, int count, const float* x,
                            float* out);
// dequantize_row for Q4_K on AVX2, same bits.
void dequantize_q4_K_avx2(const block_q4_K* w, float* out, int64_t n_blocks);
// Whether exact_decode_rows_avx2 takes rows of this format and length: Q4_K, Q5_K, Q6_K and Q8_0
// rows of whole 256-element super-blocks.
bool exact_decode_avx2_has(GgmlType type, int64_t n);
// `count` rows of such a format (row_bytes apart) against one x: out[i] is exactly exact_dot_f32 of
// row i as dequantize_row gives it, four rows at a time. False (nothing written) for other formats
// and lengths.
bool exact_decode_rows_avx2(GgmlType type, int64_t n, const void* w, uint64_t row_bytes, int count, const float* x,
                            float* out);
// dequantize_row for Q4_K, Q5_K, Q6_K (whole super-blocks) and Q8_0 on AVX2, the same bits; false
// for other formats.
bool dequantize_avx2(GgmlType type, const void* src, float* dst, int64_t n);
// Up to kExactMatmulRows weight rows (any format dequantize_row knows, row_bytes apart) against T
// activation columns of K floats: y[t * y_stride + r] = exact_dot_f32(row r, column t). Each weight
// chunk is decoded once for all the columns, and each chunk of three columns is used by all the
// rows while it is in L1.
constexpr int kExactMatmulRows = 16;
void matmul_exact_avx2(GgmlType type, const void* w, uint64_t row_bytes, int rows, int64_t K, const float* x,
                       int64_t T, float* y, int64_t y_stride);
// llama mode's f32 attention dots on AVX2, bit for bit: ggml_order::dot_tinyblas8 (k a multiple of 8)
// and ggml_order::dot_blocks<8> (np a multiple of 32).
float dot_tinyblas8_avx2(const float* a, const float* b, int64_t k);
// y[i] = x[i] rounded to f16 (nearest even) and widened back, eight at a time by F16C's
// conversions; returns how many it did (n rounded down to a multiple of 8), the rest is the caller's.
int64_t round_f16_row_avx2(const float* x, float* y, int64_t n);
// dot_tinyblas8_avx2 for a block of outputs at once, the same bits for each:
// c[j * ldc + i] = dot_tinyblas8_avx2(a + i * lda, b + j * ldb, k) for i < m, j < n (k a multiple
// of 8). Tiles of 4 rows x 3 columns share their loads.
void tinyblas8_avx2(const float* a, int64_t lda, int64_t m, const float* b, int64_t ldb, int64_t n, int64_t k, float* c,
                    int64_t ldc);
// Exact mode's dots (exact_order.h) for a block of outputs, the same bits for each:
// c[j * ldc + i] = exact_dot_f32(a + i * lda, b + j * ldb, k) for i < m, j < n, any k.
void exact_dots_avx2(const float* a, int64_t lda, int64_t m, const float* b, int64_t ldb, int64_t n, int64_t k, float* c,
                     int64_t ldc);
// ggml_vec_soft_max_f32's exponentials and sums on AVX2 (CpuBackend::exp_blocks, bit for bit):
// x[j] = exp(x[j] - max) for j < n rounded down to a multiple of `lanes`, each block's sum added
// to `sum` in double, in order. lanes 8: ggml's AVX2 expf (ggml_order::v_expf_avx2) and hsum8;
// lanes 16: ggml_v_expf16 (exact mode, ggml's AVX-512 build) and reduce_add16.
double exp_blocks_avx2(float* x, int64_t n, float max, int lanes, double sum);
// out[j] = in[j] * scale for j < n, returning the largest of them and `max` (NaN values passed
// over, as a loop of std::max(max, out[j]) does; which zero wins a tie of +0 and -0 may differ,
// which no exp(x - max) can tell).
float scale_and_max_avx2(const float* in, float scale, float* out, int64_t n, float max);
// ggml_order::swiglu_row_avx2 on AVX2 instructions, bit for bit.
void swiglu_row_avx2_vec(const float* x, const float* g, float* y, int64_t n);
// Exact mode's SwiGLU (x / (1 + ggml_v_expf16(-x)) * g) on AVX2 instructions, bit for bit.
void swiglu_exact_avx2(const float* x, const float* g, float* y, int64_t n);
float dot_blocks8_avx2(const float* a, const float* b, int64_t np);
// One token of the gated delta rule for one value head, as delta_net::gated_delta_net with lanes 8
// (ggml_vec_scale_f32, ggml_vec_dot_f32 and ggml_vec_mad_f32 of an AVX2 build), bit for bit:
// s (S x S, stored transposed) *= decay; delta[j] = (v[j] - s_j . k) beta; s_j += k delta[j];
// out[j] = (s_j . q) scale. S a multiple of 32 (no leftovers); delta holds S floats of scratch.
void delta_net_step_avx2(float* s, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                         int64_t S, float* delta, float* out);
// dot_blocks8_avx2 of every column d < hd of V with p, from V's rows as the cache holds them (cell
// j's hd values at v + j * v_stride), without transposing V: out[d] is the bits of
// dot_blocks8_avx2(column d padded with zeros, p padded with zeros, np) for any np >= n (a decode
// call's attention values). hd a multiple of 8.
void dot_blocks8_columns_avx2(const float* v, int64_t v_stride, int64_t hd, const float* p, int64_t n, float* out);
// exact_dot_f32 of every column d < hd of V with p over the n cells, from V's rows (cell j's hd
// values at v + j * v_stride): out[d] is the bits of exact_dot_f32(column d, p, n) (a decode
// call's attention values in exact mode, without transposing V). hd a multiple of 8.
void exact_columns_avx2(const float* v, int64_t v_stride, int64_t hd, const float* p, int64_t n, float* out);
// out[r] = dot_blocks8_avx2(a + r * a_stride, b, np) for r < count (attention's scores of one
// query against many cached keys, without a call per key).
void dot_blocks8_rows_avx2(const float* a, int64_t a_stride, int64_t count, const float* b, int64_t np, float* out);
float dot_q6_K_avx2(int64_t n, const block_q6_K* w, const block_q8_K* a);
// The 32-quant formats against Q8_0 (`type` Q4_0, Q5_0, Q8_0, IQ4_NL or MXFP4): acc = fma(d_w * d_a,
// lanes, acc) block by block, then hsum8; `paired`: IQ4_NL's and MXFP4's vec_dot form (even and odd
// blocks in two accumulators, a last odd block in the scalar tail). The emulation's bits
// (vec_dot_x86.cpp).
float dot_q8_0_family_avx2(GgmlType type, int64_t n, const void* w, const block_q8_0* a, bool paired);
float dot_iq4_xs_avx2(int64_t n, const block_iq4_xs* w, const block_q8_K* a);
// `count` IQ4_XS rows (row_bytes apart) against one Q8_K row: out[r] is exactly dot_iq4_xs_avx2 of
// row r (four rows at a time, sharing the activation's loads).
void dot_iq4_xs_avx2_rows(int64_t n, const void* w, uint64_t row_bytes, int64_t count, const block_q8_K* a, float* out);
// NVFP4 against Q8_0 (n a multiple of 64): the emulation's bits (vec_dot_x86.cpp, dot_nvfp4).
float dot_nvfp4_avx2(int64_t n, const block_nvfp4* w, const block_q8_0* a);
// One IQ4_XS row against `count` Q8_K rows: out[i * out_stride] is exactly dot_iq4_xs_avx2 of row i.
void dot_iq4_xs_avx2_columns(int64_t n, const block_iq4_xs* w, const block_q8_K* a, int64_t a_stride_blocks, int count,
                             float* out, int64_t out_stride);
// ggml's IQ panel form of IQ4_XS (vec_dot_x86.h: dot_iq_panel), one row against one activation row.
float dot_iq4_xs_panel_avx2(int64_t n, const block_iq4_xs* w, const block_q8_K* a);
// The same form for `rows` weight rows (row_bytes apart) against `count` activation rows
// (a_stride_blocks blocks apart): out[r + i * out_stride] is exactly dot_iq_panel_emulated of row r
// and activation row i. Two weight rows and four columns at a time, each weight row unpacked once
// for all the columns.
void dot_iq4_xs_panel_avx2_columns(int64_t n, const void* w, uint64_t row_bytes, int rows, const block_q8_K* a,
                                   int64_t a_stride_blocks, int count, float* out, int64_t out_stride);
// Q4_1 / Q5_1 against Q8_1 and Q5_K against Q8_K: the emulation's bits (vec_dot_x86.cpp).
float dot_q8_1_family_avx2(GgmlType type, int64_t n, const void* w, const block_q8_1* a);
float dot_q5_K_avx2(int64_t n, const block_q5_K* w, const block_q8_K* a);
// `count` weight rows (row_bytes apart) against one activation row, vec_dot's form (IQ4_NL and MXFP4
// paired):
// out[r] is exactly dot_q8_0_family_avx2 of row r (decoding without a dispatch per row).
void dot_q8_0_family_avx2_rows(GgmlType type, int64_t n, const void* w, uint64_t row_bytes, int64_t count,
                               const block_q8_0* a, float* out);
// MXFP4 rows in vec_dot's form at memory speed: `count` rows (row_bytes apart) against one Q8_0
// activation row `a`, laid out once by mxfp4_prepare_activation (mxfp4_activation_bytes(n) bytes,
// 32-byte aligned) for all the rows that meet it. out[r] is exactly dot_q8_0_family_avx2(MXFP4, n,
// row r, a, true). n a multiple of 32.
size_t mxfp4_activation_bytes(int64_t n);
void mxfp4_prepare_activation(int64_t n, const block_q8_0* a, void* out);
void dot_mxfp4_avx2_rows(int64_t n, const void* w, uint64_t row_bytes, int64_t count, const void* prepared,
                         const block_q8_0* a, float* out);
// The f32 block scales of `count` Q8_0 rows (a_stride_blocks blocks apart, nb blocks each) in
// groups of four rows: row 4g + j's block b at out[(g * nb + b) * 4 + j], a last group padded with
// its last row; out holds (count + 3) / 4 * 4 * nb floats.
void q8_0_scales_in_fours(const block_q8_0* a, int64_t a_stride_blocks, int64_t nb, int count, float* out);
// `rows` (1 or 2) weight rows of those formats (row_bytes apart) against `count` activation rows
// (a_stride_blocks blocks apart): out[r + i * out_stride] is exactly dot_q8_0_family_avx2(type, n,
// weight row r, activation row i, false) (tinyBLAS's form), with each weight block unpacked once
// for all of them and each activation block loaded once for both weight rows. a_d: the
// activations' block scales as f32 in groups of four rows, as q8_0_scales_in_fours lays them out
// (converted once by the caller).
void dot_q8_0_family_avx2_columns(GgmlType type, int64_t n, const void* w, uint64_t row_bytes, int rows,
                                  const block_q8_0* a, int64_t a_stride_blocks, const float* a_d, int count, float* out,
                                  int64_t out_stride);
// `count` rows of a Q4_K, Q5_K or Q6_K matrix (row_bytes apart) against one activation: out[r] is
// exactly dot_q4_K_avx2 (dot_q5_K_avx2, dot_q6_K_avx2) of row r, the kernel chosen once. False
// (nothing written) for another type or n not a multiple of 256.
bool dot_k_quant_avx2_run(GgmlType type, int64_t n, const void* w, uint64_t row_bytes, int64_t count,
                          const block_q8_K* a, float* out);
// One q4_K row against `count` activation rows (a_stride_blocks blocks apart): out[i * out_stride]
// is exactly dot_q4_K_avx2 of row i, with each weight block unpacked once for all of them.
void dot_q4_K_avx2_rows(int64_t n, const block_q4_K* w, const block_q8_K* a, int64_t a_stride_blocks, int count,
                        float* out, int64_t out_stride);

}  // namespace ls
