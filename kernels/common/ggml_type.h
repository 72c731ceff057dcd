// The ggml tensor element types: ids as stored in GGUF files, block geometry and names.
// Shared by the CPU and CUDA backends; knows nothing of files.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ls {

enum class GgmlType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    NVFP4 = 40,
};

inline constexpr uint32_t kGgmlTypeIdLimit = 41;  // ids are < this

struct GgmlTypeTraits {
    const char* name;       // ggml's name, e.g. "q4_K"; nullptr for ids that are not types
    uint32_t block_elems;   // elements per block (1 for plain types)
    uint32_t block_bytes;   // bytes per block
    bool can_dequantize;    // we decode it to f32
};

// Traits for a type id, or nullptr when the id names no known type.
const GgmlTypeTraits* ggml_type_traits(uint32_t type_id);

inline const GgmlTypeTraits* ggml_type_traits(GgmlType type) {
    return ggml_type_traits(static_cast<uint32_t>(type));
}

// Name of a type id ("f32", "q4_K", ...), or "unknown(<id>)" style text in a static buffer is
// avoided: returns "?" for unknown ids.
const char* ggml_type_name(uint32_t type_id);
inline const char* ggml_type_name(GgmlType type) { return ggml_type_name(static_cast<uint32_t>(type)); }

// Parses a ggml type name, case-insensitively ("Q4_K", "q4_k", "F16"). Returns false when unknown.
bool ggml_type_from_name(const char* name, GgmlType* out);

// Bytes of one row of `n_elems` elements; false when n_elems is not a multiple of the block size
// or the type is unknown.
bool ggml_row_bytes(GgmlType type, int64_t n_elems, uint64_t* out_bytes);

}  // namespace ls
