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

struct block_q4_K;

// The elements [k0, k0 + len) (whole blocks) of `rows` rows, row_bytes apart, as f32 for the exact
// prompt kernels: wr[r] points at row r's elements, F32 rows where they lie, the others decoded into
// panel + r * panel_stride (by `simd`, a decoder with dequantize_row's bits, where it takes the
// format: it returns false where it does not).
void chunk_rows_f32(GgmlType type, const void* w, uint64_t row_bytes, int rows, int64_t k0, int64_t len, float* panel,
                    int64_t panel_stride, bool (*simd)(GgmlType, const void*, float*, int64_t), const float** wr);

}  // namespace ls
