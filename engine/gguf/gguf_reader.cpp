// GGUF reader: parses the header, metadata and tensor infos of a mapped file, checking every
// count, length, offset and size against the file before using it.
#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <type_traits>

#include "engine/gguf/gguf.h"
#include "engine/gguf/mapped_file.h"
#include "engine/util/quote.h"

namespace ls {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read little-endian
constexpr int kMaxArrayDepth = 16;

// A field's name for messages: a string, or a callable that builds one. Names are built only when
// a read fails, so that reading the thousands of entries of a vocabulary formats nothing.
template <class Field>
std::string field_name(const Field& field) {
    if constexpr (std::is_invocable_v<const Field&>) {
        return field();
    } else {
        return std::string(field);
    }
}

// Bounds-checked little-endian cursor over the file bytes. Every read names the field it reads,
// so an error can say what was being read and where.
class Cursor {
public:
    Cursor(const uint8_t* base, uint64_t size, const std::string& path) : base_(base), size_(size), path_(path) {}

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }

    Error error_at(uint64_t offset, const std::string& what) const {
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{}: malformed GGUF at byte {}: {}", path_, offset, what));
    }

    template <class Field>
    Status need(uint64_t n, const Field& field) const {
        if (n > remaining())
            return error_at(pos_, fmt::format("{} needs {} bytes but the file ends after {} (file size {})",
                                              field_name(field), n, remaining(), size_));
        return {};
    }

    template <class T, class Field>
    Status read(T* out, const Field& field) {
        if (Status s = need(sizeof(T), field); !s) return s;
        std::memcpy(out, base_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return {};
    }

    template <class Field>
    Status read_string(std::string* out, const Field& field) {
        uint64_t start = pos_;
        uint64_t len = 0;
        if (Status s = read(&len, [&] { return field_name(field) + " (string length)"; }); !s) return s;
        if (len > remaining()) {
            pos_ = start;
            return error_at(start, fmt::format("{}: string length {} is past the end of the file ({} bytes left)",
                                               field_name(field), len, remaining() - 8));
        }
        out->assign(reinterpret_cast<const char*>(base_ + pos_), len);
        pos_ += len;
        return {};
    }

    // The next n bytes, already known to be in the file; the cursor moves past them.
    const uint8_t* take(uint64_t n) {
        assert(n <= remaining());
        const uint8_t* p = base_ + pos_;
        pos_ += n;
        return p;
    }

private:
    const uint8_t* base_;
    uint64_t size_;
    uint64_t pos_ = 0;
    const std::string& path_;
};

// Smallest encoded size of one value of `type`: bounds array counts by the bytes left.
uint64_t min_encoded_size(GgufValueType type) {
    switch (type) {
        case GgufValueType::UINT8: case GgufValueType::INT8: case GgufValueType::BOOL: return 1;
        case GgufValueType::UINT16: case GgufValueType::INT16: return 2;
        case GgufValueType::UINT32: case GgufValueType::INT32: case GgufValueType::FLOAT32: return 4;
        case GgufValueType::UINT64: case GgufValueType::INT64: case GgufValueType::FLOAT64: return 8;
        case GgufValueType::STRING: return 8;
        case GgufValueType::ARRAY: return 12;
    }
    return 1;
}

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::FLOAT64); }

Status read_value(Cursor& c, GgufValueType type, GgufValue* out, const std::string& field, int depth);

