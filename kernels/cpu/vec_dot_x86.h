// Dot products of one weight row with one activation row in the float order of ggml's x86 SIMD
// kernels (AVX2 / AVX-512 build), for llama mode to match llama.cpp's CPU matmuls bit for bit.
#pragma once

#include <cstdint>

#include "kernels/common/ggml_type.h"

namespace ls {

// ggml's x86 vec_dot for `weight_type` (activation in the format vec_dot_activation_type gives).
// Integer partial sums are exact on any path, so what is emulated is the float part: the eight
// 32-bit lanes of a 256-bit accumulator, where lane l of block (or 32-element chunk) c collects
// elements 32c + 4l .. 32c + 4l + 3, the per-block FMA into that lane, and hsum_float_8
// ((l + l+4), then (0+2, 1+3), then the two) at the end. Per weight type, block b:
//   q4_0, q8_0, q5_0 . q8_0 : acc[l] = fma(d_w * d_a, float(lane_l), acc[l]); sum = hsum(acc)
//   q4_1, q5_1 . q8_1       : as above (q5_1: fma(float(lane_l), d_w * d_a, acc[l]), the same
//                             value), summs = fma(m_w, s_a, summs); sum = hsum(acc) + summs
//   q2_K . q8_K : acc[l] = fma(-(d_a * dmin_w), float(minlane_l), acc[l]) with minlane_l =
//                 min[2l] * bsum[2l] + min[2l+1] * bsum[2l+1], then
//                 acc[l] = fma(d_a * d_w, float(lane_l), acc[l]); sum = hsum(acc)
//   q3_K . q8_K : acc[l] = fma(d_a * d_w, float(lane_l), acc[l]); sum = hsum(acc)
//   q6_K . q8_K : as q3_K, but lane_l sums the unsigned quants (0..63) and then loses
//                 32 * (bsum[2l] * sc[2l] + bsum[2l+1] * sc[2l+1]) (the -32 offset via bsums)
//   q4_K . q8_K : as q3_K, plus four min lanes m[k] = fma(-(d_a * dmin_w), float(mins_k), m[k])
//                 (mins_k covers sub-blocks 2k, 2k+1); sum = hsum(acc) + ((m0 + m2) + (m1 + m3))
//   q5_K . q8_K : as q3_K, plus summs = fma(-(d_a * dmin_w), float(min_sum), summs);
//                 sum = hsum(acc) + summs
//   iq4_nl, mxfp4 . q8_0 : blocks in pairs, two accumulators (even and odd blocks) of
//                 fma(d_a * d_w, float(lane_l), acc[l]), added lane by lane before the hsum; a
//                 last odd block as sum = fma(d_a * d_w, float(isum), sum) (mxfp4: d_w is
//                 2^(e - 128), the levels the doubled E2M1 values)
//   nvfp4 . q8_0 : per 64-element block, its two 32-element halves in order, each against its
//                 Q8_0 block: acc[l] = fma(ue4m3(d[2h + l / 4]) * d_a, float(lane_l), acc[l])
//                 (ue4m3: the sub-block's UE4M3 scale halved, the levels the doubled E2M1
//                 values); sum = hsum(acc)
//   iq4_xs . q8_K : lane_l sums the eight sub-blocks' products times their scales (6 bits - 32);
//                 acc[l] = fma(d_w * d_a, float(lane_l), acc[l]); sum = hsum(acc)
//   tq1_0, tq2_0 . q8_K : lane_l sums the unsigned codes (0..2) times the activations of the
//                 elements e with (e % 32) / 4 == l, minus bsum[2l] + bsum[2l+1];
//                 acc[l] = fma(float(lane_l), d_a * d_w, acc[l]); sum = hsum(acc)
// Checked against ggml's output: q4_0, q8_0, q4_K, q6_K, and mxfp4 against libggml-cpu's
// ggml_vec_dot_mxfp4_q8_0 (AVX2 build) once, outside the tests. The others are read from the same
// kernels but have no reference values yet.
// Returns false for a type not emulated here or a bad n, so the caller can use vec_dot_row.
// On processors with AVX2, FMA and F16C the Q4_K and Q6_K dots run on those instructions
// (vec_dot_avx2.h), with the same result.
bool vec_dot_row_x86(GgmlType weight_type, int64_t n, const void* w, const void* act, float* out);
// The scalar emulation alone, whatever the processor: what the SIMD kernels are tested against.
bool vec_dot_row_x86_emulated(GgmlType weight_type, int64_t n, const void* w, const void* act, float* out);

// ggml's IQ panel gemm (ggml-cpu/iqp.cpp at the fixtures' commit). ggml's matmul hands it IQ4_XS
// weights (and the grid i-quants) whose rows are a multiple of 256 long and number a multiple of
// 8, against 8 or more activation columns (MUL_MAT_ID: an expert's 8 or more columns), on any x86
// build with AVX2. Its float steps differ from vec_dot's: one f32 chain per output, no lanes, no
// hsum: per super-block sum = fma(float(S), d_w * d_a, sum), S the super-block's exact integer dot
// (each 32-element sub-block's products times its 6-bit scale minus 32).
bool iq_panel_takes(GgmlType weight_type, int64_t n, int64_t rows, int64_t columns);
// One weight row against one activation row in that form (false for other types or a bad n).
bool dot_iq_panel(GgmlType weight_type, int64_t n, const void* w, const void* act, float* out);
// The same in the scalar emulation alone (what the AVX2 kernel is tested against).
bool dot_iq_panel_emulated(GgmlType weight_type, int64_t n, const void* w, const void* act, float* out);

// llamafile's tinyBLAS_Q0_AVX dot, for one weight row and one Q8_0 activation row. ggml's matmul
// hands Q8_0, Q4_0, Q5_0 and IQ4_NL weights to it when the activation has >= 2 columns (and the
// weights are not in a repack buffer). Its float steps per output (fma(d_w * d_a, lane, acc) per
// block, then the same 8-lane hsum) equal the AVX2 vec_dot's, so for Q4_0 / Q5_0 / Q8_0 it returns
// what vec_dot_row_x86 does; it exists so callers can name the path. Returns false for other
// weight types or a bad n.
bool dot_q0_tinyblas(GgmlType weight_type, int64_t n, const void* w, const void* act, float* out);
// The same in the scalar emulation alone (what the AVX2 kernel is tested against).
bool dot_q0_tinyblas_emulated(GgmlType weight_type, int64_t n, const void* w, const void* act, float* out);

}  // namespace ls
