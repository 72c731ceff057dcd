// Reference runs as a folder of .npy files described by manifest.json, and the .npy reader/writer.
// The manifest format is documented here and in REFERENCE_FORMATS.md (keep them in step).
//
// manifest.json:
//   {
//     "format": "layerscope-npy",          required, exactly this
//     "version": 1,                        required, 1
//     "tensors": [                         required, non-empty, in execution order
//       { "name": "Qcur-0#3@1",            required: llama.cpp's tensor name; optional suffixes
//                                           "#k" (k-th tensor of that name in one graph evaluation)
//                                           and "@d" / "@d.u" (decode call d, ubatch u), as in dumps
//         "file": "Qcur-0_3_1.npy",        required: path relative to the folder, inside it
//         "order": "ggml",                 optional: "ggml" (default) or "row-major", see below
//         "ne": [64, 8, 6],                optional: ggml shape (ne0 fastest), checked against the file
//         "occurrence": 3, "decode": 1, "ubatch": 0,   optional, instead of (or agreeing with) suffixes
//         "op": "ROPE",                    optional, shown in the UI
//         "kind": "node" }                 optional: "node" (default), "input" or "logits"
//     ],
//     "prompt_tokens": [1, 403, ...],      optional
//     "generated_tokens": [...]            optional
//   }
// Unknown keys are ignored so that newer writers stay readable.
//
// Shapes. Every .npy file is C order (fortran_order False): its last axis varies fastest. ggml's
// ne0 varies fastest too, so the bytes are used as they are, in both orders; the orders differ in
// what the shape is checked against:
//   "ggml":      the numpy shape is ne reversed, as gguf-py shows ggml tensors: ne [64, 8, 6] is
//                numpy (6, 8, 64). Leading numpy axes of size 1 are ne's trailing 1s and may be
//                present or not. With "ne" given, the shapes must agree exactly (up to those 1s).
//   "row-major": the array has the natural PyTorch/NumPy shape of the activation, e.g. hidden
//                states (1, T, n_embd) or queries (T, n_head * head_dim), read as given: ne is the
//                reversed shape after dropping leading axes of size 1 (any number of them, so a
//                batch axis is fine), and a given "ne" only has to have the same element count: the
//                data are re-viewed, never transposed. An array whose axes are in another order than
//                ggml's (PyTorch (n_head, T, head_dim) for Qcur [head_dim, n_head, T]) must be
//                permuted before saving; the loader cannot know the permutation.
// More than 4 axes of size > 1 is an error in both orders.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <map>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "kernels/common/fp16.h"
#include "kernels/common/host_memory.h"
#include "engine/compare/reference_formats.h"
#include "engine/forward/event.h"
#include "engine/gguf/mapped_file.h"
#include "engine/util/safe_write.h"
#include "engine/util/quote.h"
#include "engine/util/input_file.h"

namespace ls {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A header longer than this is not something numpy writes for <= 32 axes; refuse rather than parse.
constexpr uint64_t kMaxHeader = 1 << 16;
constexpr int64_t kMaxDim = int64_t(1) << 48;
// A manifest entry is a few hundred bytes: this is over a hundred thousand tensors.
constexpr uint64_t kMaxManifestBytes = uint64_t{64} << 20;

Error bad(const std::string& what, const std::string& msg) {
    return make_error(ErrorCode::kBadInput, fmt::format("{}: {}", what, msg));
}

// A tiny reader for the Python dict literal of the .npy header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (6, 8, 64), }
struct HeaderParser {
    const std::string& s;
    size_t i = 0;
    std::string err;

    void ws() { while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i; }
    bool eat(char c) { ws(); if (i < s.size() && s[i] == c) { ++i; return true; } return false; }
    bool fail(std::string m) { if (err.empty()) err = std::move(m); return false; }