Status read_value(Cursor& c, GgufValueType type, GgufValue* out, const std::string& field, int depth) {
    out->type = type;
    switch (type) {
        case GgufValueType::UINT8: { uint8_t v; if (Status s = c.read(&v, field); !s) return s; out->u64 = v; return {}; }
        case GgufValueType::INT8: { int8_t v; if (Status s = c.read(&v, field); !s) return s; out->i64 = v; return {}; }
        case GgufValueType::UINT16: { uint16_t v; if (Status s = c.read(&v, field); !s) return s; out->u64 = v; return {}; }
        case GgufValueType::INT16: { int16_t v; if (Status s = c.read(&v, field); !s) return s; out->i64 = v; return {}; }
        case GgufValueType::UINT32: { uint32_t v; if (Status s = c.read(&v, field); !s) return s; out->u64 = v; return {}; }
        case GgufValueType::INT32: { int32_t v; if (Status s = c.read(&v, field); !s) return s; out->i64 = v; return {}; }
        case GgufValueType::UINT64: { uint64_t v; if (Status s = c.read(&v, field); !s) return s; out->u64 = v; return {}; }
        case GgufValueType::INT64: { int64_t v; if (Status s = c.read(&v, field); !s) return s; out->i64 = v; return {}; }
        case GgufValueType::FLOAT32: { float v; if (Status s = c.read(&v, field); !s) return s; out->f64 = v; return {}; }
        case GgufValueType::FLOAT64: { double v; if (Status s = c.read(&v, field); !s) return s; out->f64 = v; return {}; }
        case GgufValueType::BOOL: {
            uint64_t at = c.pos();
            uint8_t v;
            if (Status s = c.read(&v, field); !s) return s;
            if (v > 1) return c.error_at(at, fmt::format("{}: bool value {} is neither 0 nor 1", field, v));
            out->u64 = v;
            return {};
        }
        case GgufValueType::STRING: return c.read_string(&out->str, field);
        case GgufValueType::ARRAY: {
            if (depth >= kMaxArrayDepth)
                return c.error_at(c.pos(), fmt::format("{}: arrays nested deeper than {}", field, kMaxArrayDepth));
            uint64_t at = c.pos();
            uint32_t elem = 0;
            if (Status s = c.read(&elem, field + " (array element type)"); !s) return s;
            if (!valid_value_type(elem))
                return c.error_at(at, fmt::format("{}: unknown array element type {}", field, elem));
            out->elem_type = static_cast<GgufValueType>(elem);
            uint64_t count_at = c.pos();
            uint64_t count = 0;
            if (Status s = c.read(&count, field + " (array count)"); !s) return s;
            uint64_t min_size = min_encoded_size(out->elem_type);
            if (count > c.remaining() / min_size)
                return c.error_at(count_at, fmt::format("{}: array count {} cannot fit in the {} bytes left",
                                                        field, count, c.remaining()));
            if (out->elem_type == GgufValueType::STRING) {
                out->strings.resize(count);
                for (uint64_t i = 0; i < count; ++i)
                    if (Status s = c.read_string(&out->strings[i], [&] { return fmt::format("{}[{}]", field, i); }); !s)
                        return s;
            } else if (out->elem_type == GgufValueType::ARRAY) {
                out->arrays.resize(count);
                for (uint64_t i = 0; i < count; ++i)
                    if (Status s = read_value(c, out->elem_type, &out->arrays[i], field, depth + 1); !s) return s;
            } else {
                // Numbers and bools are copied as stored; the count check above keeps them in the
                // file (min_size is their size).
                const uint64_t start = c.pos();
                const uint8_t* p = c.take(count * min_size);
                if (out->elem_type == GgufValueType::BOOL) {
                    for (uint64_t i = 0; i < count; ++i)
                        if (p[i] > 1)
                            return c.error_at(start + i, fmt::format("{}: bool value {} is neither 0 nor 1", field, p[i]));
                }
                out->packed.assign(p, p + count * min_size);
            }
            return {};
        }
    }
    return c.error_at(c.pos(), field + ": unknown value type");
}

}  // namespace

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
    auto map = MappedFile::open(path);
    if (!map) return map.error();
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->path_ = path;
    f->map_ = std::move(map.value());
    f->base_ = f->map_->data();
    f->size_ = f->file_size_ = f->map_->size();
    if (Status s = f->parse_all(); !s) return s.error();
    return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::parse(std::vector<uint8_t> bytes, std::string name) {
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->path_ = std::move(name);
    f->owned_ = std::move(bytes);
    f->base_ = f->owned_.data();
    f->size_ = f->file_size_ = f->owned_.size();
    if (Status s = f->parse_all(); !s) return s.error();
    return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::parse_header(std::vector<uint8_t> header, uint64_t file_size, std::string name) {
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->path_ = std::move(name);
    f->owned_ = std::move(header);
    f->base_ = f->owned_.data();
    f->size_ = f->owned_.size();
    f->file_size_ = file_size;
    f->header_only_ = true;
    if (f->size_ > file_size)
        return make_error(ErrorCode::kBadInput, fmt::format("{}: a header of {} bytes for a file of {}", f->path_, f->size_, file_size));
    if (Status s = f->parse_all(); !s) return s.error();
    return f;
}

GgufFile::~GgufFile() = default;

int64_t GgufFile::file_offset_of(const uint8_t* data) const {
    if (!map_ || !data || data < base_ || data >= base_ + size_) return -1;
    return static_cast<int64_t>(data - base_);
}

void GgufFile::release_behind(const uint8_t* data, uint64_t n_bytes) const {
    if (map_) map_->release_behind(data, n_bytes);
}

std::string GgufFile::keep_in_memory() const { return map_ ? map_->keep_in_memory() : ""; }
std::string GgufFile::residency() const { return map_ ? map_->residency() : ""; }
bool GgufFile::in_memory() const { return map_ && map_->in_memory(); }

Status GgufFile::parse_all() {
    Cursor c(base_, size_, path_);
    if (size_ == 0) return c.error_at(0, "the file is empty (expected the GGUF magic)");

    uint32_t magic = 0;
    if (Status s = c.read(&magic, "magic"); !s) return s;
    if (magic != kMagic) {
        return c.error_at(0, fmt::format("magic is {:02x} {:02x} {:02x} {:02x}, expected \"GGUF\"; this is not a GGUF file",
                                         base_[0], base_[1], base_[2], base_[3]));
    }
    if (Status s = c.read(&version_, "version"); !s) return s;
    if (version_ == 0 || (version_ & 0xFFFF) == 0) {
        return c.error_at(4, fmt::format("version field is 0x{:08x}: this GGUF is big-endian, which is not supported; "
                                         "convert it to a little-endian GGUF", version_));
    }
    if (version_ == 1)
        return c.error_at(4, "GGUF version 1 (32-bit counts) is not supported; re-convert the model to GGUF v3");
    if (version_ > 3)
        return c.error_at(4, fmt::format("GGUF version {} is newer than the supported versions 2 and 3", version_));

    uint64_t n_tensors = 0, n_kv = 0;
    if (Status s = c.read(&n_tensors, "tensor count"); !s) return s;
    if (Status s = c.read(&n_kv, "metadata count"); !s) return s;
    // Each tensor info takes at least 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset) bytes.
    if (n_tensors > c.remaining() / 24)
        return c.error_at(8, fmt::format("tensor count {} cannot fit in the {} bytes left", n_tensors, c.remaining()));
    uint64_t at = 16;
    // Each key/value takes at least 8 (key length) + 4 (type) + 1 byte.
    if (n_kv > c.remaining() / 13)
        return c.error_at(at, fmt::format("metadata count {} cannot fit in the {} bytes left", n_kv, c.remaining()));

    kvs_.resize(n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) {
        GgufKV& kv = kvs_[i];
        uint64_t key_at = c.pos();
        if (Status s = c.read_string(&kv.key, [&] { return fmt::format("metadata key #{}", i); }); !s) return s;
        if (!kv_index_.emplace(kv.key, i).second)
            return c.error_at(key_at, fmt::format("metadata key {} appears twice", quote_text(kv.key)));
        uint64_t type_at = c.pos();
        uint32_t type = 0;
        if (Status s = c.read(&type, [&] { return fmt::format("type of metadata {}", quote_text(kv.key)); }); !s) return s;
        if (!valid_value_type(type))
            return c.error_at(type_at, fmt::format("metadata {} has unknown value type {}", quote_text(kv.key), type));
        if (Status s = read_value(c, static_cast<GgufValueType>(type), &kv.value, fmt::format("metadata {}", quote_text(kv.key)), 0); !s)
            return s;
    }

    if (const GgufValue* a = find("general.alignment")) {
        if (a->type != GgufValueType::UINT32)
            return c.error_at(0, fmt::format("general.alignment has type {}, expected u32", gguf_value_type_name(a->type)));
        if (a->u64 == 0 || (a->u64 & (a->u64 - 1)) != 0)
            return c.error_at(0, fmt::format("general.alignment is {}, expected a non-zero power of two", a->u64));
        alignment_ = a->u64;
    }

    tensors_.resize(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) {
        GgufTensorInfo& t = tensors_[i];
        uint64_t info_at = c.pos();
        if (Status s = c.read_string(&t.name, [&] { return fmt::format("name of tensor #{}", i); }); !s) return s;
        if (!tensor_index_.emplace(t.name, i).second)
            return c.error_at(info_at, fmt::format("tensor name {} appears twice", quote_text(t.name)));
        const auto what = [&] { return fmt::format("tensor {}", quote_text(t.name)); };
        uint64_t dims_at = c.pos();
        if (Status s = c.read(&t.n_dims, [&] { return what() + " n_dims"; }); !s) return s;
        if (t.n_dims == 0 || t.n_dims > kGgmlMaxDims)
            return c.error_at(dims_at, fmt::format("{} has n_dims {}, expected 1..{}", what(), t.n_dims, kGgmlMaxDims));
        int64_t n_elems = 1;
        for (uint32_t d = 0; d < t.n_dims; ++d) {
            uint64_t ne_at = c.pos();
            if (Status s = c.read(&t.ne[d], [&] { return fmt::format("{} ne[{}]", what(), d); }); !s) return s;
            if (t.ne[d] < 0)
                return c.error_at(ne_at, fmt::format("{} ne[{}] is negative ({})", what(), d, t.ne[d]));
            if (t.ne[d] != 0 && n_elems > INT64_MAX / t.ne[d])
                return c.error_at(ne_at, fmt::format("{}: the element count overflows 64 bits at ne[{}] = {}", what(), d, t.ne[d]));
            n_elems *= t.ne[d];
        }
        uint64_t type_at = c.pos();
        uint32_t type = 0;
        if (Status s = c.read(&type, [&] { return what() + " type"; }); !s) return s;
        const GgmlTypeTraits* traits = ggml_type_traits(type);
        if (!traits)
            return c.error_at(type_at, fmt::format("{} has unknown ggml type id {}", what(), type));
        t.type = static_cast<GgmlType>(type);
        if (t.ne[0] % traits->block_elems != 0)
            return c.error_at(dims_at, fmt::format("{}: ne[0] = {} is not a multiple of the {} block size {}",
                                                   what(), t.ne[0], traits->name, traits->block_elems));
        uint64_t n_blocks = static_cast<uint64_t>(n_elems) / traits->block_elems;
        if (n_blocks > UINT64_MAX / traits->block_bytes)
            return c.error_at(dims_at, fmt::format("{}: the byte size overflows 64 bits", what()));
        t.n_bytes = n_blocks * traits->block_bytes;
        uint64_t offset_at = c.pos();
        if (Status s = c.read(&t.offset, [&] { return what() + " offset"; }); !s) return s;
        if (t.offset % alignment_ != 0)
            return c.error_at(offset_at, fmt::format("{} offset {} is not a multiple of the alignment {}", what(), t.offset, alignment_));
    }

    // The data section starts at the next multiple of the alignment.
    uint64_t end_of_infos = c.pos();
    data_offset_ = end_of_infos + (alignment_ - end_of_infos % alignment_) % alignment_;
    uint64_t data_size = data_offset_ <= file_size_ ? file_size_ - data_offset_ : 0;
    if (n_tensors > 0 && data_offset_ > file_size_)
        return c.error_at(end_of_infos, fmt::format("the data section would start at byte {}, past the end of the file ({} bytes)",
                                                    data_offset_, file_size_));

    for (GgufTensorInfo& t : tensors_) {
        if (t.offset > data_size || t.n_bytes > data_size - t.offset)
            return c.error_at(data_offset_ + std::min(t.offset, data_size),
                              fmt::format("tensor {} data [{}, {}) of the data section runs past its end ({} bytes); the file is truncated or corrupt",
                                          quote_text(t.name), t.offset, t.offset + t.n_bytes, data_size));
        t.data = header_only_ ? nullptr : base_ + data_offset_ + t.offset;
    }

    // Tensors must not overlap.
    std::vector<const GgufTensorInfo*> by_offset;
    for (const GgufTensorInfo& t : tensors_) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
        const GgufTensorInfo* prev = by_offset[i - 1];
        const GgufTensorInfo* cur = by_offset[i];
        if (prev->n_bytes > 0 && cur->n_bytes > 0 && prev->offset + prev->n_bytes > cur->offset)
            return c.error_at(data_offset_ + cur->offset,
                              fmt::format("tensor {} [{}, {}) overlaps tensor {} [{}, {})", quote_text(cur->name), cur->offset,
                                          cur->offset + cur->n_bytes, quote_text(prev->name), prev->offset, prev->offset + prev->n_bytes));
    }
    return {};
}

const GgufValue* GgufFile::find(std::string_view key) const {
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

std::string GgufFile::get_string(std::string_view key, std::string fallback) const {
    const GgufValue* v = find(key);
    return v && v->type == GgufValueType::STRING ? v->str : fallback;
}

int64_t GgufFile::get_int(std::string_view key, int64_t fallback) const {
    const GgufValue* v = find(key);
    int64_t out;
    return v && v->get_int(&out) ? out : fallback;
}

double GgufFile::get_float(std::string_view key, double fallback) const {
    const GgufValue* v = find(key);
    double out;
    return v && v->get_float(&out) ? out : fallback;
}

bool GgufFile::get_bool(std::string_view key, bool fallback) const {
    const GgufValue* v = find(key);
    return v && v->type == GgufValueType::BOOL ? v->u64 != 0 : fallback;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace ls
