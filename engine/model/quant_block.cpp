// The quant block inspector (see quant_block.h). Each format's codes are read in the element order
// of its dequantization (kernels/common/quant_blocks.h); the values are dequantize_rows's own.
#include "engine/model/quant_block.h"

#include <fmt/format.h>

#include <cstring>

#include "engine/gguf/gguf.h"
#include "kernels/common/fp16.h"
#include "kernels/common/ggml_type.h"
#include "kernels/common/quant_blocks.h"
#include "kernels/cpu/dequant.h"

namespace ls {
namespace {

std::string f16_text(uint16_t bits) { return fmt::format("{:.9g} (f16 0x{:04x})", fp16_to_fp32(bits), bits); }

std::string list_text(const std::vector<int>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + std::to_string(v[i]);
    return s;
}

// The codes, levels and groups of one block, in element order; the fields and the formula.
struct Decoded {
    std::vector<int> code, level, group;
    std::vector<QuantBlockField> fields;
    std::string formula;
};

// Element j of a 32-quant block with nibbles: low nibble of byte j, then high nibble of byte j - 16.
int nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }
// Q5_0 / Q5_1's fifth bit of element j.
int fifth_bit(const uint8_t* qh, int j) { return static_cast<int>((load_u32_le(qh) >> j) & 1); }

// The 6-bit scales and mins of Q4_K / Q5_K's eight sub-blocks of 32.
void k4_scales(const uint8_t* packed, Decoded* d) {
    std::vector<int> sc(8), mn(8);
    for (int j = 0; j < 8; ++j) {
        uint8_t s = 0, m = 0;
        get_scale_min_k4(j, packed, &s, &m);
        sc[j] = s;
        mn[j] = m;
    }
    d->fields.push_back({"scales", list_text(sc) + " (6 bits, one per 32 elements)"});
    d->fields.push_back({"mins", list_text(mn) + " (6 bits, one per 32 elements)"});
}

bool decode(GgmlType type, const uint8_t* p, int n, Decoded* d) {
    d->code.assign(n, 0);
    d->level.assign(n, 0);
    d->group.assign(n, 0);
    auto set = [&](int j, int code, int level, int group = 0) {
        d->code[j] = code;
        d->level[j] = level;
        d->group[j] = group;
    };
    switch (type) {
        case GgmlType::Q4_0: {
            const auto* b = reinterpret_cast<const block_q4_0*>(p);
            d->fields = {{"d", f16_text(b->d)}};
            d->formula = "value = d * (code - 8)";
            for (int j = 0; j < n; ++j) set(j, nibble(b->qs, j), nibble(b->qs, j) - 8);
            return true;
        }
        case GgmlType::Q4_1: {
            const auto* b = reinterpret_cast<const block_q4_1*>(p);
            d->fields = {{"d", f16_text(b->d)}, {"m", f16_text(b->m)}};
            d->formula = "value = d * code + m";
            for (int j = 0; j < n; ++j) set(j, nibble(b->qs, j), nibble(b->qs, j));
            return true;
        }
        case GgmlType::Q5_0: {
            const auto* b = reinterpret_cast<const block_q5_0*>(p);
            d->fields = {{"d", f16_text(b->d)}, {"qh", fmt::format("0x{:08x} (bit j: element j's fifth bit)", load_u32_le(b->qh))}};
            d->formula = "value = d * (code - 16), code = nibble | fifth bit << 4";
            for (int j = 0; j < n; ++j) {
                const int c = nibble(b->qs, j) | fifth_bit(b->qh, j) << 4;
                set(j, c, c - 16);
            }
            return true;
        }
        case GgmlType::Q5_1: {
            const auto* b = reinterpret_cast<const block_q5_1*>(p);
            d->fields = {{"d", f16_text(b->d)}, {"m", f16_text(b->m)},
                         {"qh", fmt::format("0x{:08x} (bit j: element j's fifth bit)", load_u32_le(b->qh))}};
            d->formula = "value = d * code + m, code = nibble | fifth bit << 4";
            for (int j = 0; j < n; ++j) {
                const int c = nibble(b->qs, j) | fifth_bit(b->qh, j) << 4;
                set(j, c, c);
            }
            return true;
        }
        case GgmlType::Q8_0: {
            const auto* b = reinterpret_cast<const block_q8_0*>(p);
            d->fields = {{"d", f16_text(b->d)}};
            d->formula = "value = d * code";
            for (int j = 0; j < n; ++j) set(j, b->qs[j], b->qs[j]);
            return true;
        }
        case GgmlType::IQ4_NL: {
            const auto* b = reinterpret_cast<const block_iq4_nl*>(p);
            d->fields = {{"d", f16_text(b->d)}};
            d->formula = "value = d * level, level = IQ4_NL's table[code]";
            for (int j = 0; j < n; ++j) set(j, nibble(b->qs, j), iq4nl_value(nibble(b->qs, j)));
            return true;
        }
        case GgmlType::MXFP4: {
            const auto* b = reinterpret_cast<const block_mxfp4*>(p);
            d->fields = {{"e", fmt::format("{} (E8M0): scale 2^({} - 128) = {:.9g} for the doubled E2M1 levels", b->e, b->e,
                                           e8m0_to_fp32_half(b->e))}};
            d->formula = "value = 2^(e - 128) * level, level = 2 * E2M1(code) (0 1 2 3 4 6 8 12, bit 3 the sign)";
            for (int j = 0; j < n; ++j) set(j, nibble(b->qs, j), mxfp4_value(nibble(b->qs, j)));
            return true;
        }
        case GgmlType::NVFP4: {
            const auto* b = reinterpret_cast<const block_nvfp4*>(p);
            std::string scales;
            for (int s = 0; s < kQK_NVFP4 / kQK_NVFP4_SUB; ++s)
                scales += fmt::format("{}{:.9g} (0x{:02x})", s ? ", " : "", ue4m3_to_fp32_half(b->d[s]), b->d[s]);
            d->fields = {{"d", scales + ": UE4M3 scales, one per 16 elements, halved for the doubled E2M1 levels"}};
            d->formula = "value = d[sub-block] * level, level = 2 * E2M1(code) (0 1 2 3 4 6 8 12, bit 3 the sign)";
            // Element 16 s + j: byte 8 s + j % 8, its low nibble for j < 8, else its high nibble.
            for (int j = 0; j < n; ++j) {
                const int s = j / kQK_NVFP4_SUB, k = j % kQK_NVFP4_SUB;
                const uint8_t byte = b->qs[s * (kQK_NVFP4_SUB / 2) + k % 8];
                const int c = k < 8 ? byte & 0xF : byte >> 4;
                set(j, c, mxfp4_value(c), s);
            }
            return true;
        }
        case GgmlType::Q2_K: {
            const auto* b = reinterpret_cast<const block_q2_K*>(p);
            std::vector<int> sc(16), mn(16);
            for (int g = 0; g < 16; ++g) sc[g] = b->scales[g] & 0xF, mn[g] = b->scales[g] >> 4;
            d->fields = {{"d", f16_text(b->d)}, {"dmin", f16_text(b->dmin)},
                         {"scales", list_text(sc) + " (4 bits, one per 16 elements)"},
                         {"mins", list_text(mn) + " (4 bits, one per 16 elements)"}};
            d->formula = "value = d * scale * code - dmin * min";
            // Element 128 h + 32 s + 16 part + l: bits 2s of byte 32 h + 16 part + l.
            for (int j = 0; j < n; ++j) {
                const int h = j / 128, s = j % 128 / 32, part = j % 32 / 16, l = j % 16;
                const int c = (b->qs[32 * h + 16 * part + l] >> (2 * s)) & 3;
                set(j, c, c, j / 16);
            }
            return true;
        }
        case GgmlType::Q3_K: {
            const auto* b = reinterpret_cast<const block_q3_K*>(p);
            std::vector<int> sc(16);
            for (int g = 0; g < 16; ++g) sc[g] = q3_K_scale(b->scales, g) - 32;
            d->fields = {{"d", f16_text(b->d)}, {"scales", list_text(sc) + " (6 bits less 32, one per 16 elements)"}};
            d->formula = "value = d * scale * (code - 4), code = 2 low bits | hmask bit << 2";
            for (int j = 0; j < n; ++j) {
                const int h = j / 128, s = j % 128 / 32, part = j % 32 / 16, l = j % 16;
                const int low = (b->qs[32 * h + 16 * part + l] >> (2 * s)) & 3;
                const int high = (b->hmask[16 * part + l] >> (4 * h + s)) & 1;
                set(j, low | high << 2, (low | high << 2) - 4, j / 16);
            }
            return true;
        }
        case GgmlType::Q4_K: {
            const auto* b = reinterpret_cast<const block_q4_K*>(p);
            d->fields = {{"d", f16_text(b->d)}, {"dmin", f16_text(b->dmin)}};
            k4_scales(b->scales, d);
            d->formula = "value = d * scale * code - dmin * min";
            // Sub-block g: low nibbles of bytes 32 (g / 2) .. for even g, high nibbles for odd g.
            for (int j = 0; j < n; ++j) {
                const int g = j / 32, byte = b->qs[32 * (g / 2) + j % 32];
                const int c = g % 2 ? byte >> 4 : byte & 0xF;
                set(j, c, c, g);
            }
            return true;
        }
        case GgmlType::Q5_K: {
            const auto* b = reinterpret_cast<const block_q5_K*>(p);
            d->fields = {{"d", f16_text(b->d)}, {"dmin", f16_text(b->dmin)}};
            k4_scales(b->scales, d);
            d->formula = "value = d * scale * code - dmin * min, code = nibble | qh bit g << 4";
            for (int j = 0; j < n; ++j) {
                const int g = j / 32, l = j % 32, byte = b->qs[32 * (g / 2) + l];
                const int c = (g % 2 ? byte >> 4 : byte & 0xF) | ((b->qh[l] >> g) & 1) << 4;
                set(j, c, c, g);
            }
            return true;
        }
        case GgmlType::Q6_K: {
            const auto* b = reinterpret_cast<const block_q6_K*>(p);
            std::vector<int> sc(16);
            for (int g = 0; g < 16; ++g) sc[g] = b->scales[g];
            d->fields = {{"d", f16_text(b->d)}, {"scales", list_text(sc) + " (int8, one per 16 elements)"}};
            d->formula = "value = (d * scale) * (code - 32), code = 4 bits of ql | 2 bits of qh << 4";
            // Element 128 h + 32 k + l: ql byte 64 h + l (+ 32 for odd k), low nibble for k < 2;
            // qh byte 32 h + l, bits 2k.
            for (int j = 0; j < n; ++j) {
                const int h = j / 128, k = j % 128 / 32, l = j % 32;
                const int q = b->ql[64 * h + l + 32 * (k % 2)];
                const int c = (k < 2 ? q & 0xF : q >> 4) | ((b->qh[32 * h + l] >> (2 * k)) & 3) << 4;
                set(j, c, c - 32, j / 16);
            }
            return true;
        }
        case GgmlType::Q8_K: {
            const auto* b = reinterpret_cast<const block_q8_K*>(p);
            d->fields = {{"d", fmt::format("{:.9g} (f32)", b->d)}};
            d->formula = "value = d * code";
            for (int j = 0; j < n; ++j) set(j, b->qs[j], b->qs[j]);
            return true;
        }
        case GgmlType::IQ4_XS: {
            const auto* b = reinterpret_cast<const block_iq4_xs*>(p);
            std::vector<int> sc(8);
            for (int g = 0; g < 8; ++g) sc[g] = iq4_xs_scale(*b, g);
            d->fields = {{"d", f16_text(b->d)}, {"scales", list_text(sc) + " (6 bits less 32, one per 32 elements)"}};
            d->formula = "value = d * scale * level, level = IQ4_NL's table[code]";
            for (int j = 0; j < n; ++j) {
                const int g = j / 32, c = nibble(b->qs + 16 * g, j % 32);
                set(j, c, iq4nl_value(c), g);
            }
            return true;
        }
        case GgmlType::TQ1_0:
        case GgmlType::TQ2_0: {
            uint8_t codes[kQK_K];
            uint16_t dbits = 0;
            if (type == GgmlType::TQ1_0) {
                tq1_0_codes(reinterpret_cast<const block_tq1_0*>(p), codes);
                dbits = reinterpret_cast<const block_tq1_0*>(p)->d;
            } else {
                tq2_0_codes(reinterpret_cast<const block_tq2_0*>(p), codes);
                dbits = reinterpret_cast<const block_tq2_0*>(p)->d;
            }
            d->fields = {{"d", f16_text(dbits)}};
            d->formula = "value = d * (code - 1)";
            for (int j = 0; j < n; ++j) set(j, codes[j], codes[j] - 1);
            return true;
        }
        default: return false;
    }
}

}  // namespace

