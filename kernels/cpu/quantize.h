// f32 -> quantized rows on the CPU: ggml's reference weight quantizers (byte-identical to
// ggml_quantize_chunk without an importance matrix) and the activation quantizers of its matmul.
#pragma once

#include <cstdint>

#include "kernels/common/ggml_type.h"
#include "kernels/common/quant_blocks.h"

namespace ls {

// True when quantize_rows handles `type`.
bool can_quantize(GgmlType type);

// Quantizes `n_rows` rows of `n_per_row` f32 values (n_per_row a multiple of the block size) into
// packed rows of `type`, like ggml_quantize_chunk(type, src, dst, 0, n_rows, n_per_row, NULL).
// Q8_K, which ggml_quantize_chunk rejects, uses quantize_row_q8_K_ref per row.
// Returns false, writing nothing, for an unsupported type or a bad n_per_row.
bool quantize_rows(GgmlType type, const float* src, void* dst, int64_t n_rows, int64_t n_per_row);

// Weight quantizers; n is a multiple of the block size.
void quantize_row_q4_0_ref(const float* x, block_q4_0* y, int64_t n);
void quantize_row_q4_1_ref(const float* x, block_q4_1* y, int64_t n);
void quantize_row_q5_0_ref(const float* x, block_q5_0* y, int64_t n);
void quantize_row_q5_1_ref(const float* x, block_q5_1* y, int64_t n);
void quantize_row_q8_0_ref(const float* x, block_q8_0* y, int64_t n);  // also the portable activation path
void quantize_row_q2_K_ref(const float* x, block_q2_K* y, int64_t n);
void quantize_row_q3_K_ref(const float* x, block_q3_K* y, int64_t n);
void quantize_row_q4_K_ref(const float* x, block_q4_K* y, int64_t n);
void quantize_row_q5_K_ref(const float* x, block_q5_K* y, int64_t n);
// The same bytes, the scale search eight sub-blocks at a time where the processor has AVX2
// (quantize_rows uses these).
void quantize_row_q4_K(const float* x, block_q4_K* y, int64_t n);
void quantize_row_q5_K(const float* x, block_q5_K* y, int64_t n);
void quantize_row_q6_K_ref(const float* x, block_q6_K* y, int64_t n);
// MXFP4: e puts the block's largest magnitude amax in [4, 8) times 2^(e - 127) (e = floor(log2(amax))
// - 2 + 127, converted to a byte as ggml's x86 build does: a block with amax below 2^-125 wraps
// around to e 232..255, and its codes are 0); each value takes the nearest of the 16 levels times
// 2^(e - 128), the lowest code on a tie.
void quantize_row_mxfp4_ref(const float* x, block_mxfp4* y, int64_t n);
// NVFP4: each 16-element sub-block's scale is its largest magnitude / 6 (E2M1's largest level) as
// UE4M3 (fp32_to_ue4m3), its values the nearest of the 16 levels times that scale, as MXFP4's.
void quantize_row_nvfp4_ref(const float* x, block_nvfp4* y, int64_t n);
// ggml_fp32_to_ue4m3: 0 for x <= 0 or NaN; 0x7E (448) for anything from 256 up (ggml saturates
// the whole top exponent, so codes 0x78-0x7D are never written); the mantissa rounded half up (at
// the 4th bit) with a carry into the exponent; below 2^-6 a subnormal man * 2^-9 with man =
// (int)(x * 512 + 0.5) capped at 7 (0 below 1).
uint8_t fp32_to_ue4m3(float x);
// Also the activation quantizer of every K-quant dot product (identical on all ggml code paths).
// An all-zero block gets d = 0 and zero quants and sums.
void quantize_row_q8_K_ref(const float* x, block_q8_K* y, int64_t n);

// Activation quantizers as ggml's x86 SIMD code does them: id = 127/amax and round half to even.
// They differ from the _ref versions (id = 1/(amax/127), round half away from zero) only on ties.
void quantize_activation_q8_0(const float* x, block_q8_0* y, int64_t n);
void quantize_activation_q8_1(const float* x, block_q8_1* y, int64_t n);
void quantize_row_q8_1_ref(const float* x, block_q8_1* y, int64_t n);

// f32 -> f16 / bf16, round to nearest even (ggml_fp32_to_fp16_row, ggml_fp32_to_bf16_row_ref).
void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n);
void fp32_to_bf16_row(const float* x, uint16_t* y, int64_t n);

}  // namespace ls
