// GgufValue: typed access, construction helpers and text rendering of metadata values.
#include "engine/gguf/gguf.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace ls {

const char* gguf_value_type_name(GgufValueType type) {
    switch (type) {
        case GgufValueType::UINT8: return "u8";
        case GgufValueType::INT8: return "i8";
        case GgufValueType::UINT16: return "u16";
        case GgufValueType::INT16: return "i16";
        case GgufValueType::UINT32: return "u32";
        case GgufValueType::INT32: return "i32";
        case GgufValueType::FLOAT32: return "f32";
        case GgufValueType::BOOL: return "bool";
        case GgufValueType::STRING: return "str";
        case GgufValueType::ARRAY: return "arr";
        case GgufValueType::UINT64: return "u64";
        case GgufValueType::INT64: return "i64";
        case GgufValueType::FLOAT64: return "f64";
    }
    return "?";
}

bool gguf_value_type_is_integer(GgufValueType type) {
    switch (type) {
        case GgufValueType::UINT8: case GgufValueType::INT8: case GgufValueType::UINT16:
        case GgufValueType::INT16: case GgufValueType::UINT32: case GgufValueType::INT32:
        case GgufValueType::UINT64: case GgufValueType::INT64:
            return true;
        default:
            return false;
    }
}

static bool is_unsigned(GgufValueType t) {
    return t == GgufValueType::UINT8 || t == GgufValueType::UINT16 || t == GgufValueType::UINT32 ||
           t == GgufValueType::UINT64 || t == GgufValueType::BOOL;
}
static bool is_signed(GgufValueType t) {
    return t == GgufValueType::INT8 || t == GgufValueType::INT16 || t == GgufValueType::INT32 ||
           t == GgufValueType::INT64;
}

bool GgufValue::get_int(int64_t* out) const {
    if (is_unsigned(type)) {
        if (u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
        *out = static_cast<int64_t>(u64);
        return true;
    }
    if (is_signed(type)) {
        *out = i64;
        return true;
    }
    return false;
}

bool GgufValue::get_uint(uint64_t* out) const {
    if (is_unsigned(type)) {
        *out = u64;
        return true;
    }
    if (is_signed(type) && i64 >= 0) {
        *out = static_cast<uint64_t>(i64);
        return true;
    }
    return false;
}

bool GgufValue::get_float(double* out) const {
    if (type == GgufValueType::FLOAT32 || type == GgufValueType::FLOAT64) {
        *out = f64;
        return true;
    }
    if (is_unsigned(type)) {
        *out = static_cast<double>(u64);
        return true;
    }
    if (is_signed(type)) {
        *out = static_cast<double>(i64);
        return true;
    }
    return false;
}

static std::string quote(const std::string& s, size_t max_chars = 120) {
    std::string out = "\"";
    size_t n = 0;
    for (unsigned char c : s) {
        if (n++ >= max_chars) {
            out += "...";
            break;
        }
        if (c == '"') out += "\\\"";
        else if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20) out += fmt::format("\\x{:02x}", c);
        else out += static_cast<char>(c);
    }
    return out + "\"";
}

std::string GgufValue::to_string(size_t max_items) const {
    switch (type) {
        case GgufValueType::BOOL: return u64 ? "true" : "false";
        case GgufValueType::STRING: return quote(str);
        case GgufValueType::FLOAT32: return fmt::format("{}", static_cast<float>(f64));
        case GgufValueType::FLOAT64: return fmt::format("{}", f64);
        case GgufValueType::ARRAY: {
            size_t n = array_size();
            std::string out = fmt::format("[{} x {}]", n, gguf_value_type_name(elem_type));
            out += " [";
            for (size_t i = 0; i < n && i < max_items; ++i) {
                if (i) out += ", ";
                out += elem_type == GgufValueType::STRING ? quote(strings[i], 40) : items[i].to_string(max_items);
            }
            if (n > max_items) out += ", ...";
            return out + "]";
        }
        default:
            return is_signed(type) ? fmt::format("{}", i64) : fmt::format("{}", u64);
    }
}

GgufValue GgufValue::make_u32(uint32_t v) { GgufValue x; x.type = GgufValueType::UINT32; x.u64 = v; return x; }
GgufValue GgufValue::make_i32(int32_t v) { GgufValue x; x.type = GgufValueType::INT32; x.i64 = v; return x; }
GgufValue GgufValue::make_u64(uint64_t v) { GgufValue x; x.type = GgufValueType::UINT64; x.u64 = v; return x; }
GgufValue GgufValue::make_f32(float v) { GgufValue x; x.type = GgufValueType::FLOAT32; x.f64 = v; return x; }
GgufValue GgufValue::make_bool(bool v) { GgufValue x; x.type = GgufValueType::BOOL; x.u64 = v ? 1 : 0; return x; }
GgufValue GgufValue::make_string(std::string v) {
    GgufValue x;
    x.type = GgufValueType::STRING;
    x.str = std::move(v);
    return x;
}
GgufValue GgufValue::make_string_array(std::vector<std::string> v) {
    GgufValue x;
    x.type = GgufValueType::ARRAY;
    x.elem_type = GgufValueType::STRING;
    x.strings = std::move(v);
    return x;
}
GgufValue GgufValue::make_array(GgufValueType elem_type, std::vector<GgufValue> items) {
    GgufValue x;
    x.type = GgufValueType::ARRAY;
    x.elem_type = elem_type;
    x.items = std::move(items);
    return x;
}

}  // namespace ls