int64_t quant_block_count(const GgufTensorInfo& tensor) {
    const GgmlTypeTraits* traits = ggml_type_traits(tensor.type);
    if (!traits || traits->block_elems <= 1) return 0;
    return tensor.n_elements() / traits->block_elems;
}

Result<QuantBlock> describe_quant_block(const GgufTensorInfo& tensor, uint64_t data_offset, int64_t block) {
    const GgmlTypeTraits* traits = ggml_type_traits(tensor.type);
    const char* type_name = traits && traits->name ? traits->name : "?";
    if (!traits || traits->block_elems <= 1)
        return make_error(ErrorCode::kUsage, fmt::format("{} is {}, which has no blocks: each element is stored as itself",
                                                         tensor.name, type_name));
    const int64_t n_blocks = quant_block_count(tensor);
    if (block < 0 || block >= n_blocks)
        return make_error(ErrorCode::kUsage, fmt::format("{} has {} blocks of {} elements; block {} is outside them", tensor.name,
                                                         n_blocks, traits->block_elems, block));
    if (!tensor.data)
        return make_error(ErrorCode::kUnsupported, fmt::format("{}: its data are not here (a model whose weights stay "
                                                               "on the server it runs on)", tensor.name));
    const int n = static_cast<int>(traits->block_elems);
    const uint8_t* p = tensor.data + static_cast<uint64_t>(block) * traits->block_bytes;
    Decoded d;
    std::vector<float> values(static_cast<size_t>(n));
    if (!decode(tensor.type, p, n, &d) || !dequantize_rows(tensor.type, p, 0, values.data(), 1, n))
        return make_error(ErrorCode::kUnsupported, fmt::format("{}: blocks of type {} cannot be shown yet", tensor.name, type_name));
    QuantBlock out;
    out.tensor = tensor.name;
    out.type = type_name;
    out.block = block;
    out.n_blocks = n_blocks;
    out.block_elements = n;
    out.block_bytes = traits->block_bytes;
    out.file_offset = data_offset + tensor.offset + static_cast<uint64_t>(block) * traits->block_bytes;
    out.formula = d.formula;
    out.fields = std::move(d.fields);
    out.elements.resize(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j)
        out.elements[j] = {block * n + j, d.code[j], d.level[j], d.group[j], values[static_cast<size_t>(j)]};
    return out;
}

}  // namespace ls