    bool str(std::string* out) {
        ws();
        if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return fail(fmt::format("expected a quoted string at offset {}", i));
        const char q = s[i++];
        size_t end = s.find(q, i);
        if (end == std::string::npos) return fail("unterminated string");
        *out = s.substr(i, end - i);
        i = end + 1;
        return true;
    }
    bool word(std::string* out) {
        ws();
        size_t b = i;
        while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
        *out = s.substr(b, i - b);
        return !out->empty() || fail(fmt::format("unexpected character at offset {}", b));
    }
    bool tuple(std::vector<int64_t>* out) {
        if (!eat('(')) return fail("shape must be a tuple like (6, 8, 64)");
        for (;;) {
            if (eat(')')) return true;
            ws();
            int64_t v = 0;
            size_t b = i;
            while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
                if (v > kMaxDim) return fail("a shape entry is absurdly large");
                v = v * 10 + (s[i++] - '0');
            }
            if (i == b) return fail(fmt::format("shape entry at offset {} is not a non-negative integer", b));
            if (i < s.size() && s[i] == 'L') ++i;  // Python 2 long literal
            if (v > kMaxDim) return fail("a shape entry is absurdly large");
            out->push_back(v);
            if (out->size() > 32) return fail("shape has more than 32 axes");
            if (eat(')')) return true;
            if (!eat(',')) return fail("shape entries must be separated by commas");
        }
    }
};

bool supported_dtype(const std::string& d, GgmlType* type, int* in_size) {
    if (d == "<f4") { *type = GgmlType::F32; *in_size = 4; return true; }
    if (d == "<f2") { *type = GgmlType::F32; *in_size = 2; return true; }
    if (d == "<f8") { *type = GgmlType::F32; *in_size = 8; return true; }
    if (d == "<i4") { *type = GgmlType::I32; *in_size = 4; return true; }
    if (d == "<i8") { *type = GgmlType::I64; *in_size = 8; return true; }
    return false;
}

// ne (ggml order, 4 entries) from a numpy shape: reversed, leading 1-axes dropped beyond 4.
bool ne_from_shape(std::vector<int64_t> shape, int64_t ne[4], std::string* why) {
    size_t lead = 0;
    while (shape.size() - lead > 4 && shape[lead] == 1) ++lead;
    if (shape.size() - lead > 4) {
        *why = fmt::format("shape {} has more than 4 axes of size > 1; ggml tensors have at most 4",
                           fmt::join(shape, "x"));
        return false;
    }
    for (int k = 0; k < 4; ++k) ne[k] = 1;
    const size_t n = shape.size() - lead;
    for (size_t k = 0; k < n; ++k) ne[k] = shape[shape.size() - 1 - k];
    return true;
}

std::string ne_text(const int64_t* ne) {
    int last = 3;
    while (last > 0 && ne[last] == 1) --last;
    std::string s = "[";
    for (int k = 0; k <= last; ++k) s += (k ? ", " : "") + std::to_string(ne[k]);
    return s + "]";
}

// Splits "Qcur-0#3@1.2" into the tensor's base name, occurrence, decode and ubatch; a malformed
// suffix is part of the name. has_occ/has_dec: whether the name had a '#' / '@' suffix.
void split_dump_name(const std::string& name, RefTensor* t, bool* has_occ, bool* has_dec) {
    DumpName parts;
    parse_dump_name(name, &parts);
    t->base_name = parts.base;
    t->occurrence = parts.occurrence;
    t->decode = parts.decode;
    t->ubatch = parts.ubatch;
    // What follows the base is exactly the suffixes that parsed.
    *has_occ = name.compare(parts.base.size(), 1, "#") == 0;
    *has_dec = name.find('@', parts.base.size()) != std::string::npos;
}

}  // namespace

int64_t NpyArray::n_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

