// Table of ggml type geometry, indexed by GGUF type id.
#include "kernels/common/ggml_type.h"

#include <cctype>
#include <cstring>

namespace ls {
namespace {

constexpr GgmlTypeTraits kNone = {nullptr, 0, 0, false};

struct TypeTable {
    GgmlTypeTraits by_id[kGgmlTypeIdLimit];
    constexpr TypeTable() : by_id{} {
        for (auto& t : by_id) t = kNone;
        set(GgmlType::F32, "f32", 1, 4, true);
        set(GgmlType::F16, "f16", 1, 2, true);
        set(GgmlType::Q4_0, "q4_0", 32, 18, true);
        set(GgmlType::Q4_1, "q4_1", 32, 20, true);
        set(GgmlType::Q5_0, "q5_0", 32, 22, true);
        set(GgmlType::Q5_1, "q5_1", 32, 24, true);
        set(GgmlType::Q8_0, "q8_0", 32, 34, true);
        set(GgmlType::Q8_1, "q8_1", 32, 36, false);
        set(GgmlType::Q2_K, "q2_K", 256, 84, true);
        set(GgmlType::Q3_K, "q3_K", 256, 110, true);
        set(GgmlType::Q4_K, "q4_K", 256, 144, true);
        set(GgmlType::Q5_K, "q5_K", 256, 176, true);
        set(GgmlType::Q6_K, "q6_K", 256, 210, true);
        set(GgmlType::Q8_K, "q8_K", 256, 292, true);
        set(GgmlType::IQ2_XXS, "iq2_xxs", 256, 66, false);
        set(GgmlType::IQ2_XS, "iq2_xs", 256, 74, false);
        set(GgmlType::IQ3_XXS, "iq3_xxs", 256, 98, false);
        set(GgmlType::IQ1_S, "iq1_s", 256, 50, false);
        set(GgmlType::IQ4_NL, "iq4_nl", 32, 18, true);
        set(GgmlType::IQ3_S, "iq3_s", 256, 110, false);
        set(GgmlType::IQ2_S, "iq2_s", 256, 82, false);
        set(GgmlType::IQ4_XS, "iq4_xs", 256, 136, true);
        set(GgmlType::I8, "i8", 1, 1, false);
        set(GgmlType::I16, "i16", 1, 2, false);
        set(GgmlType::I32, "i32", 1, 4, false);
        set(GgmlType::I64, "i64", 1, 8, false);
        set(GgmlType::F64, "f64", 1, 8, false);
        set(GgmlType::IQ1_M, "iq1_m", 256, 56, false);
        set(GgmlType::BF16, "bf16", 1, 2, true);
        set(GgmlType::TQ1_0, "tq1_0", 256, 54, true);
        set(GgmlType::TQ2_0, "tq2_0", 256, 66, true);
        set(GgmlType::MXFP4, "mxfp4", 32, 17, true);
        set(GgmlType::NVFP4, "nvfp4", 64, 36, true);
    }
    constexpr void set(GgmlType type, const char* name, uint32_t elems, uint32_t bytes, bool deq) {
        by_id[static_cast<uint32_t>(type)] = {name, elems, bytes, deq};
    }
};

constexpr TypeTable kTable;

}  // namespace

const GgmlTypeTraits* ggml_type_traits(uint32_t type_id) {
    if (type_id >= kGgmlTypeIdLimit || kTable.by_id[type_id].name == nullptr) return nullptr;
    return &kTable.by_id[type_id];
}

const char* ggml_type_name(uint32_t type_id) {
    const GgmlTypeTraits* t = ggml_type_traits(type_id);
    return t ? t->name : "?";
}

bool ggml_type_from_name(const char* name, GgmlType* out) {
    for (uint32_t id = 0; id < kGgmlTypeIdLimit; ++id) {
        const char* n = kTable.by_id[id].name;
        if (!n) continue;
        size_t i = 0;
        while (n[i] && name[i] && std::tolower(static_cast<unsigned char>(n[i])) ==
                                      std::tolower(static_cast<unsigned char>(name[i])))
            ++i;
        if (!n[i] && !name[i]) {
            *out = static_cast<GgmlType>(id);
            return true;
        }
    }
    return false;
}

bool ggml_row_bytes(GgmlType type, int64_t n_elems, uint64_t* out_bytes) {
    const GgmlTypeTraits* t = ggml_type_traits(type);
    if (!t || n_elems < 0 || n_elems % t->block_elems != 0) return false;
    *out_bytes = static_cast<uint64_t>(n_elems / t->block_elems) * t->block_bytes;
    return true;
}

}  // namespace ls
