// Dot products of one weight row with one activation row on the CPU, bit-exact to ggml's scalar
// (`*_generic`) vec_dot code as GCC builds it with FMA contraction (-O3 -march=native).
#pragma once

#include <cstdint>

#include "kernels/common/ggml_type.h"
#include "kernels/common/quant_blocks.h"

namespace ls {

// n is the row length in elements, a multiple of the weight type's block size.
// Float accumulation, per ggml block (or super-block) b, in the order ggml's generic code uses:
//   q4_0 . q8_0 : sum = fma(float(isum_b) * d_w, d_a, sum)
//   q5_0 . q8_0 : sum = fma(d_w * d_a, float(isum_b), sum)
//   q8_0 . q8_0 : sum = fma(float(isum_b), d_w * d_a, sum)
//   q4_1 / q5_1 . q8_1 : sum += fma(d_w * d_a, float(isum_b), m_w * s_a)
//   q2_K . q8_K : sum += fma(d_a * d_w, float(isum_b), -(d_a * dmin_w * float(min_sum_b)))
//   q3_K, q6_K . q8_K : lane[l] = fma(d_w * d_a, float(isum_b[l]), lane[l]) for 8 lanes, then
//                 sum = lane[0] + ... + lane[7] in order
//   q4_K, q5_K . q8_K : as q6_K, plus sum = fma(-(dmin_w * d_a), float(min_sum_b), sum) per block,
//                 with the lanes added to that sum at the end
// The q4_0, q8_0, q4_K and q6_K forms are checked against ggml's output; the others follow the same
// reading of GCC's contraction rules.
float vec_dot_q4_0_q8_0(int64_t n, const block_q4_0* w, const block_q8_0* a);
float vec_dot_q4_1_q8_1(int64_t n, const block_q4_1* w, const block_q8_1* a);
float vec_dot_q5_0_q8_0(int64_t n, const block_q5_0* w, const block_q8_0* a);
float vec_dot_q5_1_q8_1(int64_t n, const block_q5_1* w, const block_q8_1* a);
float vec_dot_q8_0_q8_0(int64_t n, const block_q8_0* w, const block_q8_0* a);
float vec_dot_q2_K_q8_K(int64_t n, const block_q2_K* w, const block_q8_K* a);
float vec_dot_q3_K_q8_K(int64_t n, const block_q3_K* w, const block_q8_K* a);
float vec_dot_q4_K_q8_K(int64_t n, const block_q4_K* w, const block_q8_K* a);
float vec_dot_q5_K_q8_K(int64_t n, const block_q5_K* w, const block_q8_K* a);
float vec_dot_q6_K_q8_K(int64_t n, const block_q6_K* w, const block_q8_K* a);

// ggml_vec_dot_f16 / _bf16 / _f32 scalar code: each product rounded to f32 (exact for f16 and
// bf16 inputs), summed in double in index order, rounded to f32 once at the end.
float vec_dot_f16(int64_t n, const uint16_t* w, const uint16_t* a);
float vec_dot_bf16(int64_t n, const uint16_t* w, const uint16_t* a);
float vec_dot_f32(int64_t n, const float* w, const float* a);

// The activation format ggml pairs with a weight type (its vec_dot_type): Q8_0 for Q4_0, Q5_0, Q8_0,
// IQ4_NL, MXFP4 and NVFP4; Q8_1 for Q4_1 and Q5_1; Q8_K for the K-quants, IQ4_XS, TQ1_0 and TQ2_0; the type
// itself for F32, F16 and BF16. (IQ4_NL, MXFP4, NVFP4, IQ4_XS and the ternary formats have ggml's x86 forms
// only: vec_dot_row_x86.)
// Returns false when no dot product exists for `weight_type`.
bool vec_dot_activation_type(GgmlType weight_type, GgmlType* activation_type);

// Converts an f32 activation row to `activation_type` the way ggml's x86 CPU backend does before a
// matmul (Q8_0 / Q8_1 with round-half-even, Q8_K, F16, BF16, F32). False when unsupported.
bool quantize_activation_row(GgmlType activation_type, const float* x, void* y, int64_t n);

// Dispatches to the dot product above for `weight_type`; `act` must be in the paired activation
// format. False for an unsupported type or a bad n.
bool vec_dot_row(GgmlType weight_type, int64_t n, const void* w, const void* act, float* out);

}  // namespace ls
