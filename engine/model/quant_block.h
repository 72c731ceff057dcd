// The quant block inspector: one block of a quantized tensor as it is stored. Its scale fields
// decoded, and for every element the stored code, the integer level the scale multiplies, the
// sub-block whose scale applies and the value it decodes to (dequantize_rows's, so what the
// forward pass uses). For a K-quant or MXFP4 decoding bug, this is where "which bits mean what"
// is answered.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/util/result.h"

namespace ls {

struct GgufTensorInfo;

struct QuantBlockField {
    std::string name;   // "d", "dmin", "e", "scales", "mins"
    std::string value;  // decoded, with the stored bits where they matter ("0.0123 (f16 0x2250)")
};

struct QuantBlockElement {
    int64_t index = 0;  // in the tensor's flat element order
    int code = 0;       // the stored bits (a nibble, 5 or 6 bits, a byte, a ternary digit)
    int level = 0;      // the integer the scale multiplies (code - 8 for Q4_0, a table's entry for MXFP4)
    int group = 0;      // the sub-block whose scale (and min) applies; 0 where the block has one
    float value = 0;
};

struct QuantBlock {
    std::string tensor;
    std::string type;          // ggml's name, "mxfp4"
    int64_t block = 0;         // index among the tensor's blocks (row-major, along ne[0])
    int64_t n_blocks = 0;
    int64_t block_elements = 0;
    uint64_t file_offset = 0;  // the block's first byte in the file
    uint64_t block_bytes = 0;
    std::string formula;       // how a value is made, "value = d * level"
    std::vector<QuantBlockField> fields;
    std::vector<QuantBlockElement> elements;
};

// Block `block` of `tensor` (whose data is mapped). Refused by name for a type without blocks (F32,
// F16, BF16), one this build cannot decode, or an index outside the tensor.
Result<QuantBlock> describe_quant_block(const GgufTensorInfo& tensor, uint64_t data_offset, int64_t block);

// How many blocks the tensor has (0 for a type without blocks).
int64_t quant_block_count(const GgufTensorInfo& tensor);

}  // namespace ls
