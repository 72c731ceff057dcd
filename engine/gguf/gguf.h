// GGUF (v2/v3) reader and writer. The reader maps the file and validates every length, count,
// offset and size before use; a malformed file gives an Error naming the field and byte offset.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/common/ggml_type.h"
#include "engine/util/result.h"

namespace ls {

enum class GgufValueType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

const char* gguf_value_type_name(GgufValueType type);  // "u32", "str", "arr", ...
bool gguf_value_type_is_integer(GgufValueType type);

// Bytes one number or bool element takes in a file (and in GgufValue::packed); 0 for STRING and
// ARRAY.
size_t gguf_scalar_size(GgufValueType type);

// One metadata value. Owns its data. Arrays keep their element type; numeric array elements
// are widened to int64/uint64/double on access.
struct GgufValue {
    GgufValueType type = GgufValueType::UINT8;

    // Scalars (the member matching `type`).
    uint64_t u64 = 0;   // UINT8/16/32/64, BOOL
    int64_t i64 = 0;    // INT8/16/32/64
    double f64 = 0;     // FLOAT32/64
    std::string str;    // STRING

    // ARRAY: elements of `elem_type`, held by the one of these vectors that fits that type.
    GgufValueType elem_type = GgufValueType::UINT8;
    std::vector<std::string> strings;  // STRING elements
    std::vector<GgufValue> arrays;     // ARRAY elements (nested arrays)
    // Number and bool elements, packed as in the file (little-endian, gguf_scalar_size bytes
    // each): a vocabulary's scores and token types stay two small buffers instead of tens of
    // thousands of values. Read them with item() or item_int() / item_float().
    std::vector<uint8_t> packed;

    bool is_array() const { return type == GgufValueType::ARRAY; }
    size_t array_size() const;
    // Element i (< array_size()) as a value of type elem_type.
    GgufValue item(size_t i) const;
    // get_int / get_float of element i, without making a value of it.
    bool item_int(size_t i, int64_t* out) const;
    bool item_float(size_t i, double* out) const;

    // Numeric views; false when the value is not of a compatible kind.
    bool get_int(int64_t* out) const;     // any integer or bool that fits in int64
    bool get_uint(uint64_t* out) const;   // any non-negative integer or bool
    bool get_float(double* out) const;    // any integer or float
    std::string to_string(size_t max_items = 8) const;  // human-readable, long arrays abbreviated

    static GgufValue make_u32(uint32_t v);
    static GgufValue make_i32(int32_t v);
    static GgufValue make_u64(uint64_t v);
    static GgufValue make_f32(float v);
    static GgufValue make_bool(bool v);
    static GgufValue make_string(std::string v);
    static GgufValue make_string_array(std::vector<std::string> v);
    // Items must all be of elem_type (numbers and bools are packed by elem_type's width).
    static GgufValue make_array(GgufValueType elem_type, std::vector<GgufValue> items);
};

struct GgufKV {
    std::string key;
    GgufValue value;
};

inline constexpr int kGgmlMaxDims = 4;

struct GgufTensorInfo {
    std::string name;
    uint32_t n_dims = 0;
    int64_t ne[kGgmlMaxDims] = {1, 1, 1, 1};  // ggml order: ne[0] varies fastest
    GgmlType type = GgmlType::F32;
    uint64_t offset = 0;         // relative to the start of the data section
    uint64_t n_bytes = 0;        // size of the data
    const uint8_t* data = nullptr;  // points into the mapped file

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

class MappedFile;

class GgufFile {
public:
    // Maps and validates `path`. Errors are kBadInput with the field and byte offset.
    static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
    // Parses a copy of `bytes` (for tests and fuzzing). `name` appears in messages.
    static Result<std::unique_ptr<GgufFile>> parse(std::vector<uint8_t> bytes, std::string name = "<memory>");
    // Parses a file's header alone: `header` holds its first bytes, up to (at least) the end of the
    // tensor infos, and `file_size` is the whole file's size, against which the tensors' data are
    // checked as open() checks them. Every tensor's data is then null (has_data() is false): what
    // a client holds of a model that runs on a server. `name` appears in messages.
    static Result<std::unique_ptr<GgufFile>> parse_header(std::vector<uint8_t> header, uint64_t file_size,
                                                          std::string name);