Result<NpyArray> parse_npy(const uint8_t* data, size_t size, const std::string& what) {
    static const uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (size < 10 || std::memcmp(data, kMagic, 6) != 0)
        return bad(what, size < 10 && size >= 6 && std::memcmp(data, kMagic, 6) == 0
                             ? fmt::format("truncated .npy header ({} bytes)", size)
                             : "not a .npy file (no \\x93NUMPY magic)");
    const int major = data[6];
    if (major < 1 || major > 3)
        return bad(what, fmt::format(".npy format version {}.{} is not supported (1, 2 or 3 expected)", major, data[7]));
    const size_t len_size = major == 1 ? 2 : 4;
    if (size < 8 + len_size) return bad(what, fmt::format("truncated .npy header ({} bytes)", size));
    uint64_t header_len = data[8] | (uint64_t(data[9]) << 8);
    if (len_size == 4) header_len |= (uint64_t(data[10]) << 16) | (uint64_t(data[11]) << 24);
    const uint64_t header_start = 8 + len_size;
    if (header_len > kMaxHeader)
        return bad(what, fmt::format("header length {} is absurd (numpy writes a few hundred bytes; at most {} accepted)",
                                     header_len, kMaxHeader));
    if (header_start + header_len > size)
        return bad(what, fmt::format("truncated .npy header: it claims {} bytes but the file has {} after the preamble",
                                     header_len, size - header_start));
    const std::string header(reinterpret_cast<const char*>(data + header_start), header_len);

    HeaderParser p{header, 0, {}};
    std::string descr;
    bool fortran = false, have_descr = false, have_fortran = false, have_shape = false;
    std::vector<int64_t> shape;
    bool ok = p.eat('{') || p.fail("header is not a Python dict");
    while (ok) {
        if (p.eat('}')) break;
        std::string key;
        ok = p.str(&key) && (p.eat(':') || p.fail("expected ':' after key " + quote_text(key)));
        if (!ok) break;
        if (key == "descr") {
            ok = p.str(&descr);
            have_descr = true;
        } else if (key == "fortran_order") {
            std::string w;
            ok = p.word(&w) && ((w == "True" || w == "False") || p.fail("fortran_order must be True or False"));
            fortran = w == "True";
            have_fortran = true;
        } else if (key == "shape") {
            ok = p.tuple(&shape);
            have_shape = true;
        } else {
            ok = p.fail("unexpected key " + quote_text(key) + " (a .npy header has descr, fortran_order and shape)");
        }
        if (!ok || p.eat(',')) continue;
        if (p.eat('}')) break;
        ok = p.fail("expected ',' or '}' in the header dict");
    }
    if (!ok) return bad(what, "malformed .npy header: " + p.err);
    if (!have_descr || !have_fortran || !have_shape)
        return bad(what, fmt::format("malformed .npy header: missing '{}'",
                                     !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape"));
    NpyArray a;
    int in_size = 0;
    if (!supported_dtype(descr, &a.stored_type, &in_size))
        return bad(what, fmt::format("dtype {} is not supported; expected little-endian <f4, <f2, <f8, <i4 or <i8", quote_text(descr)));
    if (fortran)
        return bad(what, "the array is in Fortran order (fortran_order: True); save it C-ordered "
                         "(np.ascontiguousarray) so that the last axis varies fastest");
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d != 0 && n > std::numeric_limits<int64_t>::max() / 8 / d)
            return bad(what, fmt::format("shape ({}) is too large", fmt::join(shape, ", ")));
        n *= d;
    }
    if (n == 0) return bad(what, fmt::format("the array is empty (shape ({}))", fmt::join(shape, ", ")));
    const uint64_t data_bytes = static_cast<uint64_t>(n) * static_cast<uint64_t>(in_size);
    const uint64_t have = size - header_start - header_len;
    if (have != data_bytes)
        return bad(what, fmt::format("shape ({}) of {} needs {} data bytes but the file has {}",
                                     fmt::join(shape, ", "), descr, data_bytes, have));
    a.dtype = descr;
    a.shape = std::move(shape);
    const uint8_t* src = data + header_start + header_len;
    if (in_size == 2 || descr == "<f8") {
        const HostMemory host = available_host_memory();
        const uint64_t f32_bytes = static_cast<uint64_t>(n) * 4;
        if (host.known && f32_bytes > host.available_bytes)
            return bad(what, fmt::format("converting its {} values ({}) to f32 needs {}; {} available ({}). Save it as "
                                         "<f4 to have it read in place", n, descr, bytes_text(f32_bytes),
                                         bytes_text(host.available_bytes), host.source));
    }
    if (in_size == 2) {  // f16 -> f32 (exact)
        a.converted.resize(static_cast<size_t>(n) * 4);
        for (int64_t i = 0; i < n; ++i) {
            uint16_t h;
            std::memcpy(&h, src + 2 * i, 2);
            const float f = fp16_to_fp32(h);
            std::memcpy(a.converted.data() + 4 * i, &f, 4);
        }
    } else if (descr == "<f8") {
        a.converted.resize(static_cast<size_t>(n) * 4);
        for (int64_t i = 0; i < n; ++i) {
            double d;
            std::memcpy(&d, src + 8 * i, 8);
            const float f = static_cast<float>(d);
            std::memcpy(a.converted.data() + 4 * i, &f, 4);
        }
    } else {
        a.in_place = src;
    }
    return a;
}

