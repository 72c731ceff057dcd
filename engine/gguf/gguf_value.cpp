// GgufValue: typed access, construction helpers and text rendering of metadata values.
#include "engine/gguf/gguf.h"

#include <fmt/format.h>

#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/util/quote.h"

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

size_t gguf_scalar_size(GgufValueType type) {
    switch (type) {
        case GgufValueType::UINT8: case GgufValueType::INT8: case GgufValueType::BOOL: return 1;
        case GgufValueType::UINT16: case GgufValueType::INT16: return 2;
        case GgufValueType::UINT32: case GgufValueType::INT32: case GgufValueType::FLOAT32: return 4;
        case GgufValueType::UINT64: case GgufValueType::INT64: case GgufValueType::FLOAT64: return 8;
        case GgufValueType::STRING: case GgufValueType::ARRAY: return 0;
    }
    return 0;
}

namespace {

// A number or bool as GgufValue holds it: the member that matches its type.
struct Scalar {
    GgufValueType type;
    uint64_t u64 = 0;
    int64_t i64 = 0;
    double f64 = 0;
};

template <class T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// The element at `p` of a packed array of `type`.
Scalar load_scalar(GgufValueType type, const uint8_t* p) {
    Scalar s{type};
    switch (type) {
        case GgufValueType::UINT8: case GgufValueType::BOOL: s.u64 = load<uint8_t>(p); break;
        case GgufValueType::INT8: s.i64 = load<int8_t>(p); break;
        case GgufValueType::UINT16: s.u64 = load<uint16_t>(p); break;
        case GgufValueType::INT16: s.i64 = load<int16_t>(p); break;
        case GgufValueType::UINT32: s.u64 = load<uint32_t>(p); break;
        case GgufValueType::INT32: s.i64 = load<int32_t>(p); break;
        case GgufValueType::UINT64: s.u64 = load<uint64_t>(p); break;
        case GgufValueType::INT64: s.i64 = load<int64_t>(p); break;
        case GgufValueType::FLOAT32: s.f64 = load<float>(p); break;
        case GgufValueType::FLOAT64: s.f64 = load<double>(p); break;
        case GgufValueType::STRING: case GgufValueType::ARRAY: break;
    }
    return s;
}

// `v` stored at `p` as an element of a packed array of `type` (the conversions the writer makes).
void store_scalar(GgufValueType type, const GgufValue& v, uint8_t* p) {
    const auto store = [p](auto x) { std::memcpy(p, &x, sizeof x); };
    switch (type) {
        case GgufValueType::UINT8: store(static_cast<uint8_t>(v.u64)); break;
        case GgufValueType::INT8: store(static_cast<int8_t>(v.i64)); break;
        case GgufValueType::UINT16: store(static_cast<uint16_t>(v.u64)); break;
        case GgufValueType::INT16: store(static_cast<int16_t>(v.i64)); break;
        case GgufValueType::UINT32: store(static_cast<uint32_t>(v.u64)); break;
        case GgufValueType::INT32: store(static_cast<int32_t>(v.i64)); break;
        case GgufValueType::UINT64: store(v.u64); break;
        case GgufValueType::INT64: store(v.i64); break;
        case GgufValueType::FLOAT32: store(static_cast<float>(v.f64)); break;
        case GgufValueType::FLOAT64: store(v.f64); break;
        case GgufValueType::BOOL: store(static_cast<uint8_t>(v.u64 ? 1 : 0)); break;
        case GgufValueType::STRING: case GgufValueType::ARRAY: break;
    }
}

bool is_unsigned(GgufValueType t) {
    return t == GgufValueType::UINT8 || t == GgufValueType::UINT16 || t == GgufValueType::UINT32 ||
           t == GgufValueType::UINT64 || t == GgufValueType::BOOL;
}
bool is_signed(GgufValueType t) {
    return t == GgufValueType::INT8 || t == GgufValueType::INT16 || t == GgufValueType::INT32 ||
           t == GgufValueType::INT64;
}

bool int_of(const Scalar& s, int64_t* out) {
    if (is_unsigned(s.type)) {
        if (s.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
        *out = static_cast<int64_t>(s.u64);
        return true;
    }
    if (is_signed(s.type)) {
        *out = s.i64;
        return true;
    }
    return false;
}

bool float_of(const Scalar& s, double* out) {
    if (s.type == GgufValueType::FLOAT32 || s.type == GgufValueType::FLOAT64) {
        *out = s.f64;
        return true;
    }
    if (is_unsigned(s.type)) {
        *out = static_cast<double>(s.u64);
        return true;
    }
    if (is_signed(s.type)) {
        *out = static_cast<double>(s.i64);
        return true;
    }
    return false;
}

}  // namespace

bool GgufValue::get_int(int64_t* out) const { return int_of(Scalar{type, u64, i64, f64}, out); }

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

bool GgufValue::get_float(double* out) const { return float_of(Scalar{type, u64, i64, f64}, out); }

size_t GgufValue::array_size() const {
    if (elem_type == GgufValueType::STRING) return strings.size();
    if (elem_type == GgufValueType::ARRAY) return arrays.size();
    return packed.size() / gguf_scalar_size(elem_type);
}

GgufValue GgufValue::item(size_t i) const {
    if (elem_type == GgufValueType::STRING) return make_string(strings[i]);
    if (elem_type == GgufValueType::ARRAY) return arrays[i];
    const Scalar s = load_scalar(elem_type, packed.data() + i * gguf_scalar_size(elem_type));
    GgufValue x;
    x.type = s.type;
    x.u64 = s.u64;
    x.i64 = s.i64;
    x.f64 = s.f64;
    return x;
}

bool GgufValue::item_int(size_t i, int64_t* out) const {
    const size_t size = gguf_scalar_size(elem_type);
    return size != 0 && int_of(load_scalar(elem_type, packed.data() + i * size), out);
}

bool GgufValue::item_float(size_t i, double* out) const {
    const size_t size = gguf_scalar_size(elem_type);
    return size != 0 && float_of(load_scalar(elem_type, packed.data() + i * size), out);
}

static std::string quote(const std::string& s, size_t max_bytes = 120) { return quote_text(s, max_bytes); }

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
                out += elem_type == GgufValueType::STRING ? quote(strings[i], 40) : item(i).to_string(max_items);
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
    if (elem_type == GgufValueType::STRING) {
        for (GgufValue& v : items) x.strings.push_back(std::move(v.str));
    } else if (elem_type == GgufValueType::ARRAY) {
        x.arrays = std::move(items);
    } else {
        const size_t size = gguf_scalar_size(elem_type);
        x.packed.resize(items.size() * size);
        for (size_t i = 0; i < items.size(); ++i) {
            assert(items[i].type == elem_type);
            store_scalar(elem_type, items[i], x.packed.data() + i * size);
        }
    }
    return x;
}

}  // namespace ls
