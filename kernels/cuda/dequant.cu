// CUDA backend: weight rows of any supported type to f32. Each thread decodes one quant block with
// the decoders shared with the CPU backend (so results are bit-identical), then the CUDA block
// writes its staged output to global memory coalesced.
#include "kernels/cuda/dequant.h"

#include "kernels/common/quant_blocks.h"

namespace ls::cuda {
namespace {

// Enough threads to hide latency while the staging buffer stays at 32 KiB (under the 48 KiB that
// needs no opt-in): 8192 elements, at most 256 threads (32 for 256-element super-blocks, 128 for
// NVFP4's 64).
constexpr int threads_for(int block_elems) {
    return 8192 / block_elems < 256 ? 8192 / block_elems : 256;
}

template <class Block, void (*Decode)(const Block*, float*), int kElems, int kThreads>
__global__ void __launch_bounds__(kThreads)
    dequantize_rows_kernel(const uint8_t* src, size_t src_row_bytes, const int32_t* ids, float* dst,
                           int64_t blocks_per_row, int64_t total_blocks) {
    __shared__ float stage[kThreads * kElems];  // (kThreads quant blocks, kElems)
    const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads;
    const int64_t q = first + threadIdx.x;
    if (q < total_blocks) {
        const int64_t row = q / blocks_per_row;
        const int64_t src_row = ids ? ids[row] : row;  // GET_ROWS reads the rows the ids name
        const Block* b = reinterpret_cast<const Block*>(src + src_row * src_row_bytes) + (q - row * blocks_per_row);
        Decode(b, stage + threadIdx.x * kElems);
    }
    __syncthreads();
    // dst is packed, so the quant blocks of this CUDA block are one contiguous run of floats.
    const int64_t left = total_blocks - first;
    const int count = static_cast<int>((left < kThreads ? left : kThreads) * kElems);
    float* out = dst + first * kElems;
    for (int i = threadIdx.x; i < count; i += kThreads) out[i] = stage[i];
}

template <class Block, void (*Decode)(const Block*, float*), int kElems>
cudaError_t launch_rows(const void* src, size_t src_row_bytes, const int32_t* ids, float* dst, int64_t n_per_row,
                        int64_t n_rows, cudaStream_t stream) {
    constexpr int kThreads = threads_for(kElems);
    if (n_per_row < 0 || n_rows < 0 || n_per_row % kElems != 0) return cudaErrorInvalidValue;
    const int64_t blocks_per_row = n_per_row / kElems;
    const int64_t total_blocks = blocks_per_row * n_rows;
    if (total_blocks == 0) return cudaSuccess;
    const int64_t grid = (total_blocks + kThreads - 1) / kThreads;
    if (grid > 0x7fffffff) return cudaErrorInvalidValue;
    const size_t row_bytes = src_row_bytes != 0 ? src_row_bytes : static_cast<size_t>(blocks_per_row) * sizeof(Block);
    LAUNCH_STREAM((dequantize_rows_kernel<Block, Decode, kElems, kThreads>), static_cast<unsigned>(grid), kThreads, 0,
                  stream, static_cast<const uint8_t*>(src), row_bytes, ids, dst, blocks_per_row, total_blocks);
    return cudaGetLastError();
}

using RowsLauncher = cudaError_t (*)(const void*, size_t, const int32_t*, float*, int64_t, int64_t, cudaStream_t);

RowsLauncher rows_launcher(GgmlType type) {
    switch (type) {
        case GgmlType::F32: return launch_rows<float, dequantize_block_f32, 1>;
        case GgmlType::F16: return launch_rows<uint16_t, dequantize_block_f16, 1>;
        case GgmlType::BF16: return launch_rows<uint16_t, dequantize_block_bf16, 1>;
        case GgmlType::Q4_0: return launch_rows<block_q4_0, dequantize_block_q4_0, kQK4_0>;
        case GgmlType::Q4_1: return launch_rows<block_q4_1, dequantize_block_q4_1, kQK4_1>;
        case GgmlType::Q5_0: return launch_rows<block_q5_0, dequantize_block_q5_0, kQK5_0>;
        case GgmlType::Q5_1: return launch_rows<block_q5_1, dequantize_block_q5_1, kQK5_1>;
        case GgmlType::Q8_0: return launch_rows<block_q8_0, dequantize_block_q8_0, kQK8_0>;
        case GgmlType::Q2_K: return launch_rows<block_q2_K, dequantize_block_q2_K, kQK_K>;
        case GgmlType::Q3_K: return launch_rows<block_q3_K, dequantize_block_q3_K, kQK_K>;
        case GgmlType::Q4_K: return launch_rows<block_q4_K, dequantize_block_q4_K, kQK_K>;
        case GgmlType::Q5_K: return launch_rows<block_q5_K, dequantize_block_q5_K, kQK_K>;
        case GgmlType::Q6_K: return launch_rows<block_q6_K, dequantize_block_q6_K, kQK_K>;
        case GgmlType::Q8_K: return launch_rows<block_q8_K, dequantize_block_q8_K, kQK_K>;
        case GgmlType::IQ4_NL: return launch_rows<block_iq4_nl, dequantize_block_iq4_nl, kQK4_NL>;
        case GgmlType::IQ4_XS: return launch_rows<block_iq4_xs, dequantize_block_iq4_xs, kQK_K>;
        case GgmlType::MXFP4: return launch_rows<block_mxfp4, dequantize_block_mxfp4, kQK_MXFP4>;
        case GgmlType::NVFP4: return launch_rows<block_nvfp4, dequantize_block_nvfp4, kQK_NVFP4>;
        case GgmlType::TQ1_0: return launch_rows<block_tq1_0, dequantize_block_tq1_0, kQK_K>;
        case GgmlType::TQ2_0: return launch_rows<block_tq2_0, dequantize_block_tq2_0, kQK_K>;
        default: return nullptr;
    }
}

}  // namespace

bool cuda_can_dequantize(GgmlType type) { return rows_launcher(type) != nullptr; }

cudaError_t cuda_dequantize_rows(GgmlType type, const void* dev_src, size_t src_row_bytes, float* dev_dst,
                                 int64_t n_per_row, int64_t n_rows, cudaStream_t stream) {
    const RowsLauncher launcher = rows_launcher(type);
    if (launcher == nullptr) return cudaErrorInvalidValue;
    return launcher(dev_src, src_row_bytes, nullptr, dev_dst, n_per_row, n_rows, stream);
}

cudaError_t cuda_get_rows(GgmlType type, const void* dev_table, size_t table_row_bytes, const int32_t* dev_ids,
                          int64_t n_ids, float* dev_dst, int64_t n_per_row, cudaStream_t stream) {
    const RowsLauncher launcher = rows_launcher(type);
    if (launcher == nullptr || dev_ids == nullptr || table_row_bytes == 0) return cudaErrorInvalidValue;
    return launcher(dev_table, table_row_bytes, dev_ids, dev_dst, n_per_row, n_ids, stream);
}

}  // namespace ls::cuda