Result<NpyArray> read_npy(const std::string& path) {
    auto file = MappedFile::open(path);
    if (!file) return file.error();
    if (file.value()->size() == 0) return bad(path, "empty file; expected a .npy array");
    auto a = parse_npy(file.value()->data(), static_cast<size_t>(file.value()->size()), path);
    if (!a) return a.error();
    if (a.value().in_place) a.value().owner = std::shared_ptr<const MappedFile>(std::move(file.value()));
    return a;
}

Status write_npy(std::FILE* out, const std::string& what, const std::string& dtype, const std::vector<int64_t>& shape,
                 const void* data) {
    int elem = dtype == "<f4" || dtype == "<i4" ? 4 : dtype == "<i8" || dtype == "<f8" ? 8 : dtype == "<f2" ? 2 : 0;
    if (elem == 0) return make_error(ErrorCode::kUsage, fmt::format("{}: cannot write dtype '{}'", what, dtype));
    std::string shape_text = "(";
    int64_t n = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
        shape_text += std::to_string(shape[i]) + (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
        n *= shape[i];
    }
    shape_text += ")";
    std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", dtype, shape_text);
    // numpy pads the header with spaces so that the data start at a multiple of 64, then '\n'.
    const size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    const uint16_t len = static_cast<uint16_t>(header.size());
    const char pre[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
    const size_t data_bytes = static_cast<size_t>(n) * elem;
    if (std::fwrite(pre, 1, 10, out) != 10 || std::fwrite(header.data(), 1, header.size(), out) != header.size() ||
        (data_bytes && std::fwrite(data, 1, data_bytes, out) != data_bytes))
        return make_error(ErrorCode::kIo, fmt::format("writing {} failed: {}", what, std::strerror(errno)));
    return {};
}

Status write_npy(const std::string& path, const std::string& dtype, const std::vector<int64_t>& shape,
                 const void* data, bool overwrite) {
    auto staged = StagedFile::create(path, overwrite);
    if (!staged) return staged.error();
    if (Status s = write_npy(staged.value()->file(), path, dtype, shape, data); !s) return s;
    return staged.value()->commit();
}

Result<NpyFolder> load_npy_folder(const std::string& dir) {
    const std::string manifest_path = (fs::path(dir) / "manifest.json").string();
    auto text = read_input_file(manifest_path, kMaxManifestBytes);
    if (!text) return text.error();
    json m;
    try {
        m = json::parse(text.value());
    } catch (const json::exception& e) {
        return bad(manifest_path, fmt::format("not valid JSON: {}", quote_text(e.what(), 300)));
    }
    auto merr = [&](const std::string& msg) { return bad(manifest_path, msg); };
    if (!m.is_object()) return merr("the manifest must be a JSON object");
    if (!m.contains("format") || m["format"] != "layerscope-npy")
        return merr("\"format\" must be \"layerscope-npy\"");
    if (!m.contains("version") || !m["version"].is_number_integer() || m["version"].get<int64_t>() != 1)
        return merr("\"version\" must be 1 (the only version this build reads)");
    if (!m.contains("tensors") || !m["tensors"].is_array() || m["tensors"].empty())
        return merr("\"tensors\" must be a non-empty array");

    NpyFolder folder;
    for (const char* key : {"prompt_tokens", "generated_tokens"}) {
        if (!m.contains(key)) continue;
        const json& a = m[key];
        std::vector<int32_t>& out = key[0] == 'p' ? folder.prompt_tokens : folder.generated_tokens;
        if (!a.is_array()) return merr(fmt::format("\"{}\" must be an array of token ids", key));
        for (const json& v : a) {
            if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
                return merr(fmt::format("\"{}\" must hold non-negative integer token ids", key));
            out.push_back(static_cast<int32_t>(v.get<int64_t>()));
        }
    }

    std::error_code ec;
    const fs::path root = fs::weakly_canonical(fs::path(dir), ec);
    std::vector<RefTensor> tensors;
    std::vector<std::vector<uint8_t>> storage;
    std::vector<std::shared_ptr<const void>> owners;  // the mapped .npy files read in place
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < m["tensors"].size(); ++i) {
        const json& e = m["tensors"][i];
        auto terr = [&](const std::string& msg) {
            std::string label = e.is_object() && e.contains("name") && e["name"].is_string()
                                    ? fmt::format("tensor {} ({})", i, quote_text(e["name"].get<std::string>()))
                                    : fmt::format("tensor {}", i);
            return bad(manifest_path, label + ": " + msg);
        };
        if (!e.is_object()) return terr("must be an object with \"name\" and \"file\"");
        if (!e.contains("name") || !e["name"].is_string() || e["name"].get<std::string>().empty())
            return terr("missing \"name\" (llama.cpp's tensor name, e.g. \"Qcur-0\")");
        if (!e.contains("file") || !e["file"].is_string() || e["file"].get<std::string>().empty())
            return terr("missing \"file\" (the .npy file, relative to the folder)");
        RefTensor t;
        bool has_occ = false, has_dec = false;
        split_dump_name(e["name"].get<std::string>(), &t, &has_occ, &has_dec);
        // Explicit fields; when a suffix says the same thing they must agree.
        struct Field { const char* key; int* value; bool from_suffix; int min; };
        for (Field f : {Field{"occurrence", &t.occurrence, has_occ, 1}, Field{"decode", &t.decode, has_dec, 0},
                        Field{"ubatch", &t.ubatch, has_dec, 0}}) {
            if (!e.contains(f.key)) continue;
            const json& v = e[f.key];
            if (!v.is_number_integer() || v.get<int64_t>() < f.min || v.get<int64_t>() > 1000000)
                return terr(fmt::format("\"{}\" must be an integer >= {}", f.key, f.min));
            const int x = static_cast<int>(v.get<int64_t>());
            if (f.from_suffix && x != *f.value)
                return terr(fmt::format("\"{}\": {} disagrees with the name's suffix ({})", f.key, x, *f.value));
            *f.value = x;
        }
        if (t.occurrence < 1) return terr("occurrence \"#0\" is not valid; the first tensor of a name has no suffix");
        t.name = event_dump_name(t.base_name, t.occurrence, t.decode, t.ubatch);
        if (!seen.emplace(t.name, i).second)
            return terr(fmt::format("names the same tensor as tensor {} ({})", seen[t.name], quote_text(t.name)));
        if (e.contains("op")) {
            if (!e["op"].is_string()) return terr("\"op\" must be a string");
            t.op = e["op"].get<std::string>();
        }
        if (e.contains("kind")) {
            const std::string k = e["kind"].is_string() ? e["kind"].get<std::string>() : "";
            if (k == "node") t.kind = RefKind::kNode;
            else if (k == "input") t.kind = RefKind::kInput;
            else if (k == "logits") t.kind = RefKind::kLogits;
            else return terr("\"kind\" must be \"node\", \"input\" or \"logits\"");
        }
        std::string order = "ggml";
        t.order_given = e.contains("order");
        if (e.contains("order")) {
            order = e["order"].is_string() ? e["order"].get<std::string>() : "";
            if (order == "token-first") order = "row-major";  // the same reading, under the name the naming maps use
            if (order != "ggml" && order != "row-major")
                return terr("\"order\" must be \"ggml\", \"row-major\" or \"token-first\"");
        }

        // The file must stay inside the folder: no absolute paths, no "..", no symlink escapes.
        const std::string rel = e["file"].get<std::string>();
        const fs::path relp(rel);
        bool escapes = relp.is_absolute() || relp.has_root_name() || relp.has_root_directory();
        for (const fs::path& part : relp) escapes = escapes || part == "..";
        if (escapes) return terr(fmt::format("\"file\": {} points outside the folder; use a path relative to it", quote_text(rel)));
        const fs::path full = fs::path(dir) / relp;
        if (!fs::exists(full, ec)) return terr(fmt::format("\"file\": {} does not exist", quote_text(full.string())));
        const fs::path real = fs::weakly_canonical(full, ec);
        if (ec || std::mismatch(root.begin(), root.end(), real.begin(), real.end()).first != root.end())
            return terr(fmt::format("\"file\": {} resolves to {}, outside the folder", quote_text(rel), quote_text(real.string())));

        auto arr = read_npy(full.string());
        if (!arr) return terr(arr.error().message);
        std::string why;
        if (!ne_from_shape(arr->shape, t.ne_, &why)) return terr(full.string() + ": " + why);
        if (e.contains("ne")) {
            const json& ne = e["ne"];
            if (!ne.is_array() || ne.empty() || ne.size() > 4)
                return terr("\"ne\" must be an array of 1 to 4 positive integers (ggml order, ne0 first)");
            int64_t want[4] = {1, 1, 1, 1}, n = 1;
            for (size_t k = 0; k < ne.size(); ++k) {
                if (!ne[k].is_number_integer() || ne[k].get<int64_t>() < 1 || ne[k].get<int64_t>() > kMaxDim)
                    return terr("\"ne\" must be an array of 1 to 4 positive integers (ggml order, ne0 first)");
                want[k] = ne[k].get<int64_t>();
                if (__builtin_mul_overflow(n, want[k], &n))
                    return terr(fmt::format("\"ne\" {}: the element count overflows 64 bits", ne.dump()));
            }
            const bool same = std::equal(want, want + 4, t.ne_);
            if (order == "ggml" && !same)
                return terr(fmt::format("{} has numpy shape ({}), which is ne {} in ggml order, but the manifest says "
                                        "ne {} (numpy shows ne reversed; use \"order\": \"row-major\" to re-view "
                                        "the data)", full.string(), fmt::join(arr->shape, ", "), ne_text(t.ne_),
                                        ne_text(want)));
            if (n != arr->n_elements())
                return terr(fmt::format("{} has {} elements (shape ({})) but \"ne\" {} has {}", full.string(),
                                        arr->n_elements(), fmt::join(arr->shape, ", "), ne_text(want), n));
            std::copy(want, want + 4, t.ne_);
        }
        t.stored_type = arr->stored_type;
        if (arr->in_place) {
            t.data = arr->in_place;
            owners.push_back(std::move(arr->owner));
        } else {
            storage.push_back(std::move(arr->converted));
            t.data = storage.back().data();  // the buffer does not move when `storage` grows
        }
        tensors.push_back(std::move(t));
    }
    folder.dump = ReferenceDump::from_tensors(dir, std::move(tensors), std::move(storage), std::move(owners));
    folder.dump->set_tokens(folder.prompt_tokens, folder.generated_tokens);
    return folder;
}

Result<std::unique_ptr<ReferenceDump>> open_npy_folder(const std::string& dir) {
    auto f = load_npy_folder(dir);
    if (!f) return f.error();
    return std::move(f.value().dump);
}

}  // namespace ls
