// Row decoding on the CPU: loops the shared per-block decoders of common/quant_blocks.h over a row.
#include "kernels/cpu/dequant.h"

#include "kernels/common/quant_blocks.h"

namespace ls {

namespace {

template <typename Block, void (*Decode)(const Block*, float*), int kElems>
void decode_blocks(const void* src, float* dst, int64_t n) {
    const Block* blocks = static_cast<const Block*>(src);
    const int64_t n_blocks = n / kElems;
    for (int64_t i = 0; i < n_blocks; ++i) Decode(blocks + i, dst + i * kElems);
}

using RowDecoder = void (*)(const void*, float*, int64_t);

RowDecoder row_decoder(GgmlType type) {
    switch (type) {
        case GgmlType::F32: return decode_blocks<float, dequantize_block_f32, 1>;
        case GgmlType::F16: return decode_blocks<uint16_t, dequantize_block_f16, 1>;
        case GgmlType::BF16: return decode_blocks<uint16_t, dequantize_block_bf16, 1>;
        case GgmlType::Q4_0: return decode_blocks<block_q4_0, dequantize_block_q4_0, kQK4_0>;
        case GgmlType::Q4_1: return decode_blocks<block_q4_1, dequantize_block_q4_1, kQK4_1>;
        case GgmlType::Q5_0: return decode_blocks<block_q5_0, dequantize_block_q5_0, kQK5_0>;
        case GgmlType::Q5_1: return decode_blocks<block_q5_1, dequantize_block_q5_1, kQK5_1>;
        case GgmlType::Q8_0: return decode_blocks<block_q8_0, dequantize_block_q8_0, kQK8_0>;
        case GgmlType::Q2_K: return decode_blocks<block_q2_K, dequantize_block_q2_K, kQK_K>;
        case GgmlType::Q3_K: return decode_blocks<block_q3_K, dequantize_block_q3_K, kQK_K>;
        case GgmlType::Q4_K: return decode_blocks<block_q4_K, dequantize_block_q4_K, kQK_K>;
        case GgmlType::Q5_K: return decode_blocks<block_q5_K, dequantize_block_q5_K, kQK_K>;
        case GgmlType::Q6_K: return decode_blocks<block_q6_K, dequantize_block_q6_K, kQK_K>;
        case GgmlType::Q8_K: return decode_blocks<block_q8_K, dequantize_block_q8_K, kQK_K>;
        case GgmlType::IQ4_NL: return decode_blocks<block_iq4_nl, dequantize_block_iq4_nl, kQK4_NL>;
        case GgmlType::IQ4_XS: return decode_blocks<block_iq4_xs, dequantize_block_iq4_xs, kQK_K>;
        case GgmlType::MXFP4: return decode_blocks<block_mxfp4, dequantize_block_mxfp4, kQK_MXFP4>;
        case GgmlType::NVFP4: return decode_blocks<block_nvfp4, dequantize_block_nvfp4, kQK_NVFP4>;
        case GgmlType::TQ1_0: return decode_blocks<block_tq1_0, dequantize_block_tq1_0, kQK_K>;
        case GgmlType::TQ2_0: return decode_blocks<block_tq2_0, dequantize_block_tq2_0, kQK_K>;
        default: return nullptr;
    }
}

}  // namespace

bool can_dequantize(GgmlType type) { return row_decoder(type) != nullptr; }

bool dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
    const RowDecoder decode = row_decoder(type);
    const GgmlTypeTraits* traits = ggml_type_traits(type);
    if (decode == nullptr || traits == nullptr || n < 0 || n % traits->block_elems != 0) return false;
    decode(src, dst, n);
    return true;
}

bool dequantize_rows(GgmlType type, const void* src, size_t src_row_bytes, float* dst, int64_t n_rows,
                     int64_t n_per_row) {
    const RowDecoder decode = row_decoder(type);
    uint64_t packed_row_bytes = 0;
    if (decode == nullptr || n_rows < 0 || !ggml_row_bytes(type, n_per_row, &packed_row_bytes)) return false;
    if (n_per_row == 0) return true;  // empty rows, however many (a hostile file's 0 x 2^62)
    const size_t stride = src_row_bytes != 0 ? src_row_bytes : static_cast<size_t>(packed_row_bytes);
    const uint8_t* row = static_cast<const uint8_t*>(src);
    for (int64_t r = 0; r < n_rows; ++r) decode(row + r * stride, dst + r * n_per_row, n_per_row);
    return true;
}

void chunk_rows_f32(GgmlType type, const void* w, uint64_t row_bytes, int rows, int64_t k0, int64_t len, float* panel,
                    int64_t panel_stride, bool (*simd)(GgmlType, const void*, float*, int64_t), const float** wr) {
    const uint32_t block_elems = ggml_type_traits(type)->block_elems;
    const uint32_t block_bytes = ggml_type_traits(type)->block_bytes;
    for (int r = 0; r < rows; ++r) {
        const char* src = static_cast<const char*>(w) + r * row_bytes + k0 / block_elems * block_bytes;
        if (type == GgmlType::F32) {
            wr[r] = reinterpret_cast<const float*>(src);
            continue;
        }
        float* dst = panel + r * panel_stride;
        if (!simd(type, src, dst, len)) dequantize_row(type, src, dst, len);
        wr[r] = dst;
    }
}

}  // namespace ls
