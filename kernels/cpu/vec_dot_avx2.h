// Quantized dot products of llama mode on AVX2+FMA+F16C instructions, bit-identical to the scalar
// emulation of ggml's kernels (vec_dot_x86.h). Callers check the processor first.
#pragma once

#include <cstdint>

#include "kernels/common/quant_blocks.h"

namespace ls {

// Whether the processor has AVX2, FMA and F16C.
bool avx2_kernels_usable();

float dot_q4_K_avx2(int64_t n, const block_q4_K* w, const block_q8_K* a);
// Exact mode: the Q4_K row decoded and dotted with f32 x, bit-identical to dequantize_row + dot_f32.
float dot_q4_K_f32_avx2(int64_t n, const block_q4_K* w, const float* x);
float dot_q6_K_avx2(int64_t n, const block_q6_K* w, const block_q8_K* a);
// One q4_K row against `count` activation rows (a_stride_blocks blocks apart): out[i * out_stride]
// is exactly dot_q4_K_avx2 of row i, with each weight block unpacked once for all of them.
void dot_q4_K_avx2_rows(int64_t n, const block_q4_K* w, const block_q8_K* a, int64_t a_stride_blocks, int count,
                        float* out, int64_t out_stride);

}  // namespace ls
