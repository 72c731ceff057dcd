// GGUF v3 writer: metadata and tensors go to a staging file (engine/util/safe_write.h) that takes
// the target's name only when complete, so an interrupted write never leaves a half-written file.
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/util/safe_write.h"

namespace ls {
namespace {

// Writes to a file, or appends to bytes in memory.
class Out {
public:
    explicit Out(std::FILE* f) : f_(f) {}
    explicit Out(std::vector<uint8_t>* memory) : memory_(memory) {}
    bool ok() const { return ok_; }
    int error() const { return errno_; }  // of the first failed write
    uint64_t pos() const { return pos_; }

    void bytes(const void* p, size_t n) {
        if (memory_ && n) memory_->insert(memory_->end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
        else if (ok_ && n && std::fwrite(p, 1, n, f_) != n) ok_ = false, errno_ = errno;
        pos_ += n;
    }
    template <class T>
    void put(T v) { bytes(&v, sizeof v); }
    void str(const std::string& s) {
        put<uint64_t>(s.size());
        bytes(s.data(), s.size());
    }
    void pad_to(uint64_t alignment) {
        static const uint8_t zeros[256] = {};
        while (pos_ % alignment) bytes(zeros, std::min<uint64_t>(alignment - pos_ % alignment, sizeof zeros));
    }

private:
    std::FILE* f_ = nullptr;
    std::vector<uint8_t>* memory_ = nullptr;
    uint64_t pos_ = 0;
    bool ok_ = true;
    int errno_ = 0;
};

Status check_value(const GgufValue& v, const std::string& key, int depth) {
    if (depth > 16) return make_error(ErrorCode::kInternal, key + ": arrays nested too deep");
    if (v.type == GgufValueType::ARRAY) {
        for (const GgufValue& item : v.arrays) {
            if (item.type != v.elem_type)
                return make_error(ErrorCode::kInternal,
                                  fmt::format("{}: array of {} holds a {}", key, gguf_value_type_name(v.elem_type),
                                              gguf_value_type_name(item.type)));
            if (Status s = check_value(item, key, depth + 1); !s) return s;
        }
        if (v.elem_type != GgufValueType::STRING && !v.strings.empty())
            return make_error(ErrorCode::kInternal, key + ": strings in a non-string array");
        if (v.elem_type != GgufValueType::ARRAY && !v.arrays.empty())
            return make_error(ErrorCode::kInternal, key + ": arrays in an array of " + gguf_value_type_name(v.elem_type));
        const size_t scalar_size = gguf_scalar_size(v.elem_type);
        if (scalar_size == 0 ? !v.packed.empty() : v.packed.size() % scalar_size != 0)
            return make_error(ErrorCode::kInternal, fmt::format("{}: {} packed bytes in an array of {}", key,
                                                                v.packed.size(), gguf_value_type_name(v.elem_type)));
    }
    return {};
}

void write_value(Out& out, const GgufValue& v) {
    switch (v.type) {
        case GgufValueType::UINT8: out.put<uint8_t>(static_cast<uint8_t>(v.u64)); break;
        case GgufValueType::INT8: out.put<int8_t>(static_cast<int8_t>(v.i64)); break;
        case GgufValueType::UINT16: out.put<uint16_t>(static_cast<uint16_t>(v.u64)); break;
        case GgufValueType::INT16: out.put<int16_t>(static_cast<int16_t>(v.i64)); break;
        case GgufValueType::UINT32: out.put<uint32_t>(static_cast<uint32_t>(v.u64)); break;
        case GgufValueType::INT32: out.put<int32_t>(static_cast<int32_t>(v.i64)); break;
        case GgufValueType::UINT64: out.put<uint64_t>(v.u64); break;
        case GgufValueType::INT64: out.put<int64_t>(v.i64); break;
        case GgufValueType::FLOAT32: out.put<float>(static_cast<float>(v.f64)); break;
        case GgufValueType::FLOAT64: out.put<double>(v.f64); break;
        case GgufValueType::BOOL: out.put<uint8_t>(v.u64 ? 1 : 0); break;
        case GgufValueType::STRING: out.str(v.str); break;
        case GgufValueType::ARRAY:
            out.put<uint32_t>(static_cast<uint32_t>(v.elem_type));
            out.put<uint64_t>(v.array_size());
            if (v.elem_type == GgufValueType::STRING)
                for (const std::string& s : v.strings) out.str(s);
            else if (v.elem_type == GgufValueType::ARRAY)
                for (const GgufValue& item : v.arrays) write_value(out, item);
            else
                out.bytes(v.packed.data(), v.packed.size());  // already in the file's layout
            break;
    }
}

// Checks the metadata and tensors and returns each tensor's offset in the data section.
Result<std::vector<uint64_t>> layout_gguf(const std::vector<GgufKV>& metadata, const std::vector<GgufWriteTensor>& tensors,
                                          uint32_t alignment, bool* has_alignment_key_out) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        return make_error(ErrorCode::kInternal, fmt::format("alignment {} is not a power of two", alignment));
    std::set<std::string> keys;
    bool has_alignment_key = false;
    for (const GgufKV& kv : metadata) {
        if (!keys.insert(kv.key).second) return make_error(ErrorCode::kInternal, "duplicate metadata key " + kv.key);
        if (kv.key == "general.alignment") {
            has_alignment_key = true;
            if (kv.value.type != GgufValueType::UINT32 || kv.value.u64 != alignment)
                return make_error(ErrorCode::kInternal, "general.alignment disagrees with the alignment argument");
        }
        if (Status s = check_value(kv.value, kv.key, 0); !s) return s.error();
    }
    std::set<std::string> names;
    std::vector<uint64_t> offsets;
    uint64_t data_size = 0;
    for (const GgufWriteTensor& t : tensors) {
        if (!names.insert(t.name).second) return make_error(ErrorCode::kInternal, "duplicate tensor name " + t.name);
        if (t.ne.empty() || t.ne.size() > kGgmlMaxDims)
            return make_error(ErrorCode::kInternal, fmt::format("tensor {} has {} dims, expected 1..4", t.name, t.ne.size()));
        const GgmlTypeTraits* traits = ggml_type_traits(t.type);
        if (!traits) return make_error(ErrorCode::kInternal, "tensor " + t.name + " has an unknown type");
        int64_t rows = 1;
        for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
        uint64_t row_bytes = 0;
        if (!ggml_row_bytes(t.type, t.ne[0], &row_bytes))
            return make_error(ErrorCode::kInternal,
                              fmt::format("tensor {}: ne[0] {} is not a multiple of the {} block size", t.name, t.ne[0], traits->name));
        if (row_bytes * static_cast<uint64_t>(rows) != t.n_bytes)
            return make_error(ErrorCode::kInternal, fmt::format("tensor {}: {} bytes given, expected {}", t.name, t.n_bytes,
                                                                row_bytes * static_cast<uint64_t>(rows)));
        offsets.push_back(data_size);
        data_size += t.n_bytes;
        data_size += (alignment - data_size % alignment) % alignment;
    }
    *has_alignment_key_out = has_alignment_key;
    return offsets;
}

// Tensor data comes from t.data, or from `produce` (one tensor at a time) when it is given.
Status emit_gguf(Out& out, const std::vector<GgufKV>& metadata, const std::vector<GgufWriteTensor>& tensors,
                 uint32_t alignment, bool has_alignment_key, const std::vector<uint64_t>& offsets,
                 const GgufTensorProducer* produce = nullptr) {
    out.put<uint32_t>(0x46554747);
    out.put<uint32_t>(3);
    out.put<uint64_t>(tensors.size());
    out.put<uint64_t>(metadata.size() + ((alignment != 32 && !has_alignment_key) ? 1 : 0));
    for (const GgufKV& kv : metadata) {
        out.str(kv.key);
        out.put<uint32_t>(static_cast<uint32_t>(kv.value.type));
        write_value(out, kv.value);
    }
    if (alignment != 32 && !has_alignment_key) {
        out.str("general.alignment");
        out.put<uint32_t>(static_cast<uint32_t>(GgufValueType::UINT32));
        out.put<uint32_t>(alignment);
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
        const GgufWriteTensor& t = tensors[i];
        out.str(t.name);
        out.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
        for (int64_t n : t.ne) out.put<int64_t>(n);
        out.put<uint32_t>(static_cast<uint32_t>(t.type));
        out.put<uint64_t>(offsets[i]);
    }
    out.pad_to(alignment);
    std::vector<uint8_t> buffer;
    for (size_t i = 0; i < tensors.size() && out.ok(); ++i) {
        const GgufWriteTensor& t = tensors[i];
        const void* data = t.data;
        if (produce) {
            buffer.assign(t.n_bytes, 0);
            if (Status s = (*produce)(i, buffer.data()); !s) return s;
            data = buffer.data();
        }
        out.bytes(data, t.n_bytes);
        out.pad_to(alignment);
    }
    return {};
}

}  // namespace

Status gguf_write(const std::string& path, const std::vector<GgufKV>& metadata,
                  const std::vector<GgufWriteTensor>& tensors, uint32_t alignment, bool overwrite) {
    return gguf_write_streamed(path, metadata, tensors, nullptr, alignment, overwrite);
}

Status gguf_write_streamed(const std::string& path, const std::vector<GgufKV>& metadata,
                           const std::vector<GgufWriteTensor>& tensors, const GgufTensorProducer& produce,
                           uint32_t alignment, bool overwrite) {
    // Everything is validated before the disk is touched.
    bool has_alignment_key = false;
    auto offsets = layout_gguf(metadata, tensors, alignment, &has_alignment_key);
    if (!offsets) return offsets.error();
    auto staged = StagedFile::create(path, overwrite);
    if (!staged) return staged.error();
    Out out(staged.value()->file());
    if (Status s = emit_gguf(out, metadata, tensors, alignment, has_alignment_key, offsets.value(), produce ? &produce : nullptr);
        !s)
        return s;
    if (!out.ok()) return make_error(ErrorCode::kIo, fmt::format("writing {} failed: {}", path, std::strerror(out.error())));
    return staged.value()->commit();
}

Result<std::vector<uint8_t>> gguf_to_bytes(const std::vector<GgufKV>& metadata, const std::vector<GgufWriteTensor>& tensors,
                                           uint32_t alignment) {
    bool has_alignment_key = false;
    auto offsets = layout_gguf(metadata, tensors, alignment, &has_alignment_key);
    if (!offsets) return offsets.error();
    std::vector<uint8_t> bytes;
    Out out(&bytes);
    if (Status s = emit_gguf(out, metadata, tensors, alignment, has_alignment_key, offsets.value()); !s) return s.error();
    return bytes;
}

}  // namespace ls
