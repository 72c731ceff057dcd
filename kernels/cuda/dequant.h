// CUDA backend: decoding rows of any supported weight type to f32 on the device. Included by .cu
// sources (built by nvcc into the CUDA module, or as C++ against the SIMT emulator for tests).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/ggml_type.h"
#include "kernels/simt/simt.h"

namespace ls::cuda {

// True when cuda_dequantize_rows handles `type` (the same set as the CPU's dequantize_row).
bool cuda_can_dequantize(GgmlType type);

// Decodes n_rows rows of n_per_row elements from dev_src (rows src_row_bytes apart; 0 means
// packed) into dev_dst (n_rows, n_per_row) f32, packed. Asynchronous on `stream`.
// cudaErrorInvalidValue for an unsupported type or an n_per_row that is not a multiple of the
// type's block size.
cudaError_t cuda_dequantize_rows(GgmlType type, const void* dev_src, size_t src_row_bytes, float* dev_dst,
                                 int64_t n_per_row, int64_t n_rows, cudaStream_t stream);

// GET_ROWS: row dev_ids[i] of dev_table (rows table_row_bytes apart) decoded into row i of dev_dst
// (n_ids, n_per_row) f32. The ids stay on the device. Asynchronous on `stream`.
cudaError_t cuda_get_rows(GgmlType type, const void* dev_table, size_t table_row_bytes, const int32_t* dev_ids,
                          int64_t n_ids, float* dev_dst, int64_t n_per_row, cudaStream_t stream);

}  // namespace ls::cuda
