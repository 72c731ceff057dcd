// Decoding rows of any supported GGUF tensor type to f32 on the CPU (bit-exact to ggml's to_float).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/ggml_type.h"

namespace ls {

// True when dequantize_row handles `type`.
bool can_dequantize(GgmlType type);

// Decodes `n` elements (a multiple of the type's block size) from `src` into `dst`.
// Returns false, writing nothing, for an unsupported type or a bad n.
bool dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

// Decodes `n_rows` rows of `n_per_row` elements; source rows are `src_row_bytes` apart (0 means
// packed) and destination rows `n_per_row` floats apart.
bool dequantize_rows(GgmlType type, const void* src, size_t src_row_bytes, float* dst, int64_t n_rows,
                     int64_t n_per_row);

}  // namespace ls