    ~GgufFile();
    GgufFile(const GgufFile&) = delete;
    GgufFile& operator=(const GgufFile&) = delete;

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // absolute offset of the data section
    uint64_t file_size() const { return file_size_; }
    // False for a header parsed alone (parse_header): its tensors' data are null.
    bool has_data() const { return !header_only_; }
    // The header's bytes: everything before the data section (what parse_header takes).
    std::string_view header_bytes() const {
        return {reinterpret_cast<const char*>(base_), static_cast<size_t>(std::min(data_offset_, size_))};
    }

    const std::vector<GgufKV>& metadata() const { return kvs_; }
    const GgufValue* find(std::string_view key) const;

    // Typed lookups; return `fallback` when the key is absent or of another kind.
    std::string get_string(std::string_view key, std::string fallback = "") const;
    int64_t get_int(std::string_view key, int64_t fallback) const;
    double get_float(std::string_view key, double fallback) const;
    bool get_bool(std::string_view key, bool fallback) const;

    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
    const GgufTensorInfo* find_tensor(std::string_view name) const;

    // For a pass that reads tensor data once, front to back (a comparison of two dumps): gives
    // back the pages of [data, data + n_bytes) once read, and those the kernel mapped again
    // behind them (MappedFile::release_behind), so that the pass holds little of the file in
    // memory. Reading them again still gives the file's bytes. A no-op on a file parsed from memory.
    void release_behind(const uint8_t* data, uint64_t n_bytes) const;
    // For data read again and again (a model's weights on the CPU): the file moved into memory of
    // the process's own, at the same addresses (MappedFile::keep_in_memory); what was done, for the
    // user. "" for a file parsed from memory.
    std::string keep_in_memory() const;
    // What keep_in_memory did, "mapped" before it was asked (this never asks); "" as above.
    std::string residency() const;
    bool in_memory() const;
    // The file offset of `data` (a pointer into this file's mapping), or -1 when it is not one
    // (a file parsed from memory, or a pointer elsewhere).
    int64_t file_offset_of(const uint8_t* data) const;

private:
    GgufFile() = default;
    Status parse_all();

    std::string path_;
    std::unique_ptr<MappedFile> map_;
    std::vector<uint8_t> owned_;  // when parsed from memory
    const uint8_t* base_ = nullptr;
    uint64_t size_ = 0;       // the bytes at base_
    uint64_t file_size_ = 0;  // the file's: size_, or what parse_header was told
    bool header_only_ = false;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    std::vector<GgufKV> kvs_;
    std::vector<GgufTensorInfo> tensors_;
    std::map<std::string, size_t, std::less<>> kv_index_;
    std::map<std::string, size_t, std::less<>> tensor_index_;
};

// A tensor to write: its bytes must already be in the stored type's layout.
struct GgufWriteTensor {
    std::string name;
    GgmlType type = GgmlType::F32;
    std::vector<int64_t> ne;   // ggml order, 1..4 dims
    const void* data = nullptr;
    uint64_t n_bytes = 0;
};

// Writes a GGUF v3 file through a staging file that takes the name `path` only when complete
// (engine/util/safe_write.h), so an interrupted write never leaves a half file. An existing file
// is replaced only with `overwrite`, and only a regular file (kUsage otherwise). Validates that
// every tensor's byte size matches its type and ne.
Status gguf_write(const std::string& path, const std::vector<GgufKV>& metadata,
                  const std::vector<GgufWriteTensor>& tensors, uint32_t alignment = 32, bool overwrite = false);
// The same, for data made one tensor at a time (files larger than memory): each tensor's data
// pointer is ignored and produce(i, out) fills its n_bytes at `out`; an error it returns stops
// the write and leaves no file. An empty `produce` writes each tensor's data, as gguf_write does.
using GgufTensorProducer = std::function<Status(size_t index, uint8_t* out)>;
Status gguf_write_streamed(const std::string& path, const std::vector<GgufKV>& metadata,
                           const std::vector<GgufWriteTensor>& tensors, const GgufTensorProducer& produce,
                           uint32_t alignment = 32, bool overwrite = false);
// The same file's bytes, in memory (GgufFile::parse reads them).
Result<std::vector<uint8_t>> gguf_to_bytes(const std::vector<GgufKV>& metadata, const std::vector<GgufWriteTensor>& tensors,
                                           uint32_t alignment = 32);

}  // namespace ls
