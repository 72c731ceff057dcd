// Quantized dot products of llama mode on AVX2+FMA+F16C instructions, bit-identical to the scalar
// emulation of ggml's kernels (vec_dot_x86.h). Callers check the processor first.
#pragma once

#include <cstdint>

#include "kernels/common/quant_blocks.h"

namespace ls {

float dot_q4_K_avx2(int64_t n, const block_q4_K* w, const block_q8_K* a);

}  // namespace ls
